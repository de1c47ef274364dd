"""γ_g against what a step cost: a Pareto view per depth, for any mix of agents.

One panel per depth g; one point per agent at its mean compute per step (a measure of
:data:`~gf2env.report.results.COMPUTE_MEASURES`; default ``wall_ms``, which every agent the harness
runs has) and its γ_g, with the Jeffreys interval as an error bar, on a log x axis. The Pareto
frontier (the highest γ_g for at most that compute) is a step line. An agent without the measure at
a depth (an estimator has no tokens), or with 0 of it (a log axis has no 0), is left out of that
panel and a note says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gf2env.errors import GF2ConfigError
from gf2env.report.plots import (
    _CHANCE_LABEL,
    _agents,
    _groups,
    _new_figure,
    _rows,
    _save,
    _select,
    _setting,
    _style,
)
from gf2env.report.results import compute_value
from gf2env.report.schema import COMPUTE_COLUMNS, COMPUTE_MEASURES, is_blank

if TYPE_CHECKING:
    from matplotlib.axes import Axes

DEFAULT_MEASURE = "wall_ms"
_LABELS = {
    "wall_ms": "wall ms per step",
    "model_ms": "model ms per step",
    "prompt_tokens": "prompt tokens per step",
    "completion_tokens": "completion tokens per step",
    "total_tokens": "tokens per step (prompt + completion)",
    "sandbox_runs": "sandbox runs per step",
    "sandbox_ms": "sandbox ms per step",
}
_PANELS_A_ROW = 4


def has_compute(summary: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any summary row has a compute column (summaries written before them have none)."""
    return any(not is_blank(row.get(c)) for row in summary for c in COMPUTE_COLUMNS)


def check_measure(measure: str) -> str:
    if measure not in COMPUTE_MEASURES:
        raise GF2ConfigError(f"compute measure {measure!r} is not one of {list(COMPUTE_MEASURES)}; pass one.")
    return measure


