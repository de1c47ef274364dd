"""Effective-prefix fit (the paper's Table 1): how many prefix terms does an agent behave as if it knew?

One idea: the fit itself (both models, both methods, per agent and setting, and its table).

Estimator D knows ``k`` of the ``g`` prefix terms and marginalises the rest; its mean success
``γ_D(g, k)`` (a :class:`~gf2env.report.d_curve.DCurve`) rises with ``k`` from the data-only value
(``k = 0``) to the diligent value (``k = g``). An agent's per-depth successes (:class:`DepthCounts`)
are modelled as ``γ_D(g, k(g))`` with either

- *proportional*: ``k = u·g``, ``u ∈ [0, 1]``, or
- *constant*: ``k = min(v, g)``, ``v ∈ [0, max counted depth]``,

each fitted by binomial maximum likelihood over depths (:func:`fit_effective_prefix`), by one of
two methods:

- ``"interpolated"`` (gf2env's): ``k`` is real-valued, ``γ_D`` is interpolated linearly between
  neighbouring integers, and ``u``, ``v`` are maximised continuously (grid, then Brent);
- ``"paper"`` (the paper's code, ``fit_llm_to_estimator_d`` in its ``plot_utils.py``): ``k`` is the
  integer ``round(k_eff)`` and ``γ_D`` is read at that ``k`` (no interpolation); ``u`` runs over the
  grid ``0, 0.01, ..., 1`` (``np.linspace(0, 1, 101)``) and ``v`` over the integers
  ``0..max depth``. This is the one to set beside the paper's Table 1 (see :data:`PAPER_U_GRID`).

Each model has one parameter, so ``AIC = 2 - 2 log L`` and ``ΔAIC = AIC_proportional -
AIC_constant`` (negative favours proportional), whichever the method.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
from scipy.optimize import minimize_scalar

from gf2env.errors import GF2ConfigError, RecordFormatError
from gf2env.report.d_curve import DCurve, readonly, simulate_d_curve
from gf2env.report.depth_counts import DepthCounts
from gf2env.report.schema import FITS, read_table, to_float
from gf2env.task.oracle import TaskConfig

Model = Literal["proportional", "constant"]
MODELS: tuple[Model, ...] = ("proportional", "constant")
Method = Literal["interpolated", "paper"]
METHODS: tuple[Method, ...] = ("interpolated", "paper")
PROB_CLIP = 1e-12  # model probabilities are clipped to [PROB_CLIP, 1 - PROB_CLIP] inside the log only
Setting = tuple[str, int, int, int]
"""A results setting: ``(sampling, p, d, K)``, the columns that tell a multi-setting table's rows apart."""
PAPER_U_GRID: np.ndarray = readonly(np.linspace(0.0, 1.0, 101))
"""The paper's grid of ``u``: ``np.linspace(0, 1, 101)``, the very floats its code multiplies by ``g``."""


def paper_k(k_eff: np.ndarray | float, g: int) -> np.ndarray:
    """The paper's integer ``k`` for a real ``k_eff``: ``round(clamp(k_eff, 0, g))``, ties to even.

    The paper's code computes ``int(round(max(0, min(g, k_eff))))`` with Python's ``round``, which
    rounds a half to the even neighbour (``round(1.5) = 2``, ``round(0.5) = 0``, ``round(2.5) =
    2``); ``np.rint`` rounds the same float the same way. docs/design.md §3 says nothing about
    rounding, so this follows the paper's code rather than half-up: e.g. ``u = 0.5`` gives ``k = 0`` at
    ``g = 1``, ``k = 2`` at ``g = 3``, ``k = 2`` at ``g = 5``.
    """
    return np.rint(np.clip(np.asarray(k_eff, dtype=float), 0, g)).astype(int)


# ------------------------------------------------------------------------------------------------ fit


def _check_param(model: Any, param: Any) -> float:
    if model not in MODELS:
        raise GF2ConfigError(f"model={model!r} is not one of {list(MODELS)}.")
    x = to_float(param, "u" if model == "proportional" else "v", f"the {model} model")
    if model == "proportional" and not 0 <= x <= 1:
        raise GF2ConfigError(f"u={param!r} is outside [0, 1]; the proportional model needs 0 <= u <= 1.")
    if model == "constant" and x < 0:
        raise GF2ConfigError(f"v={param!r} is negative; the constant model needs v >= 0.")
    return x


def _check_method(method: Any) -> Method:
    if method not in METHODS:
        raise GF2ConfigError(f"method={method!r} is not one of {list(METHODS)}; pass one of them.")
    m: Method = method
    return m


def _probs(
    curve: DCurve, depths: Sequence[int], model: Model, params: np.ndarray, method: Method = "interpolated"
) -> np.ndarray:
    """``(len(params), len(depths))`` model probabilities for already-validated inputs."""
    cols = []
    for g in depths:
        k = np.minimum(params * g, g) if model == "proportional" else np.minimum(params, g)
        cols.append(curve._interp(g, k) if method == "interpolated" else curve.table[g][paper_k(k, g)])
    return np.stack(cols, axis=-1)


