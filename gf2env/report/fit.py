"""Effective-prefix fit (the paper's Table 1): how many prefix terms does an agent behave as if it knew?

Estimator D knows ``k`` of the ``g`` prefix terms and marginalises the rest; its mean success
``γ_D(g, k)`` (a :class:`DCurve`, simulated elsewhere) rises with ``k`` from the data-only value
(``k = 0``) to the diligent value (``k = g``). An agent's per-depth successes (:class:`DepthCounts`)
are modelled as ``γ_D(g, k(g))`` with either

- *proportional*: ``k = u·g``, ``u ∈ [0, 1]``, or
- *constant*: ``k = min(v, g)``, ``v ∈ [0, max counted depth]``,

each fitted by binomial maximum likelihood over depths (:func:`fit_effective_prefix`). ``k`` is
real-valued; ``γ_D`` is interpolated linearly between neighbouring integers. Each model has one
parameter, so ``AIC = 2 - 2 log L`` and ``ΔAIC = AIC_proportional - AIC_constant`` (negative favours
proportional).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from scipy.optimize import minimize_scalar

from gf2env.errors import GF2ConfigError

Model = Literal["proportional", "constant"]
MODELS: tuple[Model, ...] = ("proportional", "constant")
VALUE_COLUMNS = ("correct", "gamma")
PROB_CLIP = 1e-12  # model probabilities are clipped to [PROB_CLIP, 1 - PROB_CLIP] inside the log only


def _as_int(x: Any, what: str) -> int:
    """``x`` as an int (accepts ``3``, ``3.0``, ``"3"``), else a typed error naming ``what``."""
    if isinstance(x, (bool, np.bool_)):
        raise GF2ConfigError(f"{what}={x!r} is a boolean; pass an integer.")
    try:
        f = float(x)
    except (TypeError, ValueError) as err:
        raise GF2ConfigError(f"{what}={x!r} is not a number; pass an integer.") from err
    if not math.isfinite(f) or f != int(f):
        raise GF2ConfigError(f"{what}={x!r} is not an integer; pass an integer.")
    return int(f)


def _as_float(x: Any, what: str) -> float:
    try:
        f = float(x)
    except (TypeError, ValueError) as err:
        raise GF2ConfigError(f"{what}={x!r} is not a number; pass a finite number.") from err
    if not math.isfinite(f):
        raise GF2ConfigError(f"{what}={x!r} is not finite; pass a finite number.")
    return f


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    a.setflags(write=False)
    return a


def _read_csv_rows(path: str | Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        header = list(reader.fieldnames or [])
    if not header:
        raise GF2ConfigError(f"CSV file {str(path)!r} is empty; pass a file with a header row.")
    return header, rows


# ---------------------------------------------------------------------------------------------- DCurve


@dataclass(frozen=True, eq=False)
class DCurve:
    """Mean ``γ_D(g, k)`` of estimator D: ``table[g][k]`` for ``k = 0..g`` at each tabulated depth ``g``.

    ``depths`` is stored sorted; the arrays are read-only float copies. (``eq=False``: compare
    curves with :meth:`to_rows`.)
    """

    depths: tuple[int, ...]
    table: dict[int, np.ndarray]

    def __post_init__(self) -> None:
        depths = tuple(_as_int(g, "DCurve depth") for g in self.depths)
        if not depths:
            raise GF2ConfigError("DCurve has no depths; pass at least one tabulated depth.")
        if len(set(depths)) != len(depths):
            raise GF2ConfigError(f"DCurve depths {depths} repeat a depth; pass each depth once.")
        if min(depths) < 0:
            raise GF2ConfigError(f"DCurve depths {depths} include a negative depth; depths are g >= 0.")
        keys = {_as_int(g, "DCurve table key") for g in self.table}
        if keys != set(depths):
            raise GF2ConfigError(
                f"DCurve table has depths {sorted(keys)} but depths={sorted(depths)}; pass the same depths."
            )
        table: dict[int, np.ndarray] = {}
        for key, row in self.table.items():
            g = _as_int(key, "DCurve table key")
            arr = np.asarray(row, dtype=float)
            if arr.shape != (g + 1,):
                raise GF2ConfigError(
                    f"DCurve table[{g}] has shape {arr.shape}; it needs g+1 = {g + 1} entries (k = 0..{g})."
                )
            if not np.all(np.isfinite(arr)) or arr.min() < 0 or arr.max() > 1:
                raise GF2ConfigError(f"DCurve table[{g}] = {arr.tolist()} is not a probability in [0, 1].")
            table[g] = _readonly(arr)
        object.__setattr__(self, "depths", tuple(sorted(depths)))
        object.__setattr__(self, "table", {g: table[g] for g in sorted(depths)})

    def _check_depth(self, g: Any) -> int:
        gi = _as_int(g, "depth g")
        if gi not in self.table:
            raise GF2ConfigError(
                f"depth g={g!r} is not tabulated in this DCurve (it has depths {list(self.depths)}); "
                "compute the curve at that depth or drop it from the counts."
            )
        return gi

    def value(self, g: int, k: float) -> float:
        """``γ_D(g, k)`` for real ``0 <= k <= g``, linear between the neighbouring integers."""
        gi = self._check_depth(g)
        kf = _as_float(k, "k")
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
            g, k = _as_int(g_raw, f"row {i} g"), _as_int(k_raw, f"row {i} k")
            gam = _as_float(gam_raw, f"row {i} gamma")
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
        """Write the curve as a ``g,k,gamma`` CSV (floats in full precision: round trips exactly)."""
        with open(path, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["g", "k", "gamma"])
            writer.writerows((g, k, repr(gam)) for g, k, gam in self.to_rows())

    @classmethod
    def read_csv(cls, path: str | Path) -> DCurve:
        """Read a curve written by :meth:`write_csv` (columns ``g``, ``k``, ``gamma``)."""
        header, rows = _read_csv_rows(path)
        missing = {"g", "k", "gamma"} - set(header)
        if missing:
            raise GF2ConfigError(
                f"CSV {str(path)!r} has columns {header}, lacking {sorted(missing)}; "
                "a DCurve CSV has columns g, k, gamma."
            )
        return cls.from_rows(rows)


# ----------------------------------------------------------------------------------------- DepthCounts


def _parse_correct(x: Any, what: str) -> float:
    if isinstance(x, str):
        s = x.strip().lower()
        if s in ("true", "1", "1.0"):
            return 1.0
        if s in ("false", "0", "0.0"):
            return 0.0
        raise GF2ConfigError(f"{what}={x!r} is not a boolean; pass True/False or 1/0.")
    f = _as_float(x, what)
    if f not in (0.0, 1.0):
        raise GF2ConfigError(f"{what}={x!r} is not a boolean; pass True/False or 1/0.")
    return f


def _parse_gamma(x: Any, what: str) -> float:
    if isinstance(x, str) and not x.strip():
        raise GF2ConfigError(f"{what} is empty; every selected row needs a gamma (or use value='correct').")
    f = _as_float(x, what)
    if not 0 <= f <= 1:
        raise GF2ConfigError(f"{what}={x!r} is outside [0, 1]; gamma is a probability.")
    return f


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
        depths = tuple(_as_int(g, "depth") for g in self.depths)
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
        object.__setattr__(self, "successes", _readonly(s[order]))
        object.__setattr__(self, "trials", _readonly(t[order]))
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
            g = _as_int(r["g"], f"result row {i} g")
            sums[g] = sums.get(g, 0.0) + parse(r[value], f"result row {i} {value}")
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
        header, rows = _read_csv_rows(path)
        cols = set(header)
        source = f"CSV {str(path)!r}"
        if {"g", "successes", "trials"} <= cols:
            if not rows:
                raise GF2ConfigError(f"{source} has a header but no rows; pass a file with counts.")
            if "agent" in cols:
                rows, agent = _select_agent(rows, agent, source)
            return cls(
                depths=tuple(_as_int(r["g"], f"{source} g") for r in rows),
                successes=np.array([_as_float(r["successes"], f"{source} successes") for r in rows]),
                trials=np.array([_as_float(r["trials"], f"{source} trials") for r in rows]),
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
            writer.writerow(["agent", "g", "successes", "trials"])
            for g, s, t in zip(self.depths, self.successes, self.trials, strict=True):
                writer.writerow([self.agent or "", g, repr(float(s)), int(t)])


# ------------------------------------------------------------------------------------------------ fit


def _check_param(model: Any, param: Any) -> float:
    if model not in MODELS:
        raise GF2ConfigError(f"model={model!r} is not one of {list(MODELS)}.")
    x = _as_float(param, "u" if model == "proportional" else "v")
    if model == "proportional" and not 0 <= x <= 1:
        raise GF2ConfigError(f"u={param!r} is outside [0, 1]; the proportional model needs 0 <= u <= 1.")
    if model == "constant" and x < 0:
        raise GF2ConfigError(f"v={param!r} is negative; the constant model needs v >= 0.")
    return x


def _probs(curve: DCurve, depths: Sequence[int], model: Model, params: np.ndarray) -> np.ndarray:
    """``(len(params), len(depths))`` model probabilities for already-validated inputs."""
    cols = []
    for g in depths:
        k = np.minimum(params * g, g) if model == "proportional" else np.minimum(params, g)
        cols.append(curve._interp(g, k))
    return np.stack(cols, axis=-1)


def model_probabilities(curve: DCurve, depths: Sequence[int], model: Model, param: float) -> np.ndarray:
    """The model's success probability at each depth: ``γ_D(g, u·g)`` or ``γ_D(g, min(v, g))``."""
    x = _check_param(model, param)
    gs = [curve._check_depth(g) for g in depths]
    return _probs(curve, gs, model, np.array([x]))[0]


