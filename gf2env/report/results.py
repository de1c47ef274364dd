"""The tidy results table of an evaluation (one row per agent × record) and its summary by depth.

A results row holds ``RESULT_COLUMNS``: who answered (``agent``), on what (``source``: ``"grid"`` or
a records file name; ``sampling``, ``p``, ``d``, ``K``, ``n``, ``g``, ``trial``, ``seed``), and how
well: ``gamma``, the agent's probability of the true next term (posterior mass for estimators, 0/1
for plain policies), ``correct`` (its chosen ``action`` equals ``target``; both are candidate ranks)
and ``num_candidates`` ``= C(p, d-1)``.

What the step cost (``COMPUTE_COLUMNS``; optional: blank where unknown, and files written before
them read as blank). For an LLM each is the mean over the record's samples (one answer's cost):

===================== ==========================================================================
``wall_ms``           the agent's own time for the step: an estimator's or policy's time in
                      ``answer`` divided by the records it answered at once; an LLM's ``model_ms``
                      + ``sandbox_ms`` (time waiting for a server queue is not counted)
``model_ms``          an LLM's model latency for the query (all turns of a tool episode)
``prompt_tokens``     tokens an LLM read (summed over a tool episode's turns)
``completion_tokens`` tokens an LLM wrote (likewise)
``sandbox_runs``      runs of the model's code in the sandbox (0 for an LLM without tools)
``sandbox_ms``        their summed wall time
===================== ==========================================================================

:func:`summarize` groups rows by ``SUMMARY_KEYS`` and gives the mean γ and accuracy of each group
with Jeffreys intervals (:func:`jeffreys_interval`), and the mean of each compute column over the
group's rows that have it (blank where none has); :func:`format_compute` prints them.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from math import comb
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import beta

from gf2env.errors import GF2ConfigError, RecordFormatError
from gf2env.report.schema import (
    COMPUTE_COLUMNS,
    RESULTS,
    SUMMARY,
    SUMMARY_KEYS,
    ErrorType,
    format_cell,
    is_blank,
    missing,
    read_table,
)

RESULT_COLUMNS = RESULTS.names
SUMMARY_COLUMNS = SUMMARY.names
_GAMMA_SLACK = 1e-9  # γ this far outside [0, 1] (float round-off in a posterior sum) is clipped

FloatOrArray = float | np.ndarray


# ---------------------------------------------------------------------------------------- coercion


def _coerce_result(row: Mapping[str, Any], where: str, error: ErrorType) -> dict[str, Any]:
    """``row``'s ``RESULT_COLUMNS`` with their types restored and checked; extra keys are dropped (and
    absent compute columns are blank: ``None``)."""
    absent = missing(row.keys(), RESULTS.required)
    if absent:
        raise error(
            f"{where} lacks the columns {absent}; a results row needs all of {list(RESULTS.required)}."
        )
    out = RESULTS.parse(row, where, error)
    for column in COMPUTE_COLUMNS:
        if out[column] is not None and out[column] < 0:
            raise error(f"{where}: {column}={out[column]!r} is negative; a cost is >= 0 (blank: unknown).")
    gamma = out["gamma"]
    if not -_GAMMA_SLACK <= gamma <= 1 + _GAMMA_SLACK:
        raise error(f"{where}: gamma={gamma!r} is outside [0, 1]; gamma is a probability.")
    out["gamma"] = min(max(gamma, 0.0), 1.0)
    correct = out["correct"]
    if correct not in (0, 1):
        raise error(f"{where}: correct={correct!r} is not 0 or 1.")
    p, d = out["p"], out["d"]
    if d < 2 or p < d - 1:
        raise error(f"{where}: (p, d) = ({p}, {d}) is not a task; need d >= 2 and p >= d-1.")
    if out["num_candidates"] != comb(p, d - 1):
        raise error(
            f"{where}: num_candidates={out['num_candidates']} but C(p, d-1) = C({p}, {d - 1}) = "
            f"{comb(p, d - 1)}; give num_candidates = C(p, d-1)."
        )
    if not 0 <= out["target"] < out["num_candidates"]:
        raise error(f"{where}: target={out['target']} is not a rank in [0, {out['num_candidates']}).")
    if not 0 <= out["g"] < out["n"]:
        raise error(f"{where}: g={out['g']} is outside [0, n) = [0, {out['n']}).")
    if correct != int(out["action"] == out["target"]):
        raise error(
            f"{where}: correct={correct} but action={out['action']} and target={out['target']}; "
            f"correct must be 1 exactly when action == target."
        )
    return out


# ------------------------------------------------------------------------------------- results CSV


def _prepared(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [_coerce_result(row, f"results row {i}", GF2ConfigError) for i, row in enumerate(rows)]


def write_results_csv(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """Write ``rows`` (in the given order) as a CSV with header ``RESULT_COLUMNS``; return their count.

    Every row is checked before the file is opened, so a bad row leaves no partial file.
    Keys outside ``RESULT_COLUMNS`` are ignored.
    """
    prepared = _prepared(rows)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(RESULT_COLUMNS)
        writer.writerows([format_cell(row[c]) for c in RESULT_COLUMNS] for row in prepared)
    return len(prepared)


def append_results_csv(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """Append ``rows`` to a results CSV, writing the header only if the file is new or empty."""
    prepared = _prepared(rows)
    path = Path(path)
    fresh = not path.exists() or path.stat().st_size == 0
    if not fresh:
        with open(path, newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), [])
        if tuple(header) != RESULT_COLUMNS:
            raise RecordFormatError(
                f"{path} has the header {header}, not the results columns {list(RESULT_COLUMNS)}; "
                f"append to a file written by write_results_csv or pass a new path."
            )
    with open(path, "a", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        if fresh:
            writer.writerow(RESULT_COLUMNS)
        writer.writerows([format_cell(row[c]) for c in RESULT_COLUMNS] for row in prepared)
    return len(prepared)


RESULT_KEY = ("agent", "source", "sampling", "p", "d", "K", "n", "g", "trial", "seed")
"""The columns that name one agent's answer to one record: no two rows of a results table share them."""


