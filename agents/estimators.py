"""Classical estimators as batch functions over records (design.md §2).

Each returns, for every record, a posterior over the ``C(p, d-1)`` candidate supports (in the
env's action order); γ of an estimator is the posterior mass on the truth.

- :func:`posterior_diligent` (estimator A, prefix + data): candidates consistent with every
  residual ``r = y XOR prefix-part`` keep equal weight.
- :func:`posterior_history_only` (estimator C): uniform.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

import numpy as np

from gf2env.combinatorics import all_supports, fires, rank_support, supports_to_masks
from gf2env.oracle import prefix_mask_bits
from gf2env.records import Record


def candidate_masks(p: int, d: int) -> np.ndarray:
    """The ``uint64`` masks of all supports, in lexicographic (action) order."""
    return supports_to_masks(all_supports(p, d - 1))


def _check_same_shape(records: Sequence[Record]) -> tuple[int, int, int]:
    shapes = {(r.p, r.d, r.K) for r in records}
    if len(shapes) != 1:
        raise ValueError(f"records mix (p, d, K) = {sorted(shapes)}; pass records of one shape.")
    return shapes.pop()


def residuals(record: Record) -> np.ndarray:
    """``labels XOR (prefix part)``: the next term's value on each of the record's samples."""
    return record.labels ^ prefix_mask_bits(record.evidence, record.instance())


def posterior_diligent(records: Sequence[Record]) -> np.ndarray:
    """Estimator A: (R, C) posterior, uniform over the candidates consistent with all residuals."""
    p, d, _ = _check_same_shape(records)
    cands = candidate_masks(p, d)
    r = np.stack([residuals(rec) for rec in records]).astype(bool)  # (R, K)
    v = np.stack([rec.evidence.payload_masks for rec in records])  # (R, K)
    consistent = (fires(v, cands[None, :]) == r[..., None]).all(axis=1)  # (R, C)
    return consistent / consistent.sum(axis=1, keepdims=True)


def posterior_history_only(records: Sequence[Record]) -> np.ndarray:
    """Estimator C: the uniform posterior, γ = 1/C(p, d-1)."""
    p, d, _ = _check_same_shape(records)
    c = comb(p, d - 1)
    return np.full((len(records), c), 1.0 / c)


def gamma(posterior: np.ndarray, records: Sequence[Record]) -> np.ndarray:
    """Posterior mass on each record's true next term."""
    truth = np.array([rank_support(rec.target, rec.p) for rec in records])
    return posterior[np.arange(len(records)), truth]


__all__ = [
    "candidate_masks",
    "gamma",
    "posterior_diligent",
    "posterior_history_only",
    "residuals",
]