def binomial_loglik(successes: np.ndarray, trials: np.ndarray, probs: np.ndarray) -> float:
    """``Σ s log a + (t - s) log(1 - a)``, ``a`` clipped to ``[1e-12, 1 - 1e-12]`` inside the logs.

    The binomial coefficients are left out: they do not depend on the model (and are undefined for
    fractional successes), so they cancel in ΔAIC.
    """
    a = np.clip(np.asarray(probs, dtype=float), PROB_CLIP, 1 - PROB_CLIP)
    s = np.asarray(successes, dtype=float)
    t = np.asarray(trials, dtype=float)
    return float(np.sum(s * np.log(a) + (t - s) * np.log1p(-a)))


def _maximise(
    curve: DCurve, counts: DepthCounts, model: Model, hi: float, grid_points: int
) -> tuple[float, float]:
    """``(argmax, max)`` of the model's log L on ``[0, hi]``: a grid, then bounded Brent between the
    best grid point's neighbours. Ties on the grid go to the smallest parameter."""
    s, t = counts.successes, counts.trials

    def loglik(x: float) -> float:
        return binomial_loglik(s, t, _probs(curve, counts.depths, model, np.array([x]))[0])

    if hi <= 0:
        return 0.0, loglik(0.0)
    grid = np.linspace(0.0, hi, grid_points)
    a = np.clip(_probs(curve, counts.depths, model, grid), PROB_CLIP, 1 - PROB_CLIP)
    values = (s * np.log(a) + (t - s) * np.log1p(-a)).sum(axis=1)
    i = int(np.argmax(values))
    best_x, best_f = float(grid[i]), float(values[i])
    lo, up = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, grid_points - 1)])
    res = minimize_scalar(lambda x: -loglik(x), bounds=(lo, up), method="bounded", options={"xatol": 1e-10})
    if res.success and -res.fun > best_f:
        best_x, best_f = float(res.x), float(-res.fun)
    return best_x, best_f