def pareto_frontier(points: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The ``(compute, γ)`` points that no cheaper (or equally cheap) point matches: by compute, each
    with a higher γ than all before it."""
    out: list[tuple[float, float]] = []
    for x, y in sorted(points, key=lambda point: (point[0], -point[1])):
        if not out or y > out[-1][1]:
            out.append((x, y))
    return out


def plot_gamma_vs_compute(
    summary: Iterable[Mapping[str, Any]],
    path: str | Path,
    measure: str = DEFAULT_MEASURE,
    sampling: str | None = None,
    p: int | None = None,
    *,
    d: int | None = None,
    K: int | None = None,
) -> tuple[Path, list[str]]:
    """γ_g against ``measure`` per step, a panel a depth, for one setting (``p``, ``sampling``, ``d``,
    ``K`` are needed where the summary holds several); returns the figure and the notes of the agents
    left out."""
    check_measure(measure)
    rows = _rows(summary)
    order = _agents(rows)
    what = "plot_gamma_vs_compute"
    for key, value in (("p", p), ("sampling", sampling), ("d", d), ("K", K)):
        rows = _select(rows, key, value, what)
    points: dict[int, list[tuple[str, float, Mapping[str, Any]]]] = {}
    lacking: dict[str, list[int]] = {}
    zero: dict[str, list[int]] = {}
    for row in rows:
        x = compute_value(row, measure)
        if x is None:
            lacking.setdefault(row["agent"], []).append(row["g"])
        elif x <= 0:
            zero.setdefault(row["agent"], []).append(row["g"])
        else:
            points.setdefault(row["g"], []).append((row["agent"], x, row))
    name = Path(path).name
    notes = [
        f"{agent} has no {measure} at g = {_depths(gs)}: left out of {name}" for agent, gs in lacking.items()
    ]
    notes += [
        f"{agent} has {measure} = 0 at g = {_depths(gs)} (a log axis has no 0): left out of {name}"
        for agent, gs in zero.items()
    ]
    if not points:
        raise GF2ConfigError(
            f"{what}: no agent here has {measure} > 0 ({'; '.join(notes)}); pick another measure of "
            f"{list(COMPUTE_MEASURES)}."
        )
    depths = sorted(points)
    cols = min(_PANELS_A_ROW, len(depths))
    fig = _new_figure(3.1 * cols + 1.6, 2.8 * math.ceil(len(depths) / cols) + 0.5)
    handles: dict[str, Any] = {}
    for j, g in enumerate(depths):
        ax = fig.add_subplot(math.ceil(len(depths) / cols), cols, j + 1)
        handles.update(_panel(ax, points[g], order))
        ax.set_title(f"g = {g}", fontsize="medium")
        ax.set_xlabel(_LABELS[measure], fontsize="small")
        if j % cols == 0:
            ax.set_ylabel("γ_g")
    fig.legend(list(handles.values()), list(handles), loc="outside right upper", fontsize="small")
    setting = ", ".join(
        s for s in (f"p={rows[0]['p']}", _setting(rows), f"{rows[0]['sampling']} sampling") if s
    )
    fig.suptitle(f"γ_g against {_LABELS[measure]} ({setting})")
    return _save(fig, path), notes


def _panel(ax: Axes, points: list[tuple[str, float, Mapping[str, Any]]], order: list[str]) -> dict[str, Any]:
    """One depth's agents as points with γ error bars, the Pareto frontier and chance; the handles."""
    handles: dict[str, Any] = {}
    for agent, x, summary_row in points:
        colour, marker = _style(agent, order)
        mean = float(summary_row["gamma_mean"])
        err = [
            [max(0.0, mean - float(summary_row["gamma_lo"]))],
            [max(0.0, float(summary_row["gamma_hi"]) - mean)],
        ]
        handles[agent] = ax.errorbar([x], [mean], yerr=err, color=colour, marker=marker, markersize=5,
                                     capsize=3, linestyle="none")  # fmt: skip
    frontier = pareto_frontier((x, float(row["gamma_mean"])) for _, x, row in points)
    right = max(x for _, x, _ in points)
    if right > frontier[-1][0]:  # the best γ holds on to the costliest point
        frontier.append((right, frontier[-1][1]))
    xs, ys = [x for x, _ in frontier], [y for _, y in frontier]
    (handles["Pareto frontier"],) = ax.step(xs, ys, where="post", color="black", linewidth=1, alpha=0.6)
    handles[_CHANCE_LABEL] = ax.axhline(
        float(points[0][2]["chance"]), color="grey", linestyle="--", linewidth=1
    )
    from matplotlib.ticker import NullFormatter

    ax.set_xscale("log")  # whole decades on either side: labelled major ticks, unlabelled minor ones
    ax.set_xlim(10 ** math.floor(math.log10(xs[0] / 1.5)), 10 ** math.ceil(math.log10(xs[-1] * 1.5)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(0.0, 1.05)
    ax.grid(True, which="major", alpha=0.3)
    return handles


def _depths(depths: list[int]) -> str:
    return ", ".join(str(g) for g in sorted(depths))


def write_compute_figures(
    summary: Iterable[Mapping[str, Any]], outdir: str | Path, measure: str = DEFAULT_MEASURE
) -> tuple[list[Path], list[str]]:
    """``gamma_vs_<measure>_p<p>_<sampling>[_d<d>_K<K>].png`` per setting into ``outdir`` (none when
    the summary has no compute columns), and the notes of what was left out."""
    check_measure(measure)
    rows = [dict(row) for row in summary]
    if not rows or not has_compute(rows):
        return [], []
    rows = _rows(rows)
    several = len(_groups(rows, ("d", "K"))) > 1
    paths: list[Path] = []
    notes: list[str] = []
    for (p, sampling, d, K), group in sorted(_groups(rows, ("p", "sampling", "d", "K")).items()):
        name = f"gamma_vs_{measure}_p{p}_{sampling}" + (f"_d{d}_K{K}" if several else "")
        if all(compute_value(row, measure) is None for row in group):
            notes.append(f"no agent has {measure} at p={p}, {sampling}, d={d}, K={K}: no {name}.png")
            continue
        try:
            path, left_out = plot_gamma_vs_compute(
                group, Path(outdir) / f"{name}.png", measure, sampling, p, d=d, K=K
            )
        except GF2ConfigError as err:  # every agent there has 0 of it
            notes.append(str(err))
            continue
        paths.append(path)
        notes.extend(left_out)
    return paths, notes


__all__ = [
    "DEFAULT_MEASURE",
    "check_measure",
    "has_compute",
    "pareto_frontier",
    "plot_gamma_vs_compute",
    "write_compute_figures",
]
