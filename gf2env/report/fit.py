"""Effective-prefix fit (the paper's Table 1): how many prefix terms does an agent behave as if it knew?

Estimator D knows ``k`` of the ``g`` prefix terms and marginalises the rest; its mean success
``γ_D(g, k)`` (a :class:`~gf2env.report.d_curve.DCurve`) rises with ``k`` from the data-only value
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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from scipy.optimize import minimize_scalar

from gf2env.errors import GF2ConfigError
from gf2env.oracle import TaskConfig
from gf2env.report.d_curve import DCurve, as_float, readonly, simulate_d_curve
from gf2env.report.depth_counts import DepthCounts
from gf2env.report.schema import FITS

Model = Literal["proportional", "constant"]
MODELS: tuple[Model, ...] = ("proportional", "constant")
PROB_CLIP = 1e-12  # model probabilities are clipped to [PROB_CLIP, 1 - PROB_CLIP] inside the log only


# ------------------------------------------------------------------------------------------------ fit


def _check_param(model: Any, param: Any) -> float:
    if model not in MODELS:
        raise GF2ConfigError(f"model={model!r} is not one of {list(MODELS)}.")
    x = as_float(param, "u" if model == "proportional" else "v")
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
    assert tuple(rows[0]) == FITS.names, "EffectivePrefixFit.to_row and schema.FITS disagree"
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FITS.names)
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
        trials=readonly(counts.trials),
        observed=readonly(counts.observed),
        predicted_proportional=readonly(model_probabilities(curve, depths, "proportional", u)),
        predicted_constant=readonly(model_probabilities(curve, depths, "constant", v)),
        agent=counts.agent,
    )


def fit_agents(
    rows: list[dict[str, Any]],
    agents: list[str] | None = None,
    value: str = "gamma",
    curve: DCurve | None = None,
    curve_trials: int = 500,
    seed: int = 1,
    progress: bool = True,
) -> tuple[list[EffectivePrefixFit], list[str]]:
    """The effective-prefix fit of every agent at every setting (p, d, K, sampling) with 2+ depths.

    ``rows`` are results rows (``schema.RESULTS``). ``value`` is what counts as success at a record:
    ``gamma`` (the agent's probability of the truth, the paper's metric and what the D curve
    holds; for LLMs the fraction of right answers) or ``correct`` (its chosen action).

    The D curve is simulated for each setting on records of ``seed`` (``curve`` passes one in, for
    a single setting). Returns the fits and a line for each setting or agent that could not be
    fitted, and why.
    """
    fits, notes = [], []
    settings = sorted({(r["p"], r["d"], r["K"], r["sampling"]) for r in rows})
    for p, d, K, sampling in settings:
        here = [r for r in rows if (r["p"], r["d"], r["K"], r["sampling"]) == (p, d, K, sampling)]
        depths = sorted({r["g"] for r in here})
        if len(depths) < 2:
            notes.append(f"note: no effective-prefix fit at p={p} d={d} K={K} {sampling}: one depth only")
            continue
        setting_curve = curve
        if setting_curve is None:
            setting_curve = simulate_d_curve(
                curve_config(p, d, K, sampling, depths), depths, curve_trials, seed=seed, progress=progress
            )
        for agent in agents or list(dict.fromkeys(r["agent"] for r in here)):
            mine = [r for r in here if r["agent"] == agent]
            if not mine:
                continue
            try:
                counts = DepthCounts.from_rows(mine, agent=agent, value=value)
                fits.append(fit_effective_prefix(counts, setting_curve))
            except GF2ConfigError as err:
                notes.append(f"note: no effective-prefix fit for {agent} at p={p} d={d} K={K}: {err}")
    return fits, notes


def curve_config(p: int, d: int, K: int, sampling: str, depths: Sequence[int]) -> TaskConfig:
    """The task a results setting's D curve is simulated on (records of unknown sampling: adversarial)."""
    mode = sampling if sampling != "unknown" else "adversarial"
    return TaskConfig(p=p, d=d, K=K, n=max(depths) + 1, sampling=mode)


__all__ = [
    "EffectivePrefixFit",
    "binomial_loglik",
    "curve_config",
    "fit_agents",
    "fit_effective_prefix",
    "model_probabilities",
    "write_fits_csv",
]
