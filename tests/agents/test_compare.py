"""The evaluation harness, ``gf2 compare`` / ``plot`` / ``fit`` end to end, and the config presets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gf2env.agents.harness.compare import CompareConfig, load_config, run_compare
from gf2env.agents.harness.evaluate import evaluate, make_agents
from gf2env.agents.harness.grid import Grid, grid_cells, record_cells
from gf2env.errors import GF2ConfigError
from gf2env.records.files import read_records
from gf2env.report.d_curve import simulate_d_curve
from gf2env.report.results import read_results_csv, read_summary_csv
from gf2env.task.oracle import TaskConfig
from tests.measured import unmeasured
from tests.paths import REFERENCE as REFERENCE_DIR
from tests.paths import REPO as ROOT

REFERENCE = REFERENCE_DIR / "experiments_llm_large_adversarial.json"


def gf2(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gf2env", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def test_grid_rows_are_tidy_and_skips_are_reported():
    grid = Grid(depths=(0, 1, 9), trials=7, p=(7,), d=(3,), K=(10,), seed=2)
    ev = evaluate(make_agents(["A", "B-exact", "C"]), grid_cells(grid), seed=2, progress=False)
    assert len(ev.rows) == 7 * 3 + 7 * 3 + 7 * 2  # B-exact cannot run at g=9 (p=7: at most 7 unknown)
    report = ev.skipped_report()
    assert len(report) == 1
    assert report[0].startswith("B-exact skipped at g = 9 (grid, p=7 d=3 K=10 adversarial)")
    assert "at most 7 unknown terms" in report[0]
    row = ev.rows[0]
    assert set(row) >= {"agent", "gamma", "correct", "g", "trial", "n", "seed"}
    assert {r["n"] for r in ev.rows if r["g"] == 9} == {10}  # n = g + 1 by default


def test_evaluation_is_deterministic_and_records_match_the_grid(tmp_path):
    grid = Grid(depths=(0, 2), trials=6, p=(7,), d=(3,), K=(6,), seed=4)
    agents = make_agents(["A", "B", "D(k=1)"])
    first = evaluate(agents, grid_cells(grid), seed=4, progress=False).rows
    second = evaluate(agents, grid_cells(grid), seed=4, progress=False).rows
    assert unmeasured(first) == unmeasured(second)  # all but the measured compute columns
    assert all(r["wall_ms"] > 0 for r in first + second)
    # gf2 generate writes the same records for the same seed: evaluating the file gives the same γ.
    out = tmp_path / "recs.json"
    gen = gf2("generate", "--depths", "0,2", "--trials", "6", "--p", "7", "--d", "3", "--K", "6",
              "--n", "g+1", "--seed", "4", "--out", str(out), "--quiet")  # fmt: skip
    assert gen.returncode == 0, gen.stderr
    from_file = evaluate(agents, record_cells(read_records(out), out.name), progress=False).rows
    key = lambda r: (r["agent"], r["g"], r["trial"] % 6)  # noqa: E731
    grid_gamma = {key(r): r["gamma"] for r in first}
    file_gamma = {key(r): r["gamma"] for r in from_file}
    assert grid_gamma == pytest.approx(file_gamma)


def test_run_compare_writes_results_summary_and_figures(tmp_path):
    modes = ("adversarial", "diagnostic")
    grid = Grid(depths=(0, 1, 3), trials=30, p=(8, 10), d=(3,), K=(12,), sampling=modes)
    config = CompareConfig(agents=("A", "B", "C"), grid=grid, out=tmp_path / "run")
    report = run_compare(config, progress=False)
    rows = read_results_csv(report.results_csv)
    assert len(rows) == 3 * grid.num_records
    summary = read_summary_csv(report.summary_csv)
    assert len(summary) == 3 * 2 * 2 * 3
    names = sorted(p.name for p in report.figures)
    assert any(n.startswith("heatmap_") for n in names) and any(n.startswith("sampling_") for n in names)
    assert any(n.startswith("gamma_vs_depth_") for n in names)
    # every estimator's step has its own wall time: the summary's means, a γ-against-ms figure a setting
    assert all(r["wall_ms"] > 0 and r["prompt_tokens"] is None for r in rows)
    assert all(s["wall_ms"] > 0 for s in summary)
    assert sorted(n for n in names if n.startswith("gamma_vs_wall_ms_")) == [
        f"gamma_vs_wall_ms_p{p}_{m}.png" for p in (10, 8) for m in modes
    ]
    assert any(n.startswith("compute per step") and "wall ms" in n for n in report.notes)
    for fig in report.figures:
        assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    c = [s for s in summary if s["agent"] == "C"]
    assert all(s["gamma_mean"] == pytest.approx(s["chance"]) for s in c)
    # Diagnostic payloads make A exact: the all-ones and one-bit-cleared rows pin the support.
    assert all(s["gamma_mean"] == 1.0 for s in summary if s["agent"] == "A" and s["sampling"] == "diagnostic")


def test_presets_load_and_match_the_issue():
    config = load_config(ROOT / "configs" / "compare/paper-estimators.yaml")
    assert config.grid.p == (12,) and config.grid.d == (4,) and config.grid.K == (32,)
    assert config.grid.depths == (0, 1, 3, 7, 15, 31, 63, 127) and config.grid.trials == 2000
    assert {"A", "B", "C", "D(g//2)"} <= {a.name for a in make_agents(config.agents)}
    for folder in ("compare", "eval"):  # configs/train/ holds training runs (tests/train/)
        for path in sorted((ROOT / "configs" / folder).glob("*.yaml")):
            load_config(path)


def test_config_errors_name_the_problem(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents: [A]\ngrid: {depths: [0], trials: 5, colour: red}\n")
    with pytest.raises(GF2ConfigError, match="unknown keys \\['colour'\\]"):
        load_config(bad)
    bad.write_text("agents: [A]\ngird: {}\n")
    with pytest.raises(GF2ConfigError, match="unknown keys \\['gird'\\]"):
        load_config(bad)
    bad.write_text("agents: [A, Z]\ngrid: {depths: [0], trials: 5}\n")
    with pytest.raises(GF2ConfigError, match="Unknown estimator 'Z'"):
        load_config(bad)
    with pytest.raises(GF2ConfigError, match="listed twice"):
        make_agents(["A", "A"])
    with pytest.raises(GF2ConfigError, match="exactly one of grid and records"):
        CompareConfig(agents=("A",))
    with pytest.raises(GF2ConfigError, match="n=3"):
        Grid(depths=(0, 5), trials=1, n=3)


def test_cli_compare_plot_and_fit(tmp_path):
    out = tmp_path / "cmp"
    run = gf2("compare", "--agents", "A,B,D(k=1),C", "--depths", "0,1,3,7", "--trials", "60",
              "--out", str(out), "--quiet")  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "γ [95% CI]" in run.stdout and (out / "results.csv").exists() and (out / "summary.csv").exists()
    from gf2env.report.fit import read_fits_csv

    compared = read_fits_csv(out / "fit.csv")  # compare fits every agent by both methods
    assert [(r["agent"], r["method"]) for r in compared] == [
        (a, m) for a in ("A", "B", "D(k=1)", "C") for m in ("interpolated", "paper")
    ]
    assert all(r["v"] == int(r["v"]) for r in compared if r["method"] == "paper")
    redraw = gf2("plot", str(out / "summary.csv"), "--out", str(tmp_path / "figs"))
    assert redraw.returncode == 0, redraw.stderr
    assert list((tmp_path / "figs").glob("gamma_vs_depth_*.png"))
    curve = tmp_path / "curve.csv"
    compare_fit = (out / "fit.csv").read_bytes()
    fit = gf2("fit", str(out / "results.csv"), "--agent", "D(k=1)", "--agent", "B", "--curve", str(curve),
              "--curve-trials", "60", "--value", "gamma", "--quiet")  # fmt: skip
    assert fit.returncode == 0, fit.stderr
    assert (out / "fit.csv").read_bytes() == compare_fit  # gf2 fit writes its own file, not compare's
    own = out / "fit-gamma-D_k=1-B.csv"
    assert curve.exists() and f"wrote {own}" in fit.stdout
    text = own.read_text()
    assert "D(k=1)" in text and "delta_aic" in text
    assert "ΔAIC" in fit.stdout and "paper method" in fit.stdout and "interpolated method" in fit.stdout
    assert {r["method"] for r in read_fits_csv(own)} == {"interpolated", "paper"}
    assert {(r["p"], r["d"], r["K"], r["sampling"], r["value"]) for r in read_fits_csv(own)} == {
        (12, 4, 32, "adversarial", "gamma")
    }
    paper = gf2("fit", str(out / "results.csv"), "--agent", "B", "--curve", str(curve), "--method", "paper",
                "--out", str(tmp_path / "paper.csv"), "--quiet")  # fmt: skip
    assert paper.returncode == 0, paper.stderr
    assert [(r["agent"], r["method"]) for r in read_fits_csv(tmp_path / "paper.csv")] == [("B", "paper")]
    bad = gf2("fit", str(out / "results.csv"), "--method", "exact", "--quiet")
    assert bad.returncode == 2 and "--method" in bad.stderr and "'paper'" in bad.stderr


def test_cli_errors_are_one_line():
    run = gf2("compare", "--agents", "A,Q", "--depths", "0", "--trials", "1", "--quiet", "--no-plots")
    assert run.returncode == 2 and "Unknown estimator 'Q'" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.slow
def test_effective_prefix_fit_recovers_d_itself():
    # Estimator D fitted against the simulated D curve: knowing g/2 terms gives u near 1/2 (the
    # depths make u*g whole), knowing 2 terms gives v near 2, and each prefers its own model.
    from gf2env.report.depth_counts import DepthCounts
    from gf2env.report.fit import fit_effective_prefix

    depths = (2, 4, 6, 8)
    curve = simulate_d_curve(TaskConfig(p=12, d=4, K=32), depths, trials=300, seed=1, progress=False)
    for g in depths:
        assert np.all(np.diff(curve.table[g]) > -0.05)  # knowing more terms helps (up to noise)
        assert curve.table[g][-1] > 0.98  # k = g is estimator A
    grid = Grid(depths=depths, trials=400, seed=7)
    rows = evaluate(make_agents(["D(u=0.5)", "D(k=2)"]), grid_cells(grid), seed=7, progress=False).rows
    half = fit_effective_prefix(DepthCounts.from_rows(rows, agent="D(u=0.5)", value="gamma"), curve)
    two = fit_effective_prefix(DepthCounts.from_rows(rows, agent="D(k=2)", value="gamma"), curve)
    assert abs(half.u - 0.5) < 0.1 and half.preferred == "proportional"
    assert abs(two.v - 2) < 0.5 and two.preferred == "constant"


@pytest.mark.slow
def test_paper_fit_of_d_half_on_its_own_records():
    # Estimator D(g//2) at the paper's depths, on the very records the D curve is simulated on (the
    # grid and the curve draw the same records of a seed): the paper's method recovers u = 0.47
    # (round(u*g) = g//2 at every depth for u in (0.4677, 0.5)), reproducing each depth; the
    # interpolated fit sits near 1/3, pulled there by g = 3 (k = 1 of 3).
    from gf2env.report.depth_counts import DepthCounts
    from gf2env.report.fit import PAPER_U_GRID, fit_effective_prefix

    depths = (0, 1, 3, 7, 15, 31)
    curve = simulate_d_curve(TaskConfig(p=12, d=4, K=32), depths, trials=200, seed=3, progress=False)
    rows = evaluate(make_agents(["D(g//2)"]), grid_cells(Grid(depths=depths, trials=200, seed=3)), seed=3,
                    progress=False).rows  # fmt: skip
    counts = DepthCounts.from_rows(rows, agent="D(g//2)", value="gamma")
    np.testing.assert_allclose(counts.observed, [curve.table[g][g // 2] for g in depths], rtol=1e-12)
    paper = fit_effective_prefix(counts, curve, method="paper")
    assert paper.u == PAPER_U_GRID[47] and paper.preferred == "proportional"
    np.testing.assert_allclose(paper.predicted_proportional, paper.observed, rtol=1e-12)
    assert 0.25 < fit_effective_prefix(counts, curve).u < 0.4


def test_compare_on_the_papers_reference_file(tmp_path):
    if not REFERENCE.exists():
        pytest.skip(f"the paper's reference file is not at {REFERENCE}")
    run = gf2(
        "compare", "--records", str(REFERENCE), "--agents", "A,B,decoder", "--out", str(tmp_path), "--quiet"
    )
    assert run.returncode == 0, run.stderr
    rows = read_results_csv(tmp_path / "results.csv")
    assert {r["sampling"] for r in rows} == {"adversarial"}
    gamma_a = [r["gamma"] for r in rows if r["agent"] == "A"]
    assert len(gamma_a) == 20 and np.mean(gamma_a) > 0.99


def test_the_embedded_default_is_the_paper_estimators_preset():
    from gf2env.agents.harness.compare import default_config

    assert default_config() == load_config(ROOT / "configs" / "compare/paper-estimators.yaml")


def test_d_curve_is_estimator_d_on_the_same_records():
    """The D curve (gf2env.report.d_curve) computes estimator D's γ itself: it must equal agents' D."""
    from gf2env.agents.estimators import KnownTerms, Partial
    from gf2env.records.record import generate_record
    from gf2env.report.d_curve import d_gamma
    from gf2env.task.posterior import StepBatch

    config = TaskConfig(p=8, d=3, K=16, n=4)
    batch = StepBatch.from_records([generate_record(config, 3, t, 5) for t in range(40)])
    for k in range(4):
        estimate = Partial(KnownTerms(count=k)).evaluate(batch, np.random.default_rng(0))
        assert np.array_equal(d_gamma(batch, k), estimate.gamma)


def _small_records(path: Path, p: int = 6, trials: int = 5) -> list:
    from gf2env.records.record import generate_record, write_records

    config = TaskConfig(p=p, d=3, n=4, K=12)
    records = [generate_record(config, g, t, 0) for g in (0, 2) for t in range(trials)]
    write_records(path, records)
    return records


def test_a_configs_records_key_is_evaluated_and_a_missing_file_is_refused(tmp_path):
    _small_records(tmp_path / "recs.json")
    config = tmp_path / "on-file.yaml"
    recs, out = tmp_path / "recs.json", tmp_path / "out"
    config.write_text(f"agents: [A]\nrecords: {recs}\nout: {out}\nfit: false\n")
    run = gf2("compare", "--config", str(config), "--quiet", "--no-plots")
    assert run.returncode == 0, run.stderr
    rows = read_results_csv(tmp_path / "out" / "results.csv")
    assert len(rows) == 10 and {r["p"] for r in rows} == {6}  # the file's 10 records, not a default grid
    # Relative paths in a config are read from the working directory, like out: and sb3 path:.
    config.write_text("agents: [A]\nrecords: recs.json\nout: out2\nfit: false\n")
    assert gf2("compare", "--config", str(config), "--quiet", "--no-plots", cwd=tmp_path).returncode == 0
    assert len(read_results_csv(tmp_path / "out2" / "results.csv")) == 10
    config.write_text(f"agents: [A]\nrecords: {tmp_path / 'nope.json'}\nout: {tmp_path / 'out3'}\n")
    for cmd in ("compare", "eval"):
        run = gf2(cmd, "--config", str(config), "--quiet")
        assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr
        assert f"no records file at {tmp_path / 'nope.json'} (a relative path" in run.stderr, run.stderr
        assert "fix the path, or write one with gf2 generate" in run.stderr, run.stderr
    assert not (tmp_path / "out3").exists()
    # A config's records and grid flags do not mix (the flags would be ignored).
    config.write_text(f"agents: [A]\nrecords: {tmp_path / 'recs.json'}\nout: {tmp_path / 'out4'}\n")
    run = gf2("compare", "--config", str(config), "--depths", "0,1", "--quiet")
    assert run.returncode != 0 and "drop ['depths']" in run.stderr, run.stderr


@pytest.mark.parametrize(
    ("cmd", "yaml", "named"),
    [
        (
            "compare",
            "agents: [A]\nplots: 'no'",
            "plots='no' is not a boolean; write plots: true or plots: false",
        ),
        ("compare", "agents: [A]\nfit: 'false'", "fit='false' is not a boolean; write fit: true or fit"),
        ("eval", "agents: [{llm: {model: m, base_url: 'http://127.0.0.1:9', tools: 'no'}}]", "tools='no'"),
    ],
)
def test_config_booleans_must_be_real_booleans(tmp_path, cmd, yaml, named):
    # bool('no') is True: the run would draw the plots the config turns off, and exit 0.
    config = tmp_path / "c.yaml"
    config.write_text(
        f"{yaml}\ngrid: {{depths: [0], trials: 2, p: [6], d: [3], K: [8]}}\nout: {tmp_path / 'o'}\n"
    )
    run = gf2(cmd, "--config", str(config), "--quiet")
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr
    assert named in run.stderr, run.stderr
    assert not (tmp_path / "o").exists()


def test_a_lone_record_of_another_setting_is_named(tmp_path):
    # A file may mix settings (the paper's group by shape), but one record at a p of its own is a
    # setting resting on one trial: the run says so (and an edited p breaks its labels: refused).
    import json

    from gf2env.records.record import generate_record, write_records

    records = _small_records(tmp_path / "recs.json")
    lone = generate_record(TaskConfig(p=7, d=3, n=4, K=12), 2, 0, 0)
    write_records(tmp_path / "mixed.json", [*records[:3], lone, *records[3:]])
    run = gf2(
        "compare",
        "--records",
        str(tmp_path / "mixed.json"),
        "--agents",
        "A",
        "--out",
        str(tmp_path / "o"),
        "--quiet",
        "--no-plots",
        "--no-fit",
    )
    assert run.returncode == 0, run.stderr
    assert "note: record 3 is the only one at p=7 d=3 K=12 in the file" in run.stdout, run.stdout
    assert "only one at p=6" not in run.stdout
    assert {(r["p"], r["trials"]) for r in read_summary_csv(tmp_path / "o" / "summary.csv")} >= {(7, 1)}
    objs = json.loads((tmp_path / "recs.json").read_text())
    objs[4]["p"] = 7
    (tmp_path / "edited.json").write_text(json.dumps(objs))
    run = gf2(
        "compare",
        "--records",
        str(tmp_path / "edited.json"),
        "--agents",
        "A",
        "--out",
        str(tmp_path / "e"),
        "--quiet",
    )
    assert run.returncode != 0 and "Record 4: the label of sample" in run.stderr, run.stderr
