"""Posteriors over the next term from a batch of steps (docs/design.md §2), with integer bit masks.

A :class:`StepBatch` holds ``R`` steps of one shape ``(p, d, K, g)`` as arrays: the prefix term
masks, the prefix address bits of every sample, the payload masks and the labels. Every posterior
here is over the ``C = C(p, d-1)`` candidate supports in lexicographic (action) order, with the
uniform prior the task draws supports from, and comes back as an ``(R, C)`` array of log weights
(``-inf`` where a candidate is impossible); :func:`normalise` turns them into probabilities.

- :func:`consistent_candidates` — estimator A: the prefix is known, so each residual
  ``r = y XOR (prefix part)`` equals ``M_S(v)``; the candidates that agree with every residual keep
  equal weight. Computed as the candidates inside the intersection of the positive payloads, then
  checked against the negative samples (no ``K x C`` table is built).
- :func:`intersection_candidates` — the intersection decoder of the recovery theorem: every
  ``(d-1)``-subset of the positive-residual intersection, negatives ignored.
- :func:`composite_log_likelihood` — the paper's data-only estimator B, and D when some prefix
  terms are known: the unknown part of each label is treated as an independent
  Bernoulli(½(1 − (1 − 2q)^m)) mask per sample, ``q = C(|v|, d-1)/C(p, d-1)`` and ``m`` the number of
  active unknown address bits. The masks of different samples share the prefix supports, so this
  is a composite likelihood, not the exact one. Its terms are summed as integer counts of each
  distinct term value, in ascending value order, so equal multisets of terms are equal bits.
- :func:`exact_completion_counts` / :func:`exact_log_likelihood` — the exact data-only posterior
  (and exact D): the unknown prefix supports are marginalised by counting, in ``int64``, the
  assignments of them that explain the labels (their XORed contributions to the K labels, meeting
  in the middle); the log-likelihood is ``log(count) - u log C``. Its cost grows like
  ``C^(u/2 + 1)`` for ``u`` unknown terms, so it refuses batches past :data:`EXACT_WORK_LIMIT` (at
  p=12, d=4: up to 3 unknown terms).

Ties are exact: candidates with equal counts (exact) or equal term multisets (composite) get
bit-identical log weights, so :func:`argmax_with_ties` sees them as tied.

One idea: the posterior over the next term's support given a step's data, on one batch layout;
the estimators differ only in which parts of the prefix they condition on, and share the masks,
the batch and the normalisation, so they stay together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from math import comb
from typing import TYPE_CHECKING, Protocol

import numpy as np

from gf2env.errors import GF2ConfigError, InconsistentEvidenceError
from gf2env.task.combinatorics import (
    all_supports,
    fires,
    pack_bits,
    rank_support,
    rank_supports,
    supports_to_masks,
    unpack_bits,
)

if TYPE_CHECKING:
    from gf2env.task.oracle import Evidence, Instance


class RecordedStep(Protocol):
    """What a batch needs of one recorded step: the fields of a record (:class:`gf2env.records.Record`)."""

    @property
    def p(self) -> int: ...

    @property
    def d(self) -> int: ...

    @property
    def K(self) -> int: ...

    @property
    def g(self) -> int: ...

    @property
    def prefix(self) -> Sequence[Sequence[int]]: ...

    @property
    def target(self) -> Sequence[int]: ...

    @property
    def address(self) -> np.ndarray: ...

    @property
    def payload(self) -> np.ndarray: ...

    @property
    def labels(self) -> np.ndarray: ...


#: Worst-case lookups per record the exact data-only posterior may spend: ``C^L + C^(R+1)`` for
#: ``u`` unknown terms split ``L = ceil(u/2)``, ``R = floor(u/2)``.
EXACT_WORK_LIMIT = 2_000_000
#: Lookups :func:`exact_completion_counts` does in one block of rows (its tables stay in cache).
EXACT_BLOCK_CELLS = 100_000


@lru_cache(maxsize=16)
def candidate_supports(p: int, d: int) -> np.ndarray:
    """(C, d-1) payload indices of all supports, in lexicographic (action) order."""
    supports = all_supports(p, d - 1)
    supports.setflags(write=False)
    return supports


@lru_cache(maxsize=16)
def candidate_masks(p: int, d: int) -> np.ndarray:
    """The ``uint64`` masks of all ``C(p, d-1)`` supports, in lexicographic (action) order."""
    masks = supports_to_masks(all_supports(p, d - 1))
    masks.setflags(write=False)
    return masks


@dataclass(frozen=True)
class StepBatch:
    """``R`` steps that share ``(p, d, K, g)``, as arrays.

    Attributes:
        prefix: (R, g) ``uint64`` masks of the prefix terms, in order.
        address: (R, K, g) ``bool`` prefix address bits ``a_1..a_g`` of every sample (``a_{g+1}``
            is 1 and later bits are 0 by construction, so they are not stored).
        payload: (R, K) ``uint64`` payload masks.
        labels: (R, K) ``uint8`` labels.
        target: (R,) ``int64`` ranks of the true next term, or ``None`` where it is unknown (a live
            observation).
    """

    p: int
    d: int
    prefix: np.ndarray
    address: np.ndarray
    payload: np.ndarray
    labels: np.ndarray
    target: np.ndarray | None = None

    @property
    def R(self) -> int:
        return int(self.labels.shape[0])

    @property
    def K(self) -> int:
        return int(self.labels.shape[1])

    @property
    def g(self) -> int:
        return int(self.prefix.shape[1])

    @property
    def num_candidates(self) -> int:
        return comb(self.p, self.d - 1)

    def __len__(self) -> int:
        return self.R

    def take(self, rows: slice | np.ndarray) -> StepBatch:
        """The sub-batch of the given rows."""
        return StepBatch(
            p=self.p,
            d=self.d,
            prefix=self.prefix[rows],
            address=self.address[rows],
            payload=self.payload[rows],
            labels=self.labels[rows],
            target=None if self.target is None else self.target[rows],
        )

    def chunks(self, max_cells: int = 4_000_000) -> list[StepBatch]:
        """Consecutive sub-batches whose ``R x K x C`` work arrays stay under ``max_cells``."""
        size = max(1, max_cells // max(1, self.K * self.num_candidates))
        return [self.take(slice(i, i + size)) for i in range(0, self.R, size)]

    @classmethod
    def from_supports(
        cls,
        p: int,
        d: int,
        prefix: np.ndarray,
        address: np.ndarray,
        payload: np.ndarray,
        labels: np.ndarray,
        target: np.ndarray,
    ) -> StepBatch:
        """The batch of ``R`` recorded steps at one depth ``g``, from supports and bits: ``prefix``
        ``(R, g, d - 1)`` and ``target`` ``(R, d - 1)`` supports, ``address`` ``(R, K, >= g)``, ``payload``
        ``(R, K, p)`` and ``labels`` ``(R, K)`` bits. Records and record columns both become batches here."""
        R, g = prefix.shape[:2]
        return cls(
            p=p,
            d=d,
            prefix=supports_to_masks(prefix) if g else np.zeros((R, 0), dtype=np.uint64),
            address=address[:, :, :g].astype(bool),
            payload=pack_bits(payload),
            labels=labels.astype(np.uint8),
            target=rank_supports(target, p),
        )

    @classmethod
    def from_records(cls, records: Sequence[RecordedStep]) -> StepBatch:
        """Stack records of one ``(p, d, K, g)``; their ``n`` may differ (only ``g + 1`` bits matter)."""
        if not records:
            raise ValueError("No records given; pass at least one.")
        shapes = {(r.p, r.d, r.K, r.g) for r in records}
        if len(shapes) != 1:
            raise ValueError(
                f"Records mix (p, d, K, g) = {sorted(shapes)}; group them first "
                "(gf2env.agents.harness.grid does)."
            )
        p, d, _, g = shapes.pop()
        return cls.from_supports(
            p,
            d,
            prefix=np.array([r.prefix for r in records], dtype=np.int64).reshape(len(records), g, d - 1),
            address=np.stack([r.address[:, :g] for r in records]),
            payload=np.stack([r.payload for r in records]),
            labels=np.stack([r.labels for r in records]),
            target=np.array([r.target for r in records], dtype=np.int64),
        )

    @classmethod
    def from_step(cls, instance: Instance, evidence: Evidence) -> StepBatch:
        """A batch of one step of an instance (the target known)."""
        g = evidence.g
        return cls(
            p=instance.p,
            d=instance.d,
            prefix=instance.masks[None, :g],
            address=evidence.address[None, :, :g].astype(bool),
            payload=evidence.payload_masks[None, :],
            labels=evidence.labels[None, :].astype(np.uint8),
            target=np.array([rank_support(instance.term(g), instance.p)], dtype=np.int64),
        )

    @classmethod
    def from_observation(cls, observation: dict[str, np.ndarray], p: int, d: int) -> StepBatch:
        """A batch of one step from a ``GF2Recon-v1`` observation (the target stays unknown)."""
        g = int(observation["depth"])
        prefix_bits = np.asarray(observation["prefix"])[:g].astype(np.uint8)
        prefix = pack_bits(prefix_bits) if g else np.zeros(0, dtype=np.uint64)
        return cls(
            p=p,
            d=d,
            prefix=prefix.reshape(1, g),
            address=np.asarray(observation["address"])[None, :, :g].astype(bool),
            payload=pack_bits(np.asarray(observation["payload"]))[None, :],
            labels=np.asarray(observation["labels"]).astype(np.uint8)[None, :],
        )


# ---------------------------------------------------------------------- prefix parts
def prefix_contributions(batch: StepBatch) -> np.ndarray:
    """(R, K, g) ``bool``: where prefix term ``j`` is active on a sample and fires on its payload."""
    return batch.address & fires(batch.payload, batch.prefix)


def known_terms(
    g: int, k: int, rows: int, which: str = "first", rng: np.random.Generator | None = None
) -> np.ndarray:
    """(rows, g) ``bool`` mask of the ``k`` prefix terms an estimator knows.

    ``which="first"`` knows the earliest ``k`` terms; ``"random"`` a uniform ``k``-subset per row
    (``rng`` required). The terms are exchangeable, so both give the same γ in expectation.
    """
    if not 0 <= k <= g:
        raise GF2ConfigError(f"k={k} known terms is outside [0, g] = [0, {g}]; pass 0 <= k <= g.")
    if which == "first":
        mask = np.zeros((rows, g), dtype=bool)
        mask[:, :k] = True
        return mask
    if which == "random":
        if rng is None:
            raise GF2ConfigError("which='random' needs an rng; pass rng=np.random.default_rng(seed).")
        order = np.argsort(rng.random((rows, g)), axis=1)
        return order < k
    raise GF2ConfigError(f"which={which!r} is not one of 'first', 'random'.")


def residuals(batch: StepBatch, known: np.ndarray | None = None) -> np.ndarray:
    """(R, K) ``uint8``: labels XOR the part of them due to the ``known`` prefix terms (all if None)."""
    contrib = prefix_contributions(batch)
    if known is not None:
        contrib &= known[:, None, :]
    return batch.labels ^ (np.count_nonzero(contrib, axis=-1) & 1).astype(np.uint8)


# ---------------------------------------------------------------------- estimator A and the decoder
def _positive_intersection(batch: StepBatch, r: np.ndarray) -> np.ndarray:
    full = np.uint64((1 << batch.p) - 1)
    return np.bitwise_and.reduce(np.where(r, batch.payload, full), axis=1)


def consistent_candidates(batch: StepBatch) -> np.ndarray:
    """Estimator A: (R, C) ``bool``, the candidates that agree with every residual.

    Raises :class:`InconsistentEvidenceError` for a step that no candidate explains (not oracle data).
    """
    r = residuals(batch).astype(bool)
    cands = candidate_masks(batch.p, batch.d)
    inter = _positive_intersection(batch, r)
    inside = (cands[None, :] & ~inter[:, None]) == 0  # (R, C): S within every positive payload
    rows, cols = np.nonzero(inside)
    if rows.size:
        m = cands[cols][:, None]
        fires_on_negative = (((batch.payload[rows] & m) == m) & ~r[rows]).any(axis=1)
        inside[rows[fires_on_negative], cols[fires_on_negative]] = False
    _check_explained(inside)
    return inside


def intersection_candidates(batch: StepBatch) -> np.ndarray:
    """The intersection decoder: (R, C) ``bool``, the supports inside the positive intersection."""
    r = residuals(batch).astype(bool)
    cands = candidate_masks(batch.p, batch.d)
    inside = (cands[None, :] & ~_positive_intersection(batch, r)[:, None]) == 0
    _check_explained(inside)
    return inside


def _check_explained(allowed: np.ndarray) -> None:
    empty = np.flatnonzero(~allowed.any(axis=1))
    if empty.size:
        raise InconsistentEvidenceError(
            f"Steps {empty[:10].tolist()} of the batch have no candidate consistent with their samples "
            f"and prefix; they are not oracle data (check the records' prefix, labels and bit order)."
        )


def positives(batch: StepBatch) -> np.ndarray:
    """(R,) the number of positive-residual samples ``T`` of each step (the recovery theorem's T)."""
    return residuals(batch).astype(bool).sum(axis=1)


# ---------------------------------------------------------------------- fire patterns
def _pack_samples(bits: np.ndarray) -> np.ndarray:
    """(..., K) 0/1 over samples to (..., W) ``uint64`` words, ``W = ceil(K/64)``: sample ``k`` is
    bit ``k % 64`` of word ``k // 64``."""
    K = bits.shape[-1]
    words = max(1, -(-K // 64))
    padded = np.zeros((*bits.shape[:-1], words * 64), dtype=bool)
    padded[..., :K] = bits
    return np.packbits(padded, axis=-1, bitorder="little").view("<u8").astype(np.uint64, copy=False)


def fire_patterns(payload: np.ndarray, p: int, d: int) -> np.ndarray:
    """(r, W, C) ``uint64``: for every candidate ``S``, the samples it fires on as bit words.

    ``[S fires on v] = AND_{i in S} v_i``, so each pattern is the AND of the ``d-1`` payload-bit
    columns of its support (no ``K x C`` table)."""
    columns = _pack_samples(np.swapaxes(unpack_bits(payload, p), 1, 2))  # (r, p, W)
    columns = np.swapaxes(columns, 1, 2)  # (r, W, p)
    everyone = _pack_samples(np.ones(payload.shape[1], dtype=np.uint8))  # (W,)
    out = np.broadcast_to(everyone[None, :, None], (payload.shape[0], len(everyone), comb(p, d - 1))).copy()
    for col in candidate_supports(p, d).T:  # d-1 ANDs over (r, W, C)
        out &= columns[:, :, col]
    return out


def _popcount_words(words: np.ndarray) -> np.ndarray:
    """Bits set in ``(..., W, C)`` words, summed over ``W``: ``(..., C)`` integers."""
    if words.shape[-2] == 1:
        return np.bitwise_count(words[..., 0, :])  # uint8: at most 64
    return np.bitwise_count(words).sum(axis=-2, dtype=np.int64)


# ---------------------------------------------------------------------- composite likelihood (B, D)
def _firing_probabilities(batch: StepBatch) -> np.ndarray:
    table = np.array([comb(w, batch.d - 1) for w in range(batch.p + 1)], dtype=np.float64)
    return table[np.bitwise_count(batch.payload)] / comb(batch.p, batch.d - 1)


def _term_values(agree0: np.ndarray, agree1: np.ndarray, soft: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct term values of each row and where they occur.

    Returns ``values`` (r, V) ascending (rows with fewer values padded with 0.0) and ``where``
    (r, V, 2, K) ``bool``: ``where[i, v, F, k]`` is True when sample ``k`` of row ``i`` is soft and
    its term is ``values[i, v]`` for a candidate that fires (``F=1``) or does not (``F=0``) on it.
    """
    r, K = agree0.shape
    flat = np.where(np.concatenate([soft, soft], axis=1), np.concatenate([agree0, agree1], axis=1), np.inf)
    order = np.argsort(flat, axis=1, kind="stable")
    ranked = np.take_along_axis(flat, order, axis=1)
    new = np.ones_like(ranked, dtype=bool)
    new[:, 1:] = ranked[:, 1:] != ranked[:, :-1]
    group = np.cumsum(new, axis=1) - 1  # (r, 2K) index of each sorted entry's value
    finite = np.isfinite(ranked)
    V = int(group[finite].max()) + 1 if finite.any() else 0
    values = np.zeros((r, V))
    where = np.zeros((r, V, 2, K), dtype=bool)
    rows = np.broadcast_to(np.arange(r)[:, None], order.shape)
    values[rows[finite], group[finite]] = ranked[finite]
    where[rows[finite], group[finite], order[finite] // K, order[finite] % K] = True
    return values, where


def composite_log_likelihood(batch: StepBatch, known: np.ndarray | None = None) -> np.ndarray:
    """(R, C) composite log-likelihood of every candidate, the ``known`` prefix terms subtracted.

    ``known`` is an (R, g) ``bool`` mask (None: no term known, estimator B). Samples whose unknown
    mask is certain (no active unknown term, or a payload on which every or no term fires) are hard
    constraints; the others contribute ``log Pr[mask = y XOR known part XOR M_S(v)]``. The terms are
    grouped by value: each candidate's log-likelihood is ``sum_v n_v(S) v`` over the row's distinct
    term values in ascending order, ``n_v(S)`` an integer count, so candidates with equal multisets
    of terms get bit-identical log-likelihoods (exact argmax ties).
    """
    if known is None:
        known = np.zeros((batch.R, batch.g), dtype=bool)
    r = residuals(batch, known)
    m = np.count_nonzero(batch.address & ~known[:, None, :], axis=-1)  # (R, K) active unknown terms
    q = _firing_probabilities(batch)
    pi = 0.5 * (1.0 - (1.0 - 2.0 * q) ** m)
    always = np.bitwise_count(batch.payload) == batch.p  # every support fires: mask = parity of m
    never = q == 0.0
    hard = (m == 0) | always | never
    pi = np.where(m == 0, 0.0, np.where(always, (m & 1).astype(np.float64), np.where(never, 0.0, pi)))
    with np.errstate(divide="ignore"):
        log_pi, log_not = np.log(np.where(hard, 0.5, pi)), np.log1p(-np.where(hard, 0.5, pi))
    agree0 = np.where(r == 0, log_not, log_pi)  # the term of a candidate that does not fire
    agree1 = np.where(r == 0, log_pi, log_not)  # ... and of one that fires
    # Hard samples: a candidate must fire exactly where t = r XOR mask is 1.
    need = _pack_samples(r ^ pi.astype(np.uint8))  # (R, W)
    hard_words = _pack_samples(hard.astype(np.uint8))
    out = np.empty((batch.R, batch.num_candidates))
    for sub in _row_blocks(batch):
        values, where = _term_values(agree0[sub], agree1[sub], ~hard[sub])
        words = _pack_samples(where)  # (r, V, 2, W): the samples of each value, unfired / fired
        phi: np.ndarray | None = None  # (r, W, C) fire patterns, built when a count depends on S
        ll = np.zeros((values.shape[0], batch.num_candidates))
        for v in range(values.shape[1]):  # ascending values: the canonical order of the sum
            unfired, fired = words[:, v, 0, :, None], words[:, v, 1, :, None]  # (r, W, 1)
            # n_v(S) = |unfired| - |unfired & F(S)| + |fired & F(S)|, an integer count
            n = np.broadcast_to(_popcount_words(unfired), ll.shape)
            if (unfired != fired).any():  # else both halves cancel (a sample with pi = 1/2)
                phi = fire_patterns(batch.payload[sub], batch.p, batch.d) if phi is None else phi
                if unfired.any():
                    n = n - _popcount_words(phi & unfired)
                if fired.any():
                    n = n + _popcount_words(phi & fired)
            ll += n * values[:, v, None]
        if hard[sub].any():
            phi = fire_patterns(batch.payload[sub], batch.p, batch.d) if phi is None else phi
            violated = (((phi ^ need[sub, :, None]) & hard_words[sub, :, None]) != 0).any(axis=1)
            ll[violated] = -np.inf
        out[sub] = ll
    _check_explained(np.isfinite(out))
    return out


def _row_blocks(batch: StepBatch, max_cells: int = 1_000_000) -> list[slice]:
    words = max(1, -(-batch.K // 64))
    cells = batch.num_candidates * (words + 2) + 2 * batch.K * 2 * batch.K
    size = max(1, max_cells // max(1, cells))
    return [slice(i, min(i + size, batch.R)) for i in range(0, batch.R, size)]


# ---------------------------------------------------------------------- exact data-only (B, D)
def exact_work(num_candidates: int, unknown: int) -> int:
    """Worst-case lookups per record of :func:`exact_completion_counts` with ``unknown`` terms."""
    left, right = (unknown + 1) // 2, unknown // 2
    return num_candidates**left + num_candidates ** (right + 1)


def max_exact_unknown(p: int, d: int, limit: int = EXACT_WORK_LIMIT) -> int:
    """The most unknown prefix terms the exact posterior handles at ``(p, d)`` within ``limit``."""
    c = comb(p, d - 1)
    u = 0
    while exact_work(c, u + 1) <= limit:
        u += 1
    return u


def check_exact(p: int, d: int, K: int, unknown: int, limit: int = EXACT_WORK_LIMIT) -> None:
    """Raise :class:`GF2ConfigError` unless the exact posterior can run with ``unknown`` terms:
    within the work ``limit``, ``K <= 64`` and ``C^unknown`` completions countable in ``int64``."""
    c = comb(p, d - 1)
    if exact_work(c, unknown) > limit:
        raise GF2ConfigError(
            f"The exact data-only posterior with {unknown} unknown prefix terms at p={p}, d={d} "
            f"needs ~{exact_work(c, unknown):.2e} lookups a record, over the limit {limit:.2e}; it "
            f"handles at most {max_exact_unknown(p, d, limit)} unknown terms here. Use the composite "
            f"likelihood (estimator B/D), more known terms, or raise limit= at your own cost."
        )
    if K > 64:
        raise GF2ConfigError(f"K={K} samples do not fit the 64-bit label vectors; use K <= 64.")
    if c**unknown >= 2**63:
        raise GF2ConfigError(
            f"The exact posterior counts completions in int64, but {unknown} unknown terms at p={p}, "
            f"d={d} have C^u = {c}^{unknown} = {float(c**unknown):.2e} >= 2^63; give it more known "
            f"terms (at most {_max_countable(c)} unknown) or use the composite likelihood."
        )


def _max_countable(c: int) -> int:
    u = 0
    while c ** (u + 1) < 2**63 and u < 63:
        u += 1
    return u


def _xor_values(terms: np.ndarray) -> np.ndarray:
    """(r, C^t): ``XOR_j terms[i, j, s_j]`` for every choice ``(s_1..s_t)``, one term at a time
    (the sequential axis); the distribution of ``XOR_j T_j`` for ``T_j`` uniform over the ``C``
    values ``terms[i, j, :]``, each choice counted once."""
    vals = np.zeros((terms.shape[0], 1), dtype=terms.dtype)
    for j in range(terms.shape[1]):
        vals = (vals[:, :, None] ^ terms[:, j, None, :]).reshape(terms.shape[0], -1)
    return vals


def _tag(rows: np.ndarray, vals: np.ndarray, K: int) -> np.ndarray:
    """``vals`` (``K``-bit) with the row index in the bits above: sortable across rows at once."""
    if K >= 8 * vals.dtype.itemsize:  # no room for a tag: blocks of one row (exact_completion_counts)
        return vals
    return vals | (rows.astype(vals.dtype) << vals.dtype.type(K))


def exact_completion_counts(
    batch: StepBatch, known: np.ndarray | None = None, limit: int = EXACT_WORK_LIMIT
) -> np.ndarray:
    """(R, C) ``int64``: for every candidate ``S``, how many of the ``C^u`` assignments of the ``u``
    unknown prefix supports reproduce the labels together with ``S`` and the known terms.

    Each unknown term ``j`` adds ``X_j = a_j AND F(S_j)`` to the K-bit label vector; candidate ``S``
    needs ``XOR_j X_j = r XOR F(S)``. The XOR distribution of half the unknown terms is tabulated
    in integer counts and the other half enumerated per candidate (meet in the middle), all rows of
    a block at once. Needs ``K <= 64`` and ``C^u < 2^63``; refuses more unknown terms than
    :func:`max_exact_unknown` allows (see :func:`check_exact`).
    """
    if known is None:
        known = np.zeros((batch.R, batch.g), dtype=bool)
    unknown_counts = set((batch.g - known.sum(axis=1)).tolist())
    if len(unknown_counts) > 1:
        raise ValueError(f"Rows know different numbers of terms {sorted(unknown_counts)}; batch by count.")
    u = unknown_counts.pop() if unknown_counts else 0
    c = batch.num_candidates
    check_exact(batch.p, batch.d, batch.K, u, limit)
    r = residuals(batch, known)
    unknown = np.flatnonzero(~known.ravel()) % max(1, batch.g)  # row-major: each row's unknowns in order
    address = pack_bits(np.swapaxes(batch.address, 1, 2).astype(np.uint8))  # (R, g) sample masks a term
    size = max(1, min(EXACT_BLOCK_CELLS // exact_work(c, u), 1 << max(0, 64 - batch.K)))
    # Keys as narrow as the labels and the row tag allow (uint32 sorts and searches faster).
    dtype = np.dtype(np.uint32 if batch.K + (size - 1).bit_length() <= 32 else np.uint64)
    out = np.empty((batch.R, c), dtype=np.int64)
    half = (u + 1) // 2
    for start in range(0, batch.R, size):
        sub = slice(start, min(start + size, batch.R))
        rows = np.arange(sub.stop - sub.start)
        phi = fire_patterns(batch.payload[sub], batch.p, batch.d)[:, 0, :].astype(dtype)  # (r, C)
        want = phi ^ pack_bits(r[sub]).astype(dtype)[:, None]  # the unknown part S needs
        a = np.take_along_axis(address[sub], unknown.reshape(batch.R, u)[sub], axis=1).astype(dtype)
        terms = phi[:, None, :] & a[:, :, None]  # (r, u, C)
        # The left half as a sorted table of (row tag, value) keys with integer multiplicities.
        table = _tag(rows[:, None], np.sort(_xor_values(terms[:, :half]), axis=1), batch.K).ravel()
        firsts = np.flatnonzero(np.concatenate([[True], table[1:] != table[:-1]]))
        keys, mult = table[firsts], np.diff(np.append(firsts, len(table)))
        # The right half enumerated: each choice asks for the left value want(S) XOR its own.
        right = _xor_values(terms[:, half:])  # (r, C^(u - half))
        queries = _tag(rows[:, None, None], want[:, None, :] ^ right[:, :, None], batch.K)  # (r, ., C)
        pos = np.searchsorted(keys, queries).clip(max=len(keys) - 1)
        out[sub] = np.where(keys[pos] == queries, mult[pos], 0).sum(axis=1)
    _check_explained(out > 0)
    return out


def exact_log_likelihood(
    batch: StepBatch, known: np.ndarray | None = None, limit: int = EXACT_WORK_LIMIT
) -> np.ndarray:
    """(R, C) exact log-likelihood of every candidate with the unknown prefix terms marginalised:
    ``log(count) - u log C`` from :func:`exact_completion_counts`, so equal counts (exact ties)
    give bit-identical values."""
    counts = exact_completion_counts(batch, known, limit)
    u = batch.g - (int(known[0].sum()) if known is not None and batch.R else 0)
    with np.errstate(divide="ignore"):
        return np.log(counts.astype(np.float64)) - u * np.log(float(batch.num_candidates))


# ---------------------------------------------------------------------- the Bayes ceiling
def bayes_ceiling(batch: StepBatch) -> dict[str, np.ndarray]:
    """γ of estimator A (prefix + data) and B (data only, composite) on each step of ``batch``.

    Any agent's success on these very samples can be read against them: A is what the samples
    and the prefix made achievable, B what the samples alone did (the paper's likelihood).
    """
    if batch.target is None:
        raise ValueError("The Bayes ceiling needs the true next terms; build the batch with a target.")
    rows = np.arange(batch.R)
    consistent = consistent_candidates(batch)
    gamma_a = consistent[rows, batch.target] / consistent.sum(axis=1)
    gamma_b = normalise(composite_log_likelihood(batch))[rows, batch.target]
    return {"A": gamma_a, "B": gamma_b}


# ---------------------------------------------------------------------- from log weights to decisions
def normalise(log_weights: np.ndarray) -> np.ndarray:
    """Row-wise probabilities from log weights (``-inf`` allowed, one finite entry per row needed)."""
    top = log_weights.max(axis=1, keepdims=True)
    w = np.exp(log_weights - top)
    return w / w.sum(axis=1, keepdims=True)


def argmax_with_ties(log_weights: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The argmax action per row, ties broken uniformly with ``rng``, and the size of each tie.

    ``rng`` draws one integer per tied row (in row order), none for rows with a single maximum.
    """
    best = log_weights == log_weights.max(axis=1, keepdims=True)
    ties = best.sum(axis=1)
    action = best.argmax(axis=1)
    tied = np.flatnonzero(ties > 1)
    if tied.size:
        pick = rng.integers(ties[tied])  # which of the maxima, 0-based
        action[tied] = (np.cumsum(best[tied], axis=1) <= pick[:, None]).sum(axis=1)
    return action, ties


def sample_actions(probabilities: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row drawn from its posterior with ``rng``."""
    cum = np.cumsum(probabilities, axis=1)
    u = rng.random((probabilities.shape[0], 1)) * cum[:, -1:]
    return np.minimum((cum <= u).sum(axis=1), probabilities.shape[1] - 1)


__all__ = [
    "EXACT_WORK_LIMIT",
    "StepBatch",
    "argmax_with_ties",
    "bayes_ceiling",
    "candidate_masks",
    "composite_log_likelihood",
    "consistent_candidates",
    "check_exact",
    "exact_completion_counts",
    "exact_log_likelihood",
    "exact_work",
    "fire_patterns",
    "intersection_candidates",
    "known_terms",
    "max_exact_unknown",
    "normalise",
    "positives",
    "prefix_contributions",
    "residuals",
    "sample_actions",
]