@dataclass(frozen=True, eq=False)
class EffectivePrefixFit:
    """Both models' fitted parameter, log-likelihood and AIC, with per-depth predictions."""

    u: float
    v: float
    loglik_proportional: float
    loglik_constant: float
    aic_proportional: float
    aic_constant: float
    delta_aic: float
    preferred: Model
    depths: tuple[int, ...]
    trials: np.ndarray
    observed: np.ndarray
    predicted_proportional: np.ndarray
    predicted_constant: np.ndarray
    agent: str | None = None

    def to_row(self) -> dict[str, Any]:
        """The scalar fields (and the depths as a space-separated string), for a CSV row."""
        return {
            "agent": self.agent if self.agent is not None else "",
            "u": self.u,
            "v": self.v,
            "loglik_proportional": self.loglik_proportional,
            "loglik_constant": self.loglik_constant,
            "aic_proportional": self.aic_proportional,
            "aic_constant": self.aic_constant,
            "delta_aic": self.delta_aic,
            "preferred": self.preferred,
            "depths": " ".join(str(g) for g in self.depths),
            "total_trials": int(np.sum(self.trials)),
        }

    def format_table(self) -> str:
        """A text table: per-depth observed vs both models' predictions, then u, v, AICs and ΔAIC."""
        title = "effective-prefix fit" + (f" ({self.agent})" if self.agent is not None else "")
        lines = [title, f"{'g':>4} {'trials':>7} {'observed':>9} {'k=u*g':>9} {'k=min(v,g)':>11}"]
        for g, t, o, p, c in zip(
            self.depths,
            self.trials,
            self.observed,
            self.predicted_proportional,
            self.predicted_constant,
            strict=True,
        ):
            lines.append(f"{g:>4} {int(t):>7} {o:>9.4f} {p:>9.4f} {c:>11.4f}")
        lines += [
            f"proportional k = u*g       u = {self.u:.4f}  log L = {self.loglik_proportional:.3f}"
            f"  AIC = {self.aic_proportional:.3f}",
            f"constant     k = min(v, g) v = {self.v:.4f}  log L = {self.loglik_constant:.3f}"
            f"  AIC = {self.aic_constant:.3f}",
            f"ΔAIC (proportional - constant) = {self.delta_aic:.3f}  -> {self.preferred} preferred",
        ]
        return "\n".join(lines)

    def write_csv(self, path: str | Path) -> None:
        """Write this fit as a one-row CSV (see :func:`write_fits_csv`)."""
        write_fits_csv(path, [self])