def model_probabilities(
    curve: DCurve, depths: Sequence[int], model: Model, param: float, method: Method = "interpolated"
) -> np.ndarray:
    """The model's success probability at each depth: ``γ_D(g, u·g)`` or ``γ_D(g, min(v, g))``
    (``"interpolated"``), or ``γ_D`` at the integer :func:`paper_k` of the same ``k`` (``"paper"``)."""
    x = _check_param(model, param)
    m = _check_method(method)
    gs = [curve._check_depth(g) for g in depths]
    return _probs(curve, gs, model, np.array([x]), m)[0]


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
    i, values = _grid_argmax(curve, counts, model, grid, "interpolated")
    best_x, best_f = float(grid[i]), float(values[i])
    lo, up = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, grid_points - 1)])
    res = minimize_scalar(lambda x: -loglik(x), bounds=(lo, up), method="bounded", options={"xatol": 1e-10})
    if res.success and -res.fun > best_f:
        best_x, best_f = float(res.x), float(-res.fun)
    return best_x, best_f


def _grid_argmax(
    curve: DCurve, counts: DepthCounts, model: Model, grid: np.ndarray, method: Method
) -> tuple[int, np.ndarray]:
    """Index of the best grid point (the first, i.e. smallest parameter, on ties) and log L on the grid."""
    s, t = counts.successes, counts.trials
    a = np.clip(_probs(curve, counts.depths, model, grid, method), PROB_CLIP, 1 - PROB_CLIP)
    values = (s * np.log(a) + (t - s) * np.log1p(-a)).sum(axis=1)
    return int(np.argmax(values)), values


