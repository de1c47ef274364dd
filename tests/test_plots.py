"""The figures: each writes a PNG from summary rows, and refuses summaries it cannot draw."""

from __future__ import annotations

from math import comb

import pytest

from gf2env.errors import GF2ConfigError
from gf2env.plots import (
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
    assert available_figures(summary_rows()) == ["gamma_vs_depth"]
    rows = summary_rows(agents=("A", "D(g//2)"), ps=(8, 12), samplings=("adversarial", "diagnostic"))
    assert available_figures(rows) == ["gamma_vs_depth", "heatmap", "sampling"]
    paths = write_figures(rows, tmp_path / "figs")
    names = sorted(p.name for p in paths)
    assert "gamma_vs_depth_p8_diagnostic.png" in names and "sampling_p12.png" in names
    assert any(n.startswith("heatmap_D") and "/" not in n for n in names)
    assert all(is_png(p) for p in paths)
    assert available_figures([]) == []
