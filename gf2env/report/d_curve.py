"""The D curve: mean γ of estimator D knowing ``k`` of the ``g`` prefix terms, ``k = 0..g``.

``γ_D(g, k)`` rises with ``k`` from the data-only value (``k = 0``, estimator B) to the diligent
value (``k = g``); the effective-prefix fit (:mod:`gf2env.report.fit`) interpolates it.
:func:`simulate_d_curve` computes it on generated records (D's composite likelihood knowing the
first ``k`` terms: the terms are exchangeable); :class:`DCurve` holds, checks and stores it.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from gf2env.errors import GF2ConfigError
from gf2env.records.columns import generate_columns
from gf2env.report.schema import D_CURVE, read_csv_text, to_float, to_int
from gf2env.task.oracle import TaskConfig
from gf2env.task.posterior import StepBatch, composite_log_likelihood, known_terms, normalise

CURVE_ABOUT = ("sampling", "p", "d", "K", "trials", "seed")
"""The columns of a D curve CSV beyond ``g, k, gamma`` that say what it was simulated on."""


def readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    a.setflags(write=False)
    return a


def read_csv_rows(path: str | Path) -> tuple[list[str], list[dict[str, str]]]:
    header, rows = read_csv_text(path, "D curve")
    if not header:
        raise GF2ConfigError(f"CSV file {str(path)!r} is empty; pass a file with a header row.")
    return header, rows


@dataclass(frozen=True, eq=False)
class DCurve:
    """Mean ``γ_D(g, k)`` of estimator D: ``table[g][k]`` for ``k = 0..g`` at each tabulated depth ``g``.

    ``depths`` is stored sorted; the arrays are read-only float copies. (``eq=False``: compare
    curves with :meth:`to_rows`.)
    """

    depths: tuple[int, ...]
    table: dict[int, np.ndarray]
    #: What the curve was simulated on, where known: ``sampling``, ``p``, ``d``, ``K``, ``trials``,
    #: ``seed`` (:data:`CURVE_ABOUT`); written as columns of every CSV row, so a cache can be checked.
    about: tuple[tuple[str, str | int], ...] = ()

    def __post_init__(self) -> None:
        depths = tuple(to_int(g, "depth", "DCurve") for g in self.depths)
        if not depths:
            raise GF2ConfigError("DCurve has no depths; pass at least one tabulated depth.")
        if len(set(depths)) != len(depths):
            raise GF2ConfigError(f"DCurve depths {depths} repeat a depth; pass each depth once.")
        if min(depths) < 0:
            raise GF2ConfigError(f"DCurve depths {depths} include a negative depth; depths are g >= 0.")
        keys = {to_int(g, "table key", "DCurve") for g in self.table}
        if keys != set(depths):
            raise GF2ConfigError(
                f"DCurve table has depths {sorted(keys)} but depths={sorted(depths)}; pass the same depths."
            )
        table: dict[int, np.ndarray] = {}
        for key, row in self.table.items():
            g = to_int(key, "table key", "DCurve")
            arr = np.asarray(row, dtype=float)
            if arr.shape != (g + 1,):
                raise GF2ConfigError(
                    f"DCurve table[{g}] has shape {arr.shape}; it needs g+1 = {g + 1} entries (k = 0..{g})."
                )
            if not np.all(np.isfinite(arr)) or arr.min() < 0 or arr.max() > 1:
                raise GF2ConfigError(f"DCurve table[{g}] = {arr.tolist()} is not a probability in [0, 1].")
            table[g] = readonly(arr)
        object.__setattr__(self, "depths", tuple(sorted(depths)))
        object.__setattr__(self, "table", {g: table[g] for g in sorted(depths)})

    def _check_depth(self, g: Any) -> int:
        gi = to_int(g, "g", "DCurve.value")
        if gi not in self.table:
            raise GF2ConfigError(
                f"depth g={g!r} is not tabulated in this DCurve (it has depths {list(self.depths)}); "
                "compute the curve at that depth or drop it from the counts."
            )
        return gi

    def value(self, g: int, k: float) -> float:
        """``γ_D(g, k)`` for real ``0 <= k <= g``, linear between the neighbouring integers."""
        gi = self._check_depth(g)
        kf = to_float(k, "k", "DCurve.value")
        if not 0 <= kf <= gi:
            raise GF2ConfigError(f"k={k!r} is outside [0, g] = [0, {gi}]; pass 0 <= k <= g.")
        return float(self._interp(gi, np.asarray(kf)))

    def _interp(self, g: int, k: np.ndarray) -> np.ndarray:
        row = self.table[g]
        k0 = np.minimum(np.floor(k).astype(int), g)
        k1 = np.minimum(k0 + 1, g)
        frac = k - k0
        return row[k0] * (1 - frac) + row[k1] * frac

    def to_rows(self) -> list[tuple[int, int, float]]:
        """``(g, k, gamma)`` rows, by ``g`` then ``k``."""
        return [(g, k, float(self.table[g][k])) for g in self.depths for k in range(g + 1)]

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[Any] | Mapping[str, Any]]) -> DCurve:
        """Build from ``(g, k, gamma)`` rows (tuples or mappings with keys ``g``, ``k``, ``gamma``).

        Every tabulated ``g`` needs each ``k = 0..g`` exactly once.
        """
        cells: dict[int, dict[int, float]] = {}
        for i, row in enumerate(rows):
            if isinstance(row, Mapping):
                missing = {"g", "k", "gamma"} - set(row)
                if missing:
                    raise GF2ConfigError(
                        f"DCurve row {i} {dict(row)} lacks {sorted(missing)}; rows need g, k, gamma."
                    )
                g_raw, k_raw, gam_raw = row["g"], row["k"], row["gamma"]
            else:
                if len(row) != 3:
                    raise GF2ConfigError(f"DCurve row {i} {tuple(row)} is not a (g, k, gamma) triple.")
                g_raw, k_raw, gam_raw = row
            g, k = to_int(g_raw, "g", f"DCurve row {i}"), to_int(k_raw, "k", f"DCurve row {i}")
            gam = to_float(gam_raw, "gamma", f"DCurve row {i}")
            if not 0 <= k <= g:
                raise GF2ConfigError(f"DCurve row {i} has k={k} outside [0, g={g}]; pass 0 <= k <= g.")
            if k in cells.setdefault(g, {}):
                raise GF2ConfigError(f"DCurve rows repeat (g={g}, k={k}); pass each cell once.")
            cells[g][k] = gam
        if not cells:
            raise GF2ConfigError("DCurve.from_rows got no rows; pass (g, k, gamma) rows.")
        table = {}
        for g, row_cells in cells.items():
            missing_k = sorted(set(range(g + 1)) - set(row_cells))
            if missing_k:
                raise GF2ConfigError(f"DCurve rows for g={g} lack k={missing_k}; pass every k = 0..{g}.")
            table[g] = np.array([row_cells[k] for k in range(g + 1)])
        return cls(depths=tuple(sorted(cells)), table=table)

    def write_csv(self, path: str | Path) -> None:
        """Write the curve as a ``g,k,gamma`` CSV (floats in full precision: round trips exactly),
        then the :attr:`about` columns, the same on every row."""
        names, values = [n for n, _ in self.about], [v for _, v in self.about]
        with open(path, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow([*D_CURVE.names, *names])
            writer.writerows((g, k, repr(gam), *values) for g, k, gam in self.to_rows())

    @classmethod
    def read_csv(cls, path: str | Path) -> DCurve:
        """Read a curve written by :meth:`write_csv` (columns ``g``, ``k``, ``gamma``)."""
        header, rows = read_csv_rows(path)
        missing = {"g", "k", "gamma"} - set(header)
        if missing:
            raise GF2ConfigError(
                f"CSV {str(path)!r} has columns {header}, lacking {sorted(missing)}; "
                "a DCurve CSV has columns g, k, gamma."
            )
        curve = cls.from_rows(rows)
        about: list[tuple[str, str | int]] = []
        for name in (n for n in CURVE_ABOUT if n in header):
            seen = {row[name] for row in rows}
            if len(seen) != 1:
                raise GF2ConfigError(
                    f"CSV {str(path)!r} column {name} holds {sorted(seen)}; a curve is of one setting."
                )
            (cell,) = seen
            about.append((name, cell if name == "sampling" else to_int(cell, name, str(path))))
        return cls(curve.depths, curve.table, tuple(about))


def d_gamma(batch: StepBatch, k: int) -> np.ndarray:
    """γ (posterior mass on the truth) of estimator D (composite likelihood) knowing the first
    ``k`` terms, at every step of ``batch`` (which must hold its targets)."""
    assert batch.target is not None
    gammas = []
    for chunk in batch.chunks():
        known = known_terms(chunk.g, k, chunk.R, "first")
        gammas.append(normalise(composite_log_likelihood(chunk, known))[np.arange(chunk.R), chunk.target])
    return np.concatenate(gammas)


def simulate_d_curve(
    config: TaskConfig, depths: Sequence[int], trials: int, seed: int = 0, progress: bool = True
) -> DCurve:
    """Mean γ of estimator D knowing ``k = 0..g`` terms at each depth, on ``trials`` records a depth
    of ``seed`` (the records ``gf2 generate`` writes). All ``k`` share the same records at a depth."""
    table: dict[int, np.ndarray] = {}
    for g in tqdm(sorted(set(depths)), desc="D curve", unit="depth", disable=not progress):
        cfg = TaskConfig(p=config.p, d=config.d, K=config.K, n=g + 1, sampling=config.sampling, w=config.w)
        batch = generate_columns(cfg, g, trials, seed).step_batch()
        table[g] = np.array([d_gamma(batch, k).mean() for k in range(g + 1)])
    about = (
        ("sampling", config.sampling), ("p", config.p), ("d", config.d), ("K", config.K),
        ("trials", trials), ("seed", seed),
    )  # fmt: skip
    return DCurve(depths=tuple(sorted(table)), table=table, about=about)


__all__ = ["CURVE_ABOUT", "DCurve", "d_gamma", "simulate_d_curve"]
