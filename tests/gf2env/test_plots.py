"""The figures: each writes a PNG from summary rows, and refuses summaries it cannot draw."""

from __future__ import annotations

from math import comb

import pytest

from gf2env.errors import GF2ConfigError
from gf2env.report.plots import (
    available_figures,
    plot_gamma_vs_depth,
    plot_heatmap,
    plot_sampling_comparison,
    write_figures,
)

PNG = b"\x89PNG\r\n\x1a\n"


def summary_rows(agents=("A", "B"), ps=(12,), samplings=("adversarial",), depths=(0, 1, 3, 7)):
    rows = []
    for agent in agents:
        for sampling in samplings:
            for p in ps:
                chance = 1 / comb(p, 3)
                for g in depths:
                    gamma = 0.99 if agent == "A" else max(chance, 0.99 / (1 + g) ** 2)
                    rows.append(
                        {
                            "agent": agent,
                            "sampling": sampling,
                            "p": p,
                            "d": 4,
                            "K": 32,
                            "g": g,
                            "trials": 100,
                            "gamma_mean": gamma,
                            "gamma_lo": gamma * 0.8,
                            "gamma_hi": min(1.0, gamma * 1.2),
                            "accuracy": gamma,
                            "accuracy_lo": gamma * 0.8,
                            "accuracy_hi": min(1.0, gamma * 1.2),
                            "chance": chance,
                            "level": 0.95,
                        }
                    )
    return rows


def is_png(path) -> bool:
    return path.read_bytes()[:8] == PNG and path.stat().st_size > 1000


def test_gamma_vs_depth_writes_a_png(tmp_path):
    assert is_png(plot_gamma_vs_depth(summary_rows(), tmp_path / "fig3.png"))


def test_gamma_vs_depth_needs_p_and_sampling_when_ambiguous(tmp_path):
    rows = summary_rows(ps=(8, 12), samplings=("adversarial", "diagnostic"))
    with pytest.raises(GF2ConfigError, match="p"):
        plot_gamma_vs_depth(rows, tmp_path / "x.png")
    assert is_png(plot_gamma_vs_depth(rows, tmp_path / "ok.png", sampling="diagnostic", p=8))


def test_heatmap_and_its_errors(tmp_path):
    rows = summary_rows(ps=(8, 12, 16))
    assert is_png(plot_heatmap(rows, tmp_path / "fig4.png", agent="B"))
    with pytest.raises(GF2ConfigError, match="'Z'"):
        plot_heatmap(rows, tmp_path / "z.png", agent="Z")
    with pytest.raises(GF2ConfigError):
        plot_heatmap(summary_rows(ps=(12,)), tmp_path / "one.png", agent="B")


def test_sampling_comparison_and_its_error(tmp_path):
    rows = summary_rows(samplings=("adversarial", "diagnostic", "uniform"))
    assert is_png(plot_sampling_comparison(rows, tmp_path / "fig9.png"))
    with pytest.raises(GF2ConfigError):
        plot_sampling_comparison(summary_rows(), tmp_path / "none.png")


def test_write_figures_writes_what_the_summary_supports(tmp_path):
    assert available_figures([]) == []
    assert available_figures(summary_rows()) == ["gamma_vs_depth"]
    assert available_figures(summary_rows(ps=(8, 12))) == ["gamma_vs_depth", "heatmap"]
    two_modes = summary_rows(samplings=("adversarial", "uniform"))
    assert available_figures(two_modes) == ["gamma_vs_depth", "sampling"]
    # p=12 under both sampling modes, p=8 adversarial only: 3 + 1 + 1 figures.
    rows = summary_rows(agents=("A", "D(g//2)"), ps=(8, 12))
    rows += summary_rows(agents=("A", "D(g//2)"), ps=(12,), samplings=("diagnostic",))
    assert available_figures(rows) == ["gamma_vs_depth", "heatmap", "sampling"]
    paths = write_figures(rows, tmp_path / "figs", heatmap_agent="D(g//2)")
    assert [p.name for p in paths] == [
        "gamma_vs_depth_p8_adversarial.png",
        "gamma_vs_depth_p12_adversarial.png",
        "gamma_vs_depth_p12_diagnostic.png",
        "heatmap_D_g_2_adversarial.png",
        "sampling_p12.png",
    ]
    assert all(p.parent == tmp_path / "figs" and is_png(p) for p in paths)


