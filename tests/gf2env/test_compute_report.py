"""Compute per step: the optional compute columns of results and summaries, their table, and the
γ-against-compute figure with its Pareto frontier (old files without the columns still read and plot)."""

from __future__ import annotations

import csv
import subprocess
import sys
from math import comb
from pathlib import Path

import pytest

from gf2env.errors import GF2ConfigError
from gf2env.report.compute_plot import (
    has_compute,
    pareto_frontier,
    plot_gamma_vs_compute,
    write_compute_figures,
)
from gf2env.report.results import (
    format_compute,
    read_results_csv,
    read_summary_csv,
    summarize,
    write_results_csv,
    write_summary_csv,
)
from gf2env.report.schema import COMPUTE_COLUMNS, RESULTS, SUMMARY
from tests.gf2env.test_results import row
from tests.paths import REPO

PNG = b"\x89PNG\r\n\x1a\n"


def gf2(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gf2env", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)  # fmt: skip


def write_old(path: Path, columns: tuple[str, ...], rows: list[dict]) -> Path:
    """A CSV as written before the compute columns existed: only the ``columns`` given."""
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def llm(**kw):  # an LLM's row: tokens, model and sandbox time
    cost = {"prompt_tokens": 100.0, "completion_tokens": 50.0, "model_ms": 800.0, "sandbox_runs": 1.0,
            "sandbox_ms": 40.0, "wall_ms": 840.0}  # fmt: skip
    return row(agent="llm", **{**cost, **kw})


def test_old_results_and_summaries_without_compute_read_summarize_and_plot(tmp_path):
    rows = [row(trial=t, g=g) for g in (0, 1) for t in range(3)]
    old_results = write_old(tmp_path / "old_results.csv", RESULTS.required, rows)
    assert "wall_ms" not in old_results.read_text()
    back = read_results_csv(old_results)
    assert len(back) == 6 and all(r[c] is None for r in back for c in COMPUTE_COLUMNS)
    summary = summarize(back)
    assert all(s[c] is None for s in summary for c in COMPUTE_COLUMNS) and not has_compute(summary)
    assert format_compute(summary) == ""
    assert write_compute_figures(summary, tmp_path / "none") == ([], [])
    (tmp_path / "old").mkdir()
    old_summary = write_old(tmp_path / "old" / "summary.csv", SUMMARY.required, summary)
    assert read_summary_csv(old_summary) == summary
    for table in (old_summary, old_results):  # gf2 plot: the depth figure, no compute figure, said so
        run = gf2("plot", str(table), "--out", str(tmp_path / table.stem), "--compute", "total_tokens")
        assert run.returncode == 0, run.stderr
        assert "no compute columns" in run.stdout
        names = sorted(p.name for p in (tmp_path / table.stem).iterdir())
        assert names == ["gamma_vs_depth_p12_adversarial.png"]


def test_compute_round_trips_and_the_summary_averages_what_is_known(tmp_path):
    rows = [
        llm(trial=0),
        llm(trial=1, prompt_tokens=200.0, wall_ms=1040.0, model_ms=1000.0),
        llm(trial=2, prompt_tokens=None, completion_tokens=None),  # a server that counts no tokens
        row(agent="A", trial=0, wall_ms=0.02),
        row(agent="A", trial=1, wall_ms=0.04),
        row(agent="old", trial=0),  # no compute at all
    ]
    path = tmp_path / "results.csv"
    write_results_csv(path, rows)
    back = read_results_csv(path)
    assert back[1]["prompt_tokens"] == 200.0 and back[2]["prompt_tokens"] is None
    assert back[3]["wall_ms"] == 0.02 and back[3]["model_ms"] is None
    summary = {s["agent"]: s for s in summarize(back)}
    assert summary["llm"]["prompt_tokens"] == pytest.approx(150.0)  # the mean of the 2 rows that know it
    assert summary["llm"]["model_ms"] == pytest.approx(2600 / 3) and summary["llm"]["sandbox_runs"] == 1.0
    assert summary["A"]["wall_ms"] == pytest.approx(0.03) and summary["A"]["prompt_tokens"] is None
    assert all(summary["old"][c] is None for c in COMPUTE_COLUMNS)
    write_summary_csv(tmp_path / "summary.csv", summary.values())
    assert read_summary_csv(tmp_path / "summary.csv") == list(summary.values())
    lines = format_compute(summary.values()).splitlines()
    assert lines[0].split() == ["agent", "g", "γ", "tokens", "wall", "ms", "model", "ms", "sandbox", "runs",
                                "sandbox", "ms"]  # fmt: skip
    assert lines[2].split() == ["llm", "0", "1.000", "200", "907", "866.7", "1.00", "40"]
    assert lines[3].split() == ["A", "0", "1.000", "-", "0.03", "-", "-", "-"]
    assert lines[4].split() == ["old", "0", "1.000", "-", "-", "-", "-", "-"]  # shown, not dropped
    estimators_only = format_compute([summary["A"]]).splitlines()
    assert estimators_only[0].split() == ["agent", "g", "γ", "wall", "ms"]
    with pytest.raises(GF2ConfigError, match="wall_ms=-1.0 is negative"):
        summarize([row(wall_ms=-1.0)])


def summary_row(agent: str, g: int, gamma: float, **compute) -> dict:
    chance = 1 / comb(12, 3)
    return {"agent": agent, "sampling": "adversarial", "p": 12, "d": 4, "K": 32, "g": g, "trials": 100,
            "gamma_mean": gamma, "gamma_lo": max(0.0, gamma - 0.1), "gamma_hi": min(1.0, gamma + 0.1),
            "accuracy": gamma, "accuracy_lo": 0.0, "accuracy_hi": 1.0, "chance": chance, "level": 0.95,
            **{c: None for c in COMPUTE_COLUMNS}, **compute}  # fmt: skip


def test_pareto_frontier_on_a_hand_made_summary():
    # wall ms per step and γ at one depth: C is cheapest, A dominates B (cheaper, better), D ties E's
    # cost with a higher γ, and F costs most for less than D.
    summary = [
        summary_row("C", 0, 0.01, wall_ms=0.001),
        summary_row("A", 0, 0.60, wall_ms=0.01),
        summary_row("B", 0, 0.40, wall_ms=0.05),
        summary_row("E", 0, 0.70, wall_ms=2.0),
        summary_row("D", 0, 0.90, wall_ms=2.0),
        summary_row("F", 0, 0.85, wall_ms=900.0),
    ]
    points = [(s["wall_ms"], s["gamma_mean"]) for s in summary]
    assert pareto_frontier(points) == [(0.001, 0.01), (0.01, 0.60), (2.0, 0.90)]
    assert pareto_frontier([]) == []
    assert pareto_frontier([(5.0, 0.5), (1.0, 0.5)]) == [(1.0, 0.5)]  # equal γ: the cheaper one only


def test_the_figure_for_a_mix_of_agents_leaves_out_what_it_cannot_draw(tmp_path):
    summary = []
    for g, decay in ((0, 1.0), (3, 0.5), (7, 0.25)):
        summary += [
            summary_row("A", g, 0.9 * decay, wall_ms=0.02 * (g + 1)),
            summary_row("C", g, 0.01, wall_ms=0.005),
            summary_row(
                "llm",
                g,
                0.5,
                wall_ms=900.0,
                model_ms=880.0,
                prompt_tokens=400.0 + 50 * g,
                completion_tokens=60.0,
                sandbox_runs=0.0,
                sandbox_ms=0.0,
            ),  # fmt: skip
            summary_row(
                "tools",
                g,
                0.8,
                wall_ms=1500.0,
                model_ms=1200.0,
                prompt_tokens=900.0,
                completion_tokens=120.0,
                sandbox_runs=1.5,
                sandbox_ms=300.0,
            ),  # fmt: skip
        ]
    path, notes = plot_gamma_vs_compute(summary, tmp_path / "wall.png")
    assert path.read_bytes()[:8] == PNG and path.stat().st_size > 5000 and notes == []
    path, notes = plot_gamma_vs_compute(summary, tmp_path / "tokens.png", "total_tokens")
    assert path.read_bytes()[:8] == PNG
    assert notes == ["A has no total_tokens at g = 0, 3, 7: left out of tokens.png",
                     "C has no total_tokens at g = 0, 3, 7: left out of tokens.png"]  # fmt: skip
    _, notes = plot_gamma_vs_compute(summary, tmp_path / "runs.png", "sandbox_runs")
    assert notes[-1] == "llm has sandbox_runs = 0 at g = 0, 3, 7 (a log axis has no 0): left out of runs.png"
    with pytest.raises(GF2ConfigError, match="'flops' is not one of"):
        plot_gamma_vs_compute(summary, tmp_path / "x.png", "flops")
    estimators = [s for s in summary if s["agent"] in ("A", "C")]
    with pytest.raises(GF2ConfigError, match="no agent here has model_ms"):
        plot_gamma_vs_compute(estimators, tmp_path / "x.png", "model_ms")
    paths, notes = write_compute_figures(estimators, tmp_path / "out", "model_ms")
    assert paths == [] and notes == ["no agent has model_ms at p=12, adversarial, d=4, K=32: no "
                                     "gamma_vs_model_ms_p12_adversarial.png"]  # fmt: skip
    # gf2 plot on a summary with compute: the figure of the measure asked for, and the notes
    table = tmp_path / "cli" / "summary.csv"
    table.parent.mkdir()
    write_summary_csv(table, summary)
    run = gf2("plot", str(table), "--compute", "total_tokens")
    assert run.returncode == 0, run.stderr
    assert "note: A has no total_tokens at g = 0, 3, 7" in run.stdout
    assert (tmp_path / "cli" / "gamma_vs_total_tokens_p12_adversarial.png").read_bytes()[:8] == PNG
    bad = gf2("plot", str(table), "--compute", "flops")
    assert bad.returncode == 2 and "invalid choice: 'flops'" in bad.stderr
