"""An agent's successes out of trials at each depth: what the effective-prefix fit is fitted to.

:class:`DepthCounts` aggregates results rows (``schema.RESULTS``: a success is ``correct``, or the
fractional ``gamma``) or reads a per-depth CSV (``schema.DEPTH_COUNTS``).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gf2env.errors import GF2ConfigError
from gf2env.report.d_curve import read_csv_rows, readonly
from gf2env.report.schema import DEPTH_COUNTS, to_flag, to_float, to_int

VALUE_COLUMNS = ("correct", "gamma")


def _parse_gamma(x: Any, where: str) -> float:
    if isinstance(x, str) and not x.strip():
        raise GF2ConfigError(
            f"{where}: gamma is empty; every selected row needs a gamma (or use value='correct')."
        )
    f = to_float(x, "gamma", where)
    if not 0 <= f <= 1:
        raise GF2ConfigError(f"{where}: gamma={x!r} is outside [0, 1]; gamma is a probability.")
    return f


def _parse_correct(x: Any, where: str) -> float:
    return float(to_flag(x, "correct", where))


def _select_agent(
    rows: list[Mapping[str, Any]], agent: str | None, source: str
) -> tuple[list[Mapping], str | None]:
    """The rows of ``agent`` (or of the only agent present when ``agent`` is None)."""
    agents = sorted({str(r["agent"]) for r in rows})
    if agent is None:
        if len(agents) != 1:
            raise GF2ConfigError(f"{source} hold the agents {agents}; pass agent= to choose one.")
        agent = agents[0]
    chosen = [r for r in rows if str(r["agent"]) == agent]
    if not chosen:
        raise GF2ConfigError(f"agent={agent!r} is not in {source} (agents: {agents}); pass one of those.")
    return chosen, agent


@dataclass(frozen=True, eq=False)
class DepthCounts:
    """An agent's successes out of trials at each depth (``successes`` may be fractional, e.g. Σγ).

    Stored sorted by depth; arrays are read-only.
    """

    depths: tuple[int, ...]
    successes: np.ndarray
    trials: np.ndarray
    agent: str | None = None

    def __post_init__(self) -> None:
        depths = tuple(to_int(g, "depth", "DepthCounts") for g in self.depths)
        s = np.asarray(self.successes, dtype=float)
        t_raw = np.asarray(self.trials, dtype=float)
        if s.shape != (len(depths),) or t_raw.shape != (len(depths),):
            raise GF2ConfigError(
                f"DepthCounts has {len(depths)} depths but successes shape {s.shape} and trials shape "
                f"{t_raw.shape}; pass one success count and one trial count per depth."
            )
        if not depths:
            raise GF2ConfigError("DepthCounts has no depths; pass counts for at least one depth.")
        if len(set(depths)) != len(depths):
            raise GF2ConfigError(f"DepthCounts depths {depths} repeat a depth; pass each depth once.")
        if min(depths) < 0:
            raise GF2ConfigError(f"DepthCounts depths {depths} include a negative depth; depths are g >= 0.")
        if not np.all(np.isfinite(t_raw)) or np.any(t_raw != np.round(t_raw)) or t_raw.min() < 1:
            raise GF2ConfigError(f"trials {t_raw.tolist()} must be integers >= 1 at every depth.")
        t = t_raw.astype(np.int64)
        if not np.all(np.isfinite(s)) or np.any(s < 0) or np.any(s > t):
            bad = [
                (g, float(si), int(ti)) for g, si, ti in zip(depths, s, t, strict=True) if not 0 <= si <= ti
            ]
            raise GF2ConfigError(f"successes must satisfy 0 <= s <= t; (g, s, t) = {bad} do not.")
        order = np.argsort(depths, kind="stable")
        object.__setattr__(self, "depths", tuple(depths[i] for i in order))
        object.__setattr__(self, "successes", readonly(s[order]))
        object.__setattr__(self, "trials", readonly(t[order]))
        if self.agent is not None:
            object.__setattr__(self, "agent", str(self.agent))

    @property
    def observed(self) -> np.ndarray:
        """Observed success rate ``s / t`` per depth."""
        return self.successes / self.trials

    @classmethod
    def from_rows(
        cls,
        rows: Iterable[Mapping[str, Any]],
        agent: str | None = None,
        value: str = "correct",
    ) -> DepthCounts:
        """Aggregate tidy result rows (keys ``agent``, ``g`` and ``value``) into per-depth counts.

        ``value="correct"`` counts correct rows; ``value="gamma"`` sums γ (fractional successes).
        Each row is one trial. With ``agent=None`` the rows must hold exactly one agent.
        """
        if value not in VALUE_COLUMNS:
            raise GF2ConfigError(f"value={value!r} is not one of {list(VALUE_COLUMNS)}.")
        rows = list(rows)
        if not rows:
            raise GF2ConfigError("DepthCounts.from_rows got no rows; pass tidy result rows.")
        for i, r in enumerate(rows):
            missing = {"agent", "g", value} - set(r)
            if missing:
                raise GF2ConfigError(
                    f"result row {i} lacks {sorted(missing)} (it has {sorted(r)}); "
                    f"rows need agent, g, {value}."
                )
        chosen, agent = _select_agent(rows, agent, "the result rows")
        parse = _parse_correct if value == "correct" else _parse_gamma
        sums: dict[int, float] = {}
        counts: dict[int, int] = {}
        for i, r in enumerate(chosen):
            g = to_int(r["g"], "g", f"result row {i}")
            sums[g] = sums.get(g, 0.0) + parse(r[value], f"result row {i}")
            counts[g] = counts.get(g, 0) + 1
        depths = tuple(sorted(sums))
        return cls(
            depths=depths,
            successes=np.array([sums[g] for g in depths]),
            trials=np.array([counts[g] for g in depths]),
            agent=agent,
        )

    @classmethod
    def from_csv(cls, path: str | Path, agent: str | None = None, value: str = "correct") -> DepthCounts:
        """Read a per-depth CSV (columns ``g, successes, trials``, optionally ``agent``) or a tidy
        results CSV (columns ``agent, g`` and ``value``; see :meth:`from_rows`)."""
        header, rows = read_csv_rows(path)
        cols = set(header)
        source = f"CSV {str(path)!r}"
        if {"g", "successes", "trials"} <= cols:
            if not rows:
                raise GF2ConfigError(f"{source} has a header but no rows; pass a file with counts.")
            chosen: list[Mapping[str, Any]] = list(rows)
            if "agent" in cols:
                chosen, agent = _select_agent(chosen, agent, source)
            return cls(
                depths=tuple(to_int(r["g"], "g", source) for r in chosen),
                successes=np.array([to_float(r["successes"], "successes", source) for r in chosen]),
                trials=np.array([to_float(r["trials"], "trials", source) for r in chosen]),
                agent=agent,
            )
        if {"agent", "g", value} <= cols:
            return cls.from_rows(rows, agent=agent, value=value)
        raise GF2ConfigError(
            f"{source} has columns {header}; pass a per-depth CSV (g, successes, trials) or a tidy "
            f"results CSV (agent, g, {value})."
        )

    def write_csv(self, path: str | Path) -> None:
        """Write a per-depth ``agent,g,successes,trials`` CSV that :meth:`from_csv` reads back."""
        with open(path, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(DEPTH_COUNTS.names)
            for g, s, t in zip(self.depths, self.successes, self.trials, strict=True):
                writer.writerow([self.agent or "", g, repr(float(s)), int(t)])


__all__ = ["VALUE_COLUMNS", "DepthCounts"]