def _maximise_paper(curve: DCurve, counts: DepthCounts, model: Model) -> tuple[float, float]:
    """``(argmax, max)`` of log L over the paper's grid: ``u`` in :data:`PAPER_U_GRID`, ``v`` in
    ``0..max depth``; ties go to the smallest parameter (the paper keeps the first strict best)."""
    grid = PAPER_U_GRID if model == "proportional" else np.arange(max(counts.depths) + 1, dtype=float)
    i, values = _grid_argmax(curve, counts, model, grid, "paper")
    return float(grid[i]), float(values[i])


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
    method: Method = "interpolated"
    setting: Setting | None = None  # (sampling, p, d, K) of the results fitted, where known
    value: str | None = None  # what counted as success: "gamma" or "correct", where known

    def to_row(self) -> dict[str, Any]:
        """The scalar fields (and the depths as a space-separated string), for a CSV row."""
        sampling, p, d, K = self.setting if self.setting is not None else ("", None, None, None)
        return {
            "agent": self.agent if self.agent is not None else "",
            "sampling": sampling,
            "p": p,
            "d": d,
            "K": K,
            "value": self.value or "",
            "method": self.method,
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
        about = [x for x in (self.agent, format_setting(self.setting) if self.setting else None) if x]
        title = f"effective-prefix fit, {self.method} method" + (f" ({', '.join(about)})" if about else "")
        prop, const = ("k=u*g", "k=min(v,g)") if self.method == "interpolated" else ("round(u*g)", "min(v,g)")
        lines = [title, f"{'g':>4} {'trials':>7} {'observed':>9} {prop:>10} {const:>10}"]
        for g, t, o, p, c in zip(
            self.depths,
            self.trials,
            self.observed,
            self.predicted_proportional,
            self.predicted_constant,
            strict=True,
        ):
            lines.append(f"{g:>4} {int(t):>7} {o:>9.4f} {p:>10.4f} {c:>10.4f}")
        k_p = f"{'u*g' if self.method == 'interpolated' else 'round(u*g)':<10}"
        k_c = f"{'min(v, g)':<10}"
        lines += [
            f"proportional k = {k_p} u = {self.u:.4f}  log L = {self.loglik_proportional:.3f}"
            f"  AIC = {self.aic_proportional:.3f}",
            f"constant     k = {k_c} v = {self.v:.4f}  log L = {self.loglik_constant:.3f}"
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


def read_fits_csv(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a ``fit.csv`` (:func:`write_fits_csv`), typed. A file lacking a column (e.g.
    ``method``, in one written before the paper method existed) or with an unknown method raises
    :class:`RecordFormatError`."""
    rows = read_table(path, FITS)
    parsed = [FITS.parse(row, f"{path} row {i + 2}") for i, row in enumerate(rows)]
    for i, row in enumerate(parsed):
        if row["method"] not in METHODS:
            raise RecordFormatError(
                f"{path} row {i + 2} has method={row['method']!r}, not one of {list(METHODS)}; "
                "rewrite the file with gf2 fit."
            )
    return parsed


def fit_effective_prefix(
    counts: DepthCounts, curve: DCurve, grid_points: int = 2001, method: Method = "interpolated"
) -> EffectivePrefixFit:
    """Fit ``u`` (``k = u·g``) and ``v`` (``k = min(v, g)``) by binomial maximum likelihood.

    ``method="interpolated"``: each parameter is maximised on a ``grid_points`` grid (``u`` over
    ``[0, 1]``, ``v`` over ``[0, max counted depth]``; beyond that ``v`` changes nothing), then
    refined by bounded Brent between the best grid point's neighbours, ``γ_D`` interpolated at real
    ``k``. ``method="paper"``: the paper's procedure, ``u`` over :data:`PAPER_U_GRID` and integer
    ``v`` in ``0..max depth``, ``γ_D`` read at the integer :func:`paper_k` (``grid_points`` is not
    used); the first best grid point wins. Model probabilities are clipped to
    ``[1e-12, 1 - 1e-12]`` inside the log only (the predictions reported are unclipped; the
    paper's 1e-10 changes nothing while γ_D stays above chance).
    ΔAIC = AIC_proportional - AIC_constant; ``preferred`` is "proportional" when ΔAIC < 0, else
    "constant" (ties, e.g. when only depth 0 is counted, go to constant).
    """
    m = _check_method(method)
    if isinstance(grid_points, bool) or not isinstance(grid_points, (int, np.integer)) or grid_points < 2:
        raise GF2ConfigError(f"grid_points={grid_points!r} must be an integer >= 2.")
    absent = [g for g in counts.depths if g not in curve.table]
    if absent:
        raise GF2ConfigError(
            f"depths {absent} of the counts are not tabulated in the DCurve (it has {list(curve.depths)}); "
            "compute the curve at those depths or drop them from the counts."
        )
    depths = counts.depths
    if m == "paper":
        u, ll_p = _maximise_paper(curve, counts, "proportional")
        v, ll_c = _maximise_paper(curve, counts, "constant")
    else:
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
        predicted_proportional=readonly(model_probabilities(curve, depths, "proportional", u, m)),
        predicted_constant=readonly(model_probabilities(curve, depths, "constant", v, m)),
        agent=counts.agent,
        method=m,
    )


def setting_of(row: dict[str, Any]) -> Setting:
    """A results row's :data:`Setting`."""
    return (row["sampling"], row["p"], row["d"], row["K"])


def format_setting(setting: Setting) -> str:
    """``p=12 d=3 K=16 adversarial``."""
    sampling, p, d, K = setting
    return f"p={p} d={d} K={K} {sampling}"


def fit_agents(
    rows: list[dict[str, Any]],
    agents: list[str] | None = None,
    value: str = "gamma",
    curve: DCurve | None = None,
    curve_trials: int = 500,
    seed: int = 1,
    progress: bool = True,
    methods: Sequence[Method] = METHODS,
) -> tuple[list[EffectivePrefixFit], list[str]]:
    """The effective-prefix fit of every agent at every setting (p, d, K, sampling) with 2+ depths,
    by each of ``methods`` (default both: one fit per agent and method, on the same D curve).

    ``rows`` are results rows (``schema.RESULTS``). ``value`` is what counts as success at a record:
    ``gamma`` (the agent's probability of the truth, the paper's metric and what the D curve
    holds; for LLMs the fraction of right answers) or ``correct`` (its chosen action).

    The D curve is simulated for each setting on records of ``seed`` (``curve`` passes one in, for
    a single setting). Returns the fits and a line for each setting or agent that could not be
    fitted, and why.
    """
    if isinstance(methods, str) or not methods:
        raise GF2ConfigError(f"methods={methods!r} is not a non-empty list; pass some of {list(METHODS)}.")
    chosen = [_check_method(m) for m in methods]
    fits: list[EffectivePrefixFit] = []
    notes: list[str] = []
    for setting in sorted({setting_of(r) for r in rows}, key=lambda s: (s[1], s[2], s[3], s[0])):
        sampling, p, d, K = setting
        here = [r for r in rows if setting_of(r) == setting]
        depths = sorted({r["g"] for r in here})
        if len(depths) < 2:
            notes.append(f"note: no effective-prefix fit at {format_setting(setting)}: one depth only")
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
                for m in chosen:
                    fit = fit_effective_prefix(counts, setting_curve, method=m)
                    fits.append(replace(fit, setting=setting, value=value))
            except GF2ConfigError as err:
                notes.append(f"note: no effective-prefix fit for {agent} at {format_setting(setting)}: {err}")
    return fits, notes


def curve_config(p: int, d: int, K: int, sampling: str, depths: Sequence[int]) -> TaskConfig:
    """The task a results setting's D curve is simulated on (records of unknown sampling: adversarial)."""
    mode = sampling if sampling != "unknown" else "adversarial"
    return TaskConfig(p=p, d=d, K=K, n=max(depths) + 1, sampling=mode)


__all__ = [
    "METHODS",
    "PAPER_U_GRID",
    "EffectivePrefixFit",
    "Method",
    "Setting",
    "binomial_loglik",
    "curve_config",
    "fit_agents",
    "fit_effective_prefix",
    "format_setting",
    "model_probabilities",
    "paper_k",
    "read_fits_csv",
    "setting_of",
    "write_fits_csv",
]