def write_fits_csv(path: str | Path, fits: Sequence[EffectivePrefixFit]) -> None:
    """Write one :meth:`EffectivePrefixFit.to_row` row per fit (e.g. one per agent)."""
    if not fits:
        raise GF2ConfigError("write_fits_csv got no fits; pass at least one EffectivePrefixFit.")
    rows = [f.to_row() for f in fits]
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def fit_effective_prefix(counts: DepthCounts, curve: DCurve, grid_points: int = 2001) -> EffectivePrefixFit:
    """Fit ``u`` (``k = u·g``) and ``v`` (``k = min(v, g)``) by binomial maximum likelihood.

    Each parameter is maximised on a ``grid_points`` grid (``u`` over ``[0, 1]``, ``v`` over
    ``[0, max counted depth]``; beyond that ``v`` changes nothing), then refined by bounded Brent
    between the best grid point's neighbours. Model probabilities are clipped to
    ``[1e-12, 1 - 1e-12]`` inside the log only (the predictions reported are unclipped).
    ΔAIC = AIC_proportional - AIC_constant; ``preferred`` is "proportional" when ΔAIC < 0, else
    "constant" (ties, e.g. when only depth 0 is counted, go to constant).
    """
    if isinstance(grid_points, bool) or not isinstance(grid_points, (int, np.integer)) or grid_points < 2:
        raise GF2ConfigError(f"grid_points={grid_points!r} must be an integer >= 2.")
    absent = [g for g in counts.depths if g not in curve.table]
    if absent:
        raise GF2ConfigError(
            f"depths {absent} of the counts are not tabulated in the DCurve (it has {list(curve.depths)}); "
            "compute the curve at those depths or drop them from the counts."
        )
    depths = counts.depths
    u, ll_p = _maximise(curve, counts, "proportional", 1.0, int(grid_points))
    v, ll_c = _maximise(curve, counts, "constant", float(max(depths)), int(grid_points))
    aic_p, aic_c = 2 - 2 * ll_p, 2 - 2 * ll_c
    delta = aic_p - aic_c
    return EffectivePrefixFit(
        u=u,
        v=v,
        loglik_proportional=ll_p,
        loglik_constant=ll_c,
        aic_proportional=aic_p,
        aic_constant=aic_c,
        delta_aic=delta,
        preferred="proportional" if delta < 0 else "constant",
        depths=depths,
        trials=_readonly(counts.trials),
        observed=_readonly(counts.observed),
        predicted_proportional=_readonly(model_probabilities(curve, depths, "proportional", u)),
        predicted_constant=_readonly(model_probabilities(curve, depths, "constant", v)),
        agent=counts.agent,
    )


__all__ = [
    "DCurve",
    "DepthCounts",
    "EffectivePrefixFit",
    "binomial_loglik",
    "fit_effective_prefix",
    "model_probabilities",
    "write_fits_csv",
]