def test_errors_name_the_values_present(tmp_path):
    rows = summary_rows(ps=(8, 12), samplings=("adversarial", "diagnostic"))
    with pytest.raises(GF2ConfigError, match=r"several p values \[8, 12\]; pass p="):
        plot_gamma_vs_depth(rows, tmp_path / "x.png")
    with pytest.raises(GF2ConfigError, match=r"several sampling values \['adversarial', 'diagnostic'\]"):
        plot_gamma_vs_depth(rows, tmp_path / "x.png", p=8)
    with pytest.raises(GF2ConfigError, match=r"p=16.*values present are \[8, 12\]"):
        plot_gamma_vs_depth(rows, tmp_path / "x.png", p=16, sampling="diagnostic")
    with pytest.raises(GF2ConfigError, match=r"the agents are \['A', 'B'\]"):
        plot_heatmap(rows, tmp_path / "x.png", agent="Z", sampling="adversarial")
    with pytest.raises(GF2ConfigError, match="several sampling values"):
        plot_heatmap(rows, tmp_path / "x.png", agent="A")
    with pytest.raises(GF2ConfigError, match=r"only p=\[12\].*at least 2 p values"):
        plot_heatmap(summary_rows(), tmp_path / "x.png", agent="A")
    with pytest.raises(GF2ConfigError, match=r"only sampling=\['adversarial'\].*at least 2 sampling modes"):
        plot_sampling_comparison(summary_rows(), tmp_path / "x.png")
    with pytest.raises(GF2ConfigError, match="several p values"):
        plot_sampling_comparison(rows, tmp_path / "x.png")
    with pytest.raises(GF2ConfigError, match="no rows"):
        plot_gamma_vs_depth([], tmp_path / "x.png")
    with pytest.raises(GF2ConfigError, match=r"lacks the columns \['gamma_lo', 'gamma_hi'\]"):
        bare = {k: v for k, v in rows[0].items() if k not in ("gamma_lo", "gamma_hi")}
        plot_gamma_vs_depth([bare], tmp_path / "x.png")
    assert not list(tmp_path.iterdir())


def test_zero_gamma_settings_and_single_depth_still_draw(tmp_path):
    rows = summary_rows(ps=(8, 12), depths=(0, 2, 5))
    for row in rows:
        if row["agent"] == "B" and row["g"] == 5:
            row.update(gamma_mean=0.0, gamma_lo=0.0)
    other_d = [{**row, "d": 3, "chance": 1 / comb(row["p"], 2)} for row in rows]
    assert is_png(plot_gamma_vs_depth(rows + other_d, tmp_path / "dk.png", p=8))  # one line per (agent, d)
    assert is_png(plot_heatmap(rows, tmp_path / "zero.png", agent="B"))
    with pytest.raises(GF2ConfigError, match="several d values"):
        plot_heatmap(rows + other_d, tmp_path / "x.png", agent="B")
    assert is_png(plot_heatmap(rows + other_d, tmp_path / "d3.png", agent="B", d=3))
    single = summary_rows(depths=(4,))
    assert is_png(plot_gamma_vs_depth(single, tmp_path / "single.png", title="one depth"))


def test_write_figures_checks_heatmap_agent_first(tmp_path):
    with pytest.raises(GF2ConfigError, match="'Z' is not in the summary"):
        write_figures(summary_rows(ps=(8, 12)), tmp_path / "out", heatmap_agent="Z")
    with pytest.raises(GF2ConfigError, match="fewer than 2 p values"):
        write_figures(summary_rows(), tmp_path / "out", heatmap_agent="A")
    assert not (tmp_path / "out").exists()


def test_filename_stems_are_safe_and_distinct():
    from gf2env.report.plots import _stems

    stems = _stems(["partial(k=3)/x", "../", "a", "a_1", "a/", "a?"])
    assert list(stems.values()) == ["partial_k_3_x", "agent", "a", "a_1", "a_2", "a_3"]


def test_importing_plots_draws_nothing():
    import subprocess
    import sys

    code = "import sys, gf2env.report.plots; assert 'matplotlib.pyplot' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
