"""Supports as index sets, integer ranks and uint64 bit masks.

A support is a sorted tuple of ``k = d - 1`` distinct payload indices in ``[0, p)`` (the rule is
:func:`gf2env.task.rules.check_support`). Supports are ranked in lexicographic order, the order of
``itertools.combinations(range(p), k)``: rank 0 is ``(0, 1, ..., k-1)`` and rank ``C(p, k) - 1`` is
``(p-k, ..., p-1)``. Ranking and unranking are arithmetic (the combinatorial number system), so no
table of all supports is ever built.

Payload vectors and supports with ``p <= 64`` are also held as ``uint64`` masks, bit ``i`` being
payload index ``i``; a monomial fires on ``v`` exactly when ``v & mask == mask``.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from math import comb

import numpy as np

from gf2env.errors import InvalidActionError

MAX_PAYLOAD_BITS = 64
MAX_SUPPORT_TABLE = 2_000_000  # the most supports :func:`all_supports` will tabulate


def num_supports(p: int, k: int) -> int:
    """The number of supports, ``C(p, k)``."""
    return comb(p, k)


def rank_support(indices: Sequence[int], p: int) -> int:
    """Lexicographic rank of a support given as distinct indices (any order)."""
    support = sorted(int(i) for i in indices)
    k = len(support)
    # Mirroring every index (i -> p-1-i) turns lexicographic order into colexicographic order,
    # whose rank is the sum of C(c_i, i+1) over the mirrored, ascending indices.
    colex = sum(comb(p - 1 - c, k - pos) for pos, c in enumerate(support))
    return comb(p, k) - 1 - colex


def rank_supports(supports: np.ndarray, p: int) -> np.ndarray:
    """Lexicographic ranks (int64) of ascending supports ``(..., k)``: :func:`rank_support` on an array."""
    supports = np.asarray(supports, dtype=np.int64)
    k = supports.shape[-1]
    table = np.array([[comb(a, b) for b in range(k + 1)] for a in range(p + 1)], dtype=np.int64)
    pos = np.arange(k)
    colex = table[p - 1 - supports, k - pos].sum(axis=-1)
    return comb(p, k) - 1 - colex


def unrank_support(rank: int, p: int, k: int) -> tuple[int, ...]:
    """The support of lexicographic rank ``rank`` among the ``C(p, k)`` supports."""
    total = comb(p, k)
    if not 0 <= rank < total:
        raise InvalidActionError(
            f"Support rank {rank} is outside [0, {total}) for p={p}, d-1={k}; pass an integer in that range."
        )
    colex = total - 1 - rank
    mirrored = []
    for pos in range(k, 0, -1):
        c = pos - 1
        while comb(c + 1, pos) <= colex:
            c += 1
        mirrored.append(c)
        colex -= comb(c, pos)
    return tuple(sorted(p - 1 - c for c in mirrored))


def all_supports(p: int, k: int) -> np.ndarray:
    """Every support as a (C(p, k), k) ``int64`` array, row ``r`` the support of rank ``r``."""
    total = comb(p, k)
    if total > MAX_SUPPORT_TABLE:
        raise ValueError(
            f"C(p={p}, d-1={k}) = {total} supports exceed the {MAX_SUPPORT_TABLE} that are tabulated; "
            f"use a smaller p or d."
        )
    return np.array(list(combinations(range(p), k)), dtype=np.int64).reshape(total, k)


def support_mask(indices: Sequence[int]) -> int:
    """The bit mask (a Python int) with the bits of ``indices`` set."""
    mask = 0
    for i in indices:
        mask |= 1 << int(i)
    return mask


def mask_to_indices(mask: int) -> tuple[int, ...]:
    """The set bits of ``mask`` as an ascending tuple."""
    mask = int(mask)
    out = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return tuple(out)


def pack_bits(bits: np.ndarray) -> np.ndarray:
    """Pack the last axis of a 0/1 array (at most 64 wide) into ``uint64`` masks, bit i = column i."""
    width = bits.shape[-1]
    assert width <= MAX_PAYLOAD_BITS, width
    weights = np.left_shift(np.uint64(1), np.arange(width, dtype=np.uint64))
    return (bits.astype(np.uint64) * weights).sum(axis=-1, dtype=np.uint64)


def unpack_bits(masks: np.ndarray, width: int) -> np.ndarray:
    """Inverse of :func:`pack_bits`: ``uint64`` masks to a ``uint8`` array with ``width`` columns."""
    shifts = np.arange(width, dtype=np.uint64)
    return ((np.asarray(masks, dtype=np.uint64)[..., None] >> shifts) & np.uint64(1)).astype(np.uint8)


def supports_to_masks(supports: np.ndarray) -> np.ndarray:
    """Rows of payload indices, shape (..., k), to ``uint64`` masks, shape (...)."""
    supports = np.asarray(supports, dtype=np.uint64)
    return np.bitwise_or.reduce(np.left_shift(np.uint64(1), supports), axis=-1)


def fires(payload_masks: np.ndarray, term_masks: np.ndarray) -> np.ndarray:
    """``fires[s, j]`` is 1 where monomial ``j`` fires on payload ``s``: ``v & m == m``."""
    v = np.asarray(payload_masks, dtype=np.uint64)[..., :, None]
    m = np.asarray(term_masks, dtype=np.uint64)[..., None, :]
    return (v & m) == m
