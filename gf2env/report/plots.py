"""The paper's figures (3: γ_g by depth, 4: (p, g) heatmap, 9: sampling modes) from summary rows.

Summary rows are those of :func:`gf2env.report.results.summarize` or
:func:`~gf2env.report.results.read_summary_csv`.
Figures are drawn on bare ``matplotlib.figure.Figure`` objects rendered by the Agg canvas, so no
display, no pyplot state and no backend switch is ever needed; matplotlib is imported only when a
figure is drawn.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gf2env.errors import GF2ConfigError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FIGURES = ("gamma_vs_depth", "heatmap", "sampling")
_NEEDED = ("agent", "sampling", "p", "d", "K", "g", "gamma_mean", "gamma_lo", "gamma_hi", "chance")
_LINESTYLES = {"adversarial": "-", "diagnostic": "--", "uniform": ":"}
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
_MAX_DEPTH_TICKS = 12
_CHANCE_LABEL = "chance (history only)"

Rows = list[dict[str, Any]]


# ------------------------------------------------------------------------------------------ helpers


def _rows(summary: Iterable[Mapping[str, Any]]) -> Rows:
    rows = [dict(row) for row in summary]
    if not rows:
        raise GF2ConfigError("The summary has no rows; pass the rows of summarize() on a non-empty table.")
    for i, row in enumerate(rows):
        missing = [c for c in _NEEDED if c not in row]
        if missing:
            raise GF2ConfigError(
                f"summary row {i} lacks the columns {missing}; pass rows made by summarize()."
            )
    return rows


def _values(rows: Rows, key: str) -> list[Any]:
    return sorted({row[key] for row in rows})


def _agents(rows: Rows) -> list[str]:
    return list(dict.fromkeys(row["agent"] for row in rows))


def _select(rows: Rows, key: str, value: Any, what: str, single: bool = True) -> Rows:
    """Rows with ``row[key] == value``; with ``value=None`` and ``single``, insist on one value present."""
    present = _values(rows, key)
    if value is None:
        if single and len(present) > 1:
            raise GF2ConfigError(
                f"{what}: the summary holds several {key} values {present}; pass {key}= one of them."
            )
        return rows
    chosen = [row for row in rows if row[key] == value]
    if not chosen:
        raise GF2ConfigError(
            f"{what}: no summary rows have {key}={value!r}; the values present are {present}."
        )
    return chosen


def _new_figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=120)
    return path


def _style(agent: str, order: Sequence[str]) -> tuple[str, str]:
    """Colour and marker of ``agent``, fixed by its place in the whole summary."""
    import matplotlib

    colours = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    i = order.index(agent)
    return colours[i % len(colours)], _MARKERS[i % len(_MARKERS)]


def _depth_ticks(depths: Sequence[int]) -> list[int]:
    """At most ``_MAX_DEPTH_TICKS`` of ``depths``, spread evenly on the log(g+1) axis."""
    if len(depths) <= _MAX_DEPTH_TICKS:
        return list(depths)
    logs = np.log(np.asarray(depths, dtype=float) + 1)
    targets = np.linspace(logs[0], logs[-1], _MAX_DEPTH_TICKS)
    return sorted({depths[int(np.argmin(np.abs(logs - t)))] for t in targets})


def _depth_axes(ax: Axes, rows: Rows) -> float:
    """Log axes for γ over ``g + 1`` (ticks labelled by g), a chance line per d; return the y floor."""
    depths = _values(rows, "g")
    ax.set_xscale("log")
    ticks = _depth_ticks(depths)
    ax.set_xticks([g + 1 for g in ticks], labels=[str(g) for g in ticks])
    ax.set_xticks([], minor=True)
    lo_x, hi_x = depths[0] + 1, depths[-1] + 1
    ax.set_xlim(lo_x / 1.15, hi_x * 1.15)
    ax.set_xlabel("depth g (log scale of g + 1)")
    ax.set_yscale("log")
    ax.set_ylabel("γ_g")
    chances = {int(row["d"]): float(row["chance"]) for row in rows}
    positive = [float(row[k]) for row in rows for k in ("gamma_mean", "gamma_lo") if float(row[k]) > 0]
    floor = min([*chances.values(), *positive]) / 2
    ax.set_ylim(floor, 1.0)
    for d, chance in sorted(chances.items()):
        label = _CHANCE_LABEL if len(chances) == 1 else f"{_CHANCE_LABEL}, d={d}"
        ax.axhline(chance, color="grey", linestyle="--", linewidth=1, label=label)
    ax.grid(True, which="major", alpha=0.3)
    return floor


def _series(ax: Axes, rows: Rows, floor: float, colour: str, marker: str, linestyle: str, label: str) -> None:
    rows = sorted(rows, key=lambda row: row["g"])
    x = np.array([row["g"] for row in rows], dtype=float) + 1
    mean, lo, hi = (
        np.clip([float(row[k]) for row in rows], floor, 1.0) for k in ("gamma_mean", "gamma_lo", "gamma_hi")
    )
    ax.fill_between(x, lo, hi, color=colour, alpha=0.18, linewidth=0)
    ax.plot(
        x, mean, color=colour, marker=marker, markersize=4, linestyle=linestyle, label=label, clip_on=False
    )


def _setting(rows: Rows) -> str:
    """``d=…, K=…`` for the values shared by all ``rows``."""
    return ", ".join(f"{k}={_values(rows, k)[0]}" for k in ("d", "K") if len(_values(rows, k)) == 1)


def _groups(rows: Rows, keys: Sequence[str]) -> dict[tuple[Any, ...], Rows]:
    out: dict[tuple[Any, ...], Rows] = {}
    for row in rows:
        out.setdefault(tuple(row[k] for k in keys), []).append(row)
    return out


# ------------------------------------------------------------------------------------------ figures


def plot_gamma_vs_depth(
    summary: Iterable[Mapping[str, Any]],
    path: str | Path,
    sampling: str | None = None,
    p: int | None = None,
    title: str | None = None,
    *,
    d: int | None = None,
    K: int | None = None,
) -> Path:
    """Figure 3: γ_g against g, a line and Jeffreys band per agent, for one (p, sampling).

    ``p`` and ``sampling`` are needed when the summary holds several; ``d`` and ``K`` filter too,
    and where they still vary each (agent, d, K) gets its own line.
    """
    rows = _rows(summary)
    order = _agents(rows)
    what = "plot_gamma_vs_depth"
    rows = _select(rows, "p", p, what)
    rows = _select(rows, "sampling", sampling, what)
    rows = _select(rows, "d", d, what, single=False)
    rows = _select(rows, "K", K, what, single=False)
    groups = _groups(rows, ("agent", "d", "K"))
    settings = sorted({key[1:] for key in groups})
    fig = _new_figure(6.4, 4.4)
    ax = fig.add_subplot()
    floor = _depth_axes(ax, rows)
    for (agent, dd, kk), series in groups.items():
        colour, marker = _style(agent, order)
        label = f"{agent} (d={dd}, K={kk})" if len(settings) > 1 else agent
        linestyle = ("-", "--", ":", "-.")[settings.index((dd, kk)) % 4]
        _series(ax, series, floor, colour, marker, linestyle, label)
    parts = (f"p={rows[0]['p']}", _setting(rows), f"{rows[0]['sampling']} sampling")
    setting = ", ".join(s for s in parts if s)
    ax.set_title(title if title is not None else f"γ_g by depth ({setting})")
    ax.legend(fontsize="small")
    return _save(fig, path)


def plot_gamma_vs_step(rows: Iterable[Mapping[str, Any]], path: str | Path, title: str | None = None) -> Path:
    """γ_g against training step, a line and Jeffreys band per depth (rows: summary rows + ``step``)."""
    rows = _rows(rows)
    if any("step" not in row for row in rows):
        raise GF2ConfigError("plot_gamma_vs_step needs a 'step' column (the rows of a gamma.csv).")
    fig = _new_figure(6.4, 4.4)
    ax = fig.add_subplot()
    depths = _values(rows, "g")
    for g in depths:
        series = sorted((r for r in rows if r["g"] == g), key=lambda r: r["step"])
        colour, marker = _style(str(g), [str(x) for x in depths])
        steps = [int(r["step"]) for r in series]
        lo, hi = ([float(r[k]) for r in series] for k in ("gamma_lo", "gamma_hi"))
        ax.fill_between(steps, lo, hi, color=colour, alpha=0.18, linewidth=0)
        ax.plot(steps, [float(r["gamma_mean"]) for r in series], color=colour, marker=marker, markersize=4,
                label=f"g={g}")  # fmt: skip
    for chance in sorted({float(r["chance"]) for r in rows}):
        ax.axhline(chance, color="grey", linestyle="--", linewidth=1, label=_CHANCE_LABEL)
    ax.set_xlabel("training step")
    ax.set_ylabel("γ_g")
    ax.set_ylim(0.0, 1.0)
    ax.grid(True, alpha=0.3)
    ax.set_title(title if title is not None else f"γ_g during training ({_setting(rows)}, p={rows[0]['p']})")
    ax.legend(fontsize="small")
    return _save(fig, path)


def plot_heatmap(
    summary: Iterable[Mapping[str, Any]],
    path: str | Path,
    agent: str,
    sampling: str | None = None,
    *,
    d: int | None = None,
    K: int | None = None,
) -> Path:
    """Figure 4: γ_g of one agent over (p, g), rows p ascending, log colour scale, cells annotated."""
    from matplotlib import colormaps
    from matplotlib.colors import LogNorm

    rows = _rows(summary)
    what = "plot_heatmap"
    agents = _agents(rows)
    if agent not in agents:
        raise GF2ConfigError(f"{what}: agent={agent!r} is not in the summary; the agents are {agents}.")
    rows = [row for row in rows if row["agent"] == agent]
    rows = _select(rows, "sampling", sampling, what)
    rows = _select(rows, "d", d, what)
    rows = _select(rows, "K", K, what)
    ps, depths = _values(rows, "p"), _values(rows, "g")
    if len(ps) < 2:
        raise GF2ConfigError(
            f"{what}: agent={agent!r} has only p={ps} here; a heatmap needs at least 2 p values. "
            f"Evaluate it at more p or plot it with plot_gamma_vs_depth."
        )
    grid = np.full((len(ps), len(depths)), np.nan)
    for row in rows:
        grid[ps.index(row["p"]), depths.index(row["g"])] = float(row["gamma_mean"])
    positive = grid[np.isfinite(grid) & (grid > 0)]
    chances = [float(row["chance"]) for row in rows]
    vmin = min([*positive.tolist(), *chances])
    vmin = vmin if vmin < 1 else 0.1
    norm = LogNorm(vmin=vmin, vmax=1.0)
    cmap = colormaps["viridis"].with_extremes(bad="lightgrey")
    fig = _new_figure(max(5.0, 0.42 * len(depths) + 2.2), max(2.6, 0.45 * len(ps) + 1.6))
    ax = fig.add_subplot()
    shown = np.ma.masked_invalid(np.where(grid > 0, grid, np.nan))  # 0 and missing cells are grey
    image = ax.imshow(shown, cmap=cmap, norm=norm, aspect="auto")
    size = 7 if len(depths) <= 20 else 5
    for i, j in zip(*np.nonzero(np.isfinite(grid)), strict=True):
        value = grid[i, j]
        text = "0" if value == 0 else f"{value:.2g}"
        colour = "white" if value > 0 and norm(value) < 0.55 else "black"
        ax.text(j, i, text, ha="center", va="center", fontsize=size, color=colour)
    ax.set_xticks(range(len(depths)), labels=[str(g) for g in depths])
    ax.set_yticks(range(len(ps)), labels=[str(p) for p in ps])
    ax.set_xlabel("depth g")
    ax.set_ylabel("payload bits p")
    setting = ", ".join(s for s in (_setting(rows), f"{rows[0]['sampling']} sampling") if s)
    ax.set_title(f"γ_g of {agent} ({setting})")
    fig.colorbar(image, ax=ax, label="γ_g (log scale)")
    return _save(fig, path)


def plot_sampling_comparison(
    summary: Iterable[Mapping[str, Any]],
    path: str | Path,
    p: int | None = None,
    *,
    d: int | None = None,
    K: int | None = None,
) -> Path:
    """Figure 9: γ_g against g per agent and sampling mode (solid adversarial, dashed diagnostic,
    dotted uniform), with Jeffreys bands."""
    rows = _rows(summary)
    order = _agents(rows)
    what = "plot_sampling_comparison"
    rows = _select(rows, "p", p, what)
    rows = _select(rows, "d", d, what, single=False)
    rows = _select(rows, "K", K, what, single=False)
    modes = _values(rows, "sampling")
    if len(modes) < 2:
        raise GF2ConfigError(
            f"{what}: the summary holds only sampling={modes} at p={rows[0]['p']}; a comparison needs "
            f"at least 2 sampling modes (e.g. adversarial and diagnostic)."
        )
    groups = _groups(rows, ("agent", "d", "K", "sampling"))
    several = len({key[1:3] for key in groups}) > 1
    fig = _new_figure(6.4, 4.4)
    ax = fig.add_subplot()
    floor = _depth_axes(ax, rows)
    for (agent, dd, kk, mode), series in groups.items():
        colour, marker = _style(agent, order)
        name = f"{agent} (d={dd}, K={kk})" if several else agent
        _series(ax, series, floor, colour, marker, _LINESTYLES.get(mode, "-."), f"{name}, {mode}")
    setting = ", ".join(s for s in (f"p={rows[0]['p']}", _setting(rows)) if s)
    ax.set_title(f"γ_g by sampling mode ({setting})")
    ax.legend(fontsize="small")
    return _save(fig, path)


# ----------------------------------------------------------------------------------------- batches


def _heatmap_slices(rows: Rows) -> dict[tuple[Any, ...], Rows]:
    """(agent, sampling, d, K) slices with at least 2 p values."""
    slices = _groups(rows, ("agent", "sampling", "d", "K"))
    return {key: group for key, group in slices.items() if len(_values(group, "p")) >= 2}


def _sampling_ps(rows: Rows) -> list[int]:
    by_p = sorted(_groups(rows, ("p",)).items())
    return [key[0] for key, group in by_p if len(_values(group, "sampling")) >= 2]


def available_figures(summary: Iterable[Mapping[str, Any]]) -> list[str]:
    """Which of ``FIGURES`` the summary supports (a heatmap needs 2 p, a comparison 2 sampling modes)."""
    rows = [dict(row) for row in summary]
    if not rows:
        return []
    rows = _rows(rows)
    out = ["gamma_vs_depth"]
    if _heatmap_slices(rows):
        out.append("heatmap")
    if _sampling_ps(rows):
        out.append("sampling")
    return out


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "agent"


def _stems(agents: Sequence[str]) -> dict[str, str]:
    """Filename-safe, distinct stems for ``agents``."""
    stems: dict[str, str] = {}
    for agent in agents:
        stem = base = _safe(agent)
        suffix = 1
        while stem in stems.values():
            stem, suffix = f"{base}_{suffix}", suffix + 1
        stems[agent] = stem
    return stems


def write_figures(
    summary: Iterable[Mapping[str, Any]], outdir: str | Path, heatmap_agent: str | None = None
) -> list[Path]:
    """Write every available figure into ``outdir`` and return their paths.

    ``gamma_vs_depth_p<p>_<sampling>.png`` per (p, sampling); ``heatmap_<agent>.png`` per agent with
    2 or more p (only ``heatmap_agent`` if given; ``_<sampling>`` and ``_d<d>_K<K>`` are appended
    when the summary holds several); ``sampling_p<p>.png`` per p with 2 or more sampling modes.
    """
    rows = _rows(summary)
    agents = _agents(rows)
    slices = _heatmap_slices(rows)
    if heatmap_agent is not None:  # checked before anything is written
        if heatmap_agent not in agents:
            raise GF2ConfigError(
                f"heatmap_agent={heatmap_agent!r} is not in the summary; the agents are {agents}."
            )
        slices = {key: group for key, group in slices.items() if key[0] == heatmap_agent}
        if not slices:
            raise GF2ConfigError(
                f"heatmap_agent={heatmap_agent!r} has fewer than 2 p values at every (sampling, d, K); "
                f"a heatmap needs at least 2. Pass heatmap_agent=None for the heatmaps the summary supports."
            )
    stems = _stems(agents)
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for p, sampling in sorted(_groups(rows, ("p", "sampling"))):
        paths.append(plot_gamma_vs_depth(rows, outdir / f"gamma_vs_depth_p{p}_{sampling}.png", sampling, p))
    several_modes = len(_values(rows, "sampling")) > 1
    several_settings = len(_groups(rows, ("d", "K"))) > 1
    for agent, sampling, dd, kk in sorted(slices, key=lambda key: (agents.index(key[0]), *key[1:])):
        name = f"heatmap_{stems[agent]}" + (f"_{sampling}" if several_modes else "")
        name += f"_d{dd}_K{kk}" if several_settings else ""
        paths.append(plot_heatmap(rows, outdir / f"{name}.png", agent, sampling, d=dd, K=kk))
    for p in _sampling_ps(rows):
        paths.append(plot_sampling_comparison(rows, outdir / f"sampling_p{p}.png", p))
    return paths