def read_results_csv(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a results CSV with their types restored (``seed`` is an int or ``None``)."""
    raw = read_table(path, RESULTS)
    rows = [_coerce_result(row, f"{path} line {i + 2}", RecordFormatError) for i, row in enumerate(raw)]
    first: dict[tuple[Any, ...], int] = {}
    for i, row in enumerate(rows):  # a row twice (two files pasted together) would count its record twice
        line = first.setdefault(tuple(row[k] for k in RESULT_KEY), i + 2)
        if line != i + 2:
            raise RecordFormatError(
                f"{path} line {i + 2} repeats line {line} (the same agent and record: "
                f"{', '.join(f'{k}={row[k]}' for k in RESULT_KEY)}); a record counts once, drop one of them."
            )
    return rows


# ---------------------------------------------------------------------------------------- Jeffreys


def jeffreys_interval(
    successes: float | np.ndarray, trials: float | np.ndarray, level: float = 0.95
) -> tuple[FloatOrArray, FloatOrArray]:
    """Equal-tailed Jeffreys interval ``(lo, hi)`` for a success rate, vectorised over arrays.

    The bounds are the ``(1 ± level)/2`` quantiles of ``Beta(s + 1/2, t - s + 1/2)``, with ``lo = 0``
    when ``s == 0`` and ``hi = 1`` when ``s == t`` (Brown, Cai & DasGupta 2001). ``successes`` may
    be fractional: for γ we pass ``Σγ``, the summed posterior mass. That is conservative, since a
    trial valued in [0, 1] with mean μ has variance at most μ(1 - μ), that of a Bernoulli(μ) trial.
    For tiny fractional ``s`` the bounds are widened if needed to contain ``s / t``.
    Scalar inputs give floats; arrays broadcast and give arrays.
    """
    if isinstance(level, bool) or not isinstance(level, (int, float, np.integer, np.floating)):
        raise GF2ConfigError(f"level={level!r} is not a number; pass 0 < level < 1, e.g. 0.95.")
    if not 0 < level < 1:
        raise GF2ConfigError(f"level={level!r} is outside (0, 1); pass 0 < level < 1, e.g. 0.95.")
    try:
        s, t = np.broadcast_arrays(np.asarray(successes, dtype=float), np.asarray(trials, dtype=float))
    except (TypeError, ValueError) as err:
        raise GF2ConfigError(
            f"successes and trials must be numbers or arrays of one shape (after broadcasting): {err}"
        ) from None

    def _first(bad: np.ndarray) -> str:
        i = np.unravel_index(int(np.argmax(bad)), bad.shape) if bad.ndim else ()
        where = f" at index {tuple(int(j) for j in i)}" if bad.ndim else ""
        return f"successes={float(s[i])!r}, trials={float(t[i])!r}{where}"

    bad = ~(np.isfinite(s) & np.isfinite(t))
    if bad.any():
        raise GF2ConfigError(f"{_first(bad)} is not finite; pass finite counts.")
    bad = t < 1
    if bad.any():
        raise GF2ConfigError(f"{_first(bad)}: trials < 1; pass trials >= 1.")
    bad = (s < 0) | (s > t)
    if bad.any():
        raise GF2ConfigError(f"{_first(bad)}: successes outside [0, trials]; pass 0 <= successes <= trials.")
    tail = (1.0 - float(level)) / 2.0
    a, b = s + 0.5, t - s + 0.5
    rate = s / t
    lo = np.where(s == 0, 0.0, np.minimum(beta.ppf(tail, a, b), rate))
    hi = np.where(s == t, 1.0, np.maximum(beta.ppf(1.0 - tail, a, b), rate))
    if lo.ndim == 0:
        return float(lo), float(hi)
    return lo, hi


# ----------------------------------------------------------------------------------------- summary


def summarize(rows: Iterable[Mapping[str, Any]], level: float = 0.95) -> list[dict[str, Any]]:
    """Mean γ and accuracy, with Jeffreys intervals, of each ``SUMMARY_KEYS`` group of results rows,
    and the mean of each compute column over the group's rows that have it (``None``: none has).

    Groups come in order of first appearance of the agent, then sorted by sampling, p, d, K, g.
    ``chance`` is ``1 / num_candidates``, the success rate of a history-only guess.
    """
    agent_order: dict[str, int] = {}
    groups: dict[tuple[Any, ...], list[float]] = {}  # key -> [trials, Σγ, Σcorrect, num_candidates]
    costs: dict[tuple[Any, ...], dict[str, list[float]]] = {}  # key -> compute column -> known values
    for i, raw in enumerate(rows):
        row = _coerce_result(raw, f"results row {i}", GF2ConfigError)
        agent_order.setdefault(row["agent"], len(agent_order))
        key = tuple(row[k] for k in SUMMARY_KEYS)
        acc = groups.setdefault(key, [0, 0.0, 0, row["num_candidates"]])
        acc[0] += 1
        acc[1] += row["gamma"]
        acc[2] += row["correct"]
        known = costs.setdefault(key, {c: [] for c in COMPUTE_COLUMNS})
        for column in COMPUTE_COLUMNS:
            if row[column] is not None:
                known[column].append(row[column])
    if not groups:
        return []
    keys = sorted(groups, key=lambda k: (agent_order[k[0]], *k[1:]))
    trials = np.array([groups[k][0] for k in keys], dtype=float)
    gamma_sum = np.minimum(np.array([groups[k][1] for k in keys]), trials)
    correct_sum = np.array([groups[k][2] for k in keys], dtype=float)
    g_lo, g_hi = map(np.asarray, jeffreys_interval(gamma_sum, trials, level))
    a_lo, a_hi = map(np.asarray, jeffreys_interval(correct_sum, trials, level))
    out = []
    for j, key in enumerate(keys):
        n_trials, _, _, candidates = groups[key]
        out.append(
            {
                **dict(zip(SUMMARY_KEYS, key, strict=True)),
                "trials": int(n_trials),
                "gamma_mean": float(gamma_sum[j] / trials[j]),
                "gamma_lo": float(g_lo[j]),
                "gamma_hi": float(g_hi[j]),
                "accuracy": float(correct_sum[j] / trials[j]),
                "accuracy_lo": float(a_lo[j]),
                "accuracy_hi": float(a_hi[j]),
                "chance": 1.0 / candidates,
                "level": float(level),
                **{c: float(np.mean(v)) if v else None for c, v in costs[key].items()},
            }
        )
    return out


def write_summary_csv(path: str | Path, summary: Iterable[Mapping[str, Any]]) -> int:
    """Write summary rows as a CSV with header ``SUMMARY_COLUMNS``; return their count."""
    rows = list(summary)
    floats = SUMMARY.of(float)
    for i, row in enumerate(rows):
        absent = missing(row.keys(), SUMMARY.required)
        if absent:
            raise GF2ConfigError(
                f"summary row {i} lacks the columns {absent}; pass rows made by summarize()."
            )
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(SUMMARY_COLUMNS)
        for row in rows:
            cells: list[Any] = [row.get(c) for c in SUMMARY_COLUMNS]
            cells = [None if is_blank(v) else float(v) if c in floats else v
                     for c, v in zip(SUMMARY_COLUMNS, cells, strict=True)]  # fmt: skip
            writer.writerow([format_cell(c) for c in cells])
    return len(rows)


def read_summary_csv(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a summary CSV with their types restored."""
    raw = read_table(path, SUMMARY)
    return [SUMMARY.parse(row, f"{path} line {i + 2}") for i, row in enumerate(raw)]


def format_summary(summary: Iterable[Mapping[str, Any]]) -> str:
    """A fixed-width text table of summary rows for a terminal.

    Columns: agent, sampling, p (d and K too when they vary), g, trials, γ with its interval,
    accuracy and chance.
    """
    rows = list(summary)
    varying = [k for k in ("d", "K") if len({row[k] for row in rows}) > 1]
    levels = {float(row["level"]) for row in rows if "level" in row}
    band = f"{100 * levels.pop():g}% CI" if len(levels) == 1 else "CI"
    header = ["agent", "sampling", "p", *varying, "g", "trials", f"γ [{band}]", "accuracy", "chance"]
    table = [header]
    for row in rows:
        gamma = f"{row['gamma_mean']:.3f} [{row['gamma_lo']:.3f}, {row['gamma_hi']:.3f}]"
        table.append(
            [
                str(row["agent"]),
                str(row["sampling"]),
                str(row["p"]),
                *(str(row[k]) for k in varying),
                str(row["g"]),
                str(row["trials"]),
                gamma,
                f"{row['accuracy']:.3f}",
                f"{row['chance']:.3g}",
            ]
        )
    return _fixed_width(table, left=2)


def _fixed_width(table: list[list[str]], left: int) -> str:
    """``table`` (a header line, then rows) as aligned text: the first ``left`` columns to the left,
    the rest (numbers) to the right, a rule under the header."""
    widths = [max(len(line[j]) for line in table) for j in range(len(table[0]))]
    lines = [
        "  ".join(
            cell.ljust(w) if j < left else cell.rjust(w)
            for j, (cell, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in table
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def compute_value(row: Mapping[str, Any], measure: str) -> float | None:
    """A row's value of a compute measure (one of ``schema.COMPUTE_MEASURES``: a compute column, or
    ``total_tokens``, prompt + completion), ``None`` where unknown."""
    parts = ("prompt_tokens", "completion_tokens") if measure == "total_tokens" else (measure,)
    values: list[Any] = [row.get(c) for c in parts]
    return None if any(is_blank(v) for v in values) else sum(float(v) for v in values)


_COMPUTE_SHOWN = (  # measure, title, format
    ("total_tokens", "tokens", ".0f"),
    ("wall_ms", "wall ms", ".3g"),
    ("model_ms", "model ms", ".4g"),
    ("sandbox_runs", "sandbox runs", ".2f"),
    ("sandbox_ms", "sandbox ms", ".4g"),
)


def format_compute(summary: Iterable[Mapping[str, Any]]) -> str:
    """A fixed-width text table of what a step cost each agent at each depth: γ, then the mean tokens
    (prompt + completion), wall ms, model ms, sandbox runs and sandbox ms per step, those that some
    row has ("-": unknown). Empty when no row has any compute column."""
    rows = list(summary)
    if not any(not is_blank(row.get(c)) for row in rows for c in COMPUTE_COLUMNS):
        return ""

    def cell(row: Mapping[str, Any], measure: str, digits: str) -> str:
        value = compute_value(row, measure)
        return "-" if value is None else format(value, digits)

    varying = [k for k in ("sampling", "p", "d", "K") if len({row[k] for row in rows}) > 1]
    shown = [(m, title, digits) for m, title, digits in _COMPUTE_SHOWN
             if any(compute_value(row, m) is not None for row in rows)]  # fmt: skip
    table = [["agent", *varying, "g", "γ", *(title for _, title, _ in shown)]]
    for row in rows:
        table.append(
            [str(row["agent"]), *(str(row[k]) for k in varying), str(row["g"]), f"{row['gamma_mean']:.3f}",
             *(cell(row, m, digits) for m, _, digits in shown)]
        )  # fmt: skip
    return _fixed_width(table, left=1)
