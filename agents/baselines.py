"""Two reference agents that act on GF2Recon observations.

- :class:`UniformAgent` uses nothing: its success rate is the trivial baseline ``1/C(p, d-1)``.
- :class:`IntersectionDecoder` uses the prefix and the samples (the recovery lemma of design.md §1):
  it strips the known prefix from every label, leaving the residual ``r = M_g(v)``, and intersects
  the payloads with ``r = 1``; the next support lies inside that intersection.
"""

from __future__ import annotations

from itertools import combinations
from math import comb

import numpy as np

from gf2env.combinatorics import fires, pack_bits, rank_support, supports_to_masks
from gf2env.oracle import circuit_labels


def residual_labels(observation: dict[str, np.ndarray]) -> np.ndarray:
    """``labels XOR (prefix part of each label)``: the next term's value on each sample."""
    g = int(observation["depth"])
    prefix = np.asarray(observation["prefix"])[:g].astype(np.uint8)
    term_masks = pack_bits(prefix) if g else np.zeros(0, dtype=np.uint64)
    payload_masks = pack_bits(np.asarray(observation["payload"]))
    mask = circuit_labels(np.asarray(observation["address"]), payload_masks, term_masks)
    return np.asarray(observation["labels"]).astype(np.uint8) ^ mask


class UniformAgent:
    """Picks a uniformly random candidate: the history-only estimator C as a policy."""

    def __init__(self, num_candidates: int, seed: int | None = None) -> None:
        self.num_candidates = num_candidates
        self.rng = np.random.default_rng(seed)

    def act(self, observation: dict[str, np.ndarray]) -> int:
        return int(self.rng.integers(self.num_candidates))


class IntersectionDecoder:
    """The intersection decoder: a uniform choice among supports inside the positive intersection
    that fire on no negative-residual sample (falling back to the intersection alone if none do)."""

    max_enumerated = 200_000  # beyond this many supports in the intersection, pick one at random

    def __init__(self, p: int, d: int, seed: int | None = None) -> None:
        self.p, self.k = p, d - 1
        self.rng = np.random.default_rng(seed)

    def act(self, observation: dict[str, np.ndarray]) -> int:
        residual = residual_labels(observation).astype(bool)
        payload_masks = pack_bits(np.asarray(observation["payload"]))
        full = np.uint64((1 << self.p) - 1)
        inter = np.bitwise_and.reduce(payload_masks[residual], initial=full)
        bits = [i for i in range(self.p) if (int(inter) >> i) & 1]
        if len(bits) < self.k:  # cannot happen on oracle data; keep the action well-formed
            bits = sorted(set(bits) | set(self.rng.permutation(self.p)[: self.k].tolist()))
        if len(bits) == self.k:
            return rank_support(bits, self.p)
        if comb(len(bits), self.k) > self.max_enumerated:
            chosen = self.rng.choice(bits, size=self.k, replace=False)
            return rank_support(chosen.tolist(), self.p)
        # Several supports fit inside the intersection: keep those silent on negative samples.
        cands = np.array(list(combinations(bits, self.k)), dtype=np.int64)
        silent = ~fires(payload_masks[~residual], supports_to_masks(cands)).any(axis=0)
        pool = cands[silent] if silent.any() else cands
        return rank_support(pool[self.rng.integers(len(pool))].tolist(), self.p)
