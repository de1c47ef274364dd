"""Instances of the hidden circuit and the step-g oracle (docs/design.md §1), usable without the env.

The hidden circuit is ``f(a, v) = XOR_j a_j * prod_{i in S_j} v_i`` over ``n`` ordered terms, each
support ``S_j`` a uniform ``(d-1)``-subset of the ``p`` payload indices (drawn with replacement
across terms). At depth ``g`` the oracle sets ``a_{g+1} = 1``, masks the future (``a_j = 0`` for
``j > g+1``), pads the prefix with i.i.d. fair address bits, draws the payload by the sampling mode
and labels the sample with the circuit restricted to the first ``g+1`` terms.

Indices here are 0-based: term ``j`` of the paper (1-based) is row ``j-1``; depth ``g`` asks for
row ``g``, and the active address column is ``g``.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

import numpy as np

from gf2env.errors import GF2ConfigError
from gf2env.task.combinatorics import (
    MAX_PAYLOAD_BITS,
    fires,
    pack_bits,
    supports_to_masks,
)

SAMPLING_MODES = ("adversarial", "diagnostic", "uniform")
# The largest instance one env holds: its terms and samples are arrays of p bytes each (64 MiB apiece
# at these caps and p = 64), so a mistyped size is an error, not a MemoryError deep in numpy.
MAX_TERMS = 1_000_000
MAX_SAMPLES = 1_000_000


def adversarial_weight(p: int, d: int) -> int:
    """The payload weight ``w*`` whose firing probability ``C(w, d-1)/C(p, d-1)`` is closest to 1/2.

    Ties go to the smaller weight. p=12, d=4 gives 10; p=32 gives 26; p=64 gives 51.
    """
    total = comb(p, d - 1)
    return min(range(d - 1, p + 1), key=lambda w: (abs(comb(w, d - 1) / total - 0.5), w))


def firing_probability(w: int, p: int, d: int) -> float:
    """``Pr[M_S(v) = 1]`` for a uniform support and a payload of Hamming weight ``w``."""
    return comb(w, d - 1) / comb(p, d - 1)


@dataclass(frozen=True)
class TaskConfig:
    """Validated task parameters shared by the oracle, the env and the dataset generator.

    Args:
        p: payload bits (at most 64).
        d: term degree; a term has ``d - 1`` payload indices.
        n: terms in an instance (address bits, episode length).
        K: labelled samples drawn at every step.
        sampling: ``"adversarial"`` | ``"diagnostic"`` | ``"uniform"``.
        w: payload weight of adversarial samples; ``None`` means :func:`adversarial_weight`.
    """

    p: int = 12
    d: int = 4
    n: int = 32
    K: int = 32
    sampling: str = "adversarial"
    w: int | None = None

    def __post_init__(self) -> None:
        for name in ("p", "d", "n", "K"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise GF2ConfigError(f"{name}={value!r} is not an integer; pass an int.")
            object.__setattr__(self, name, int(value))  # numpy ints become ints (Gymnasium's spaces)
        if self.d < 2:
            raise GF2ConfigError(
                f"d={self.d} is less than the minimum 2: a term needs at least one payload index "
                f"(d-1 >= 1). Pass d >= 2."
            )
        if self.p < self.d - 1:
            raise GF2ConfigError(
                f"p={self.p} is less than d-1={self.d - 1}: a term of degree d={self.d} needs "
                f"{self.d - 1} distinct payload indices. Pass p >= {self.d - 1} or a smaller d."
            )
        if self.p > MAX_PAYLOAD_BITS:
            raise GF2ConfigError(
                f"p={self.p} exceeds the maximum {MAX_PAYLOAD_BITS} payload bits (payloads are "
                f"uint64 masks). Pass p <= {MAX_PAYLOAD_BITS}."
            )
        if self.n < 1:
            raise GF2ConfigError(f"n={self.n} is less than the minimum 1; pass n >= 1 terms.")
        if self.n > MAX_TERMS:
            raise GF2ConfigError(
                f"n={self.n} is more than the maximum {MAX_TERMS}; pass n <= {MAX_TERMS} terms."
            )
        if self.K < 1:
            raise GF2ConfigError(f"K={self.K} is less than the minimum 1; pass K >= 1 samples.")
        if self.K > MAX_SAMPLES:
            raise GF2ConfigError(
                f"K={self.K} is more than the maximum {MAX_SAMPLES}; pass K <= {MAX_SAMPLES} samples."
            )
        if self.sampling not in SAMPLING_MODES:
            raise GF2ConfigError(
                f"sampling={self.sampling!r} is not a sampling mode; pass one of {SAMPLING_MODES}."
            )
        if self.w is not None:
            if self.sampling != "adversarial":
                raise GF2ConfigError(
                    f"w={self.w} only applies to adversarial sampling, not sampling="
                    f"{self.sampling!r}; drop w or pass sampling='adversarial'."
                )
            if isinstance(self.w, bool) or not isinstance(self.w, (int, np.integer)):
                raise GF2ConfigError(f"w={self.w!r} is not an integer; pass an int or None.")
            object.__setattr__(self, "w", int(self.w))
            if not self.d - 1 <= self.w <= self.p:
                raise GF2ConfigError(
                    f"w={self.w} is outside [d-1, p] = [{self.d - 1}, {self.p}]: below d-1 no term "
                    f"can fire and above p the weight does not exist. Pass w in that range or None."
                )

    @property
    def k(self) -> int:
        """Payload indices a term, ``d - 1``."""
        return self.d - 1

    @property
    def num_candidates(self) -> int:
        """``C(p, d-1)``, the size of the action space."""
        return comb(self.p, self.d - 1)

    @property
    def trivial_baseline(self) -> float:
        """``1 / C(p, d-1)``: the success probability of a history-only (uniform) guess."""
        return 1.0 / self.num_candidates

    @property
    def weight(self) -> int:
        """The adversarial payload weight in force (``w`` or ``w*``)."""
        return self.w if self.w is not None else adversarial_weight(self.p, self.d)


@dataclass(frozen=True)
class Instance:
    """One hidden circuit: ``supports[j]`` is the sorted index set of term ``j`` (0-based)."""

    p: int
    d: int
    supports: np.ndarray  # (n, d-1) int64, rows ascending
    masks: np.ndarray  # (n,) uint64

    @property
    def n(self) -> int:
        return int(self.supports.shape[0])

    def term(self, j: int) -> tuple[int, ...]:
        """Term ``j`` (0-based) as a sorted tuple of payload indices."""
        return tuple(int(i) for i in self.supports[j])

    @classmethod
    def from_supports(cls, supports: np.ndarray, p: int, d: int) -> Instance:
        supports = np.sort(np.asarray(supports, dtype=np.int64).reshape(-1, d - 1), axis=1)
        return cls(p=p, d=d, supports=supports, masks=supports_to_masks(supports))


@dataclass(frozen=True)
class Evidence:
    """The K labelled samples of one step at depth ``g``.

    ``address`` is (K, n) with column ``g`` all ones and columns ``> g`` zero; ``payload`` is
    (K, p); ``labels`` is (K,). All are ``uint8`` 0/1 arrays; ``payload_masks`` packs ``payload``.
    """

    g: int
    address: np.ndarray
    payload: np.ndarray
    labels: np.ndarray

    @property
    def K(self) -> int:
        return int(self.labels.shape[0])

    @property
    def payload_masks(self) -> np.ndarray:
        return pack_bits(self.payload)


def draw_instance(rng: np.random.Generator, n: int, p: int, d: int) -> Instance:
    """``n`` supports, each a uniform ``(d-1)``-subset of ``[0, p)``, drawn independently."""
    supports = np.argsort(rng.random((n, p)), axis=1)[:, : d - 1]
    return Instance.from_supports(supports, p, d)


def sample_uniforms(rng: np.random.Generator, config: TaskConfig, n: int) -> np.ndarray:
    """All the randomness of one step: a (K, n + p) array of uniforms in [0, 1), one draw.

    :func:`evidence_from_uniforms` turns it into samples. Drawing the same shape from one call at
    every depth is what lets the vector env reproduce N single envs exactly, env by env.
    """
    return rng.random((config.K, n + config.p))


def payloads_from_uniforms(u: np.ndarray, config: TaskConfig) -> np.ndarray:
    """Payloads (..., K, p) ``uint8`` from uniforms (..., K, p), by the sampling mode.

    adversarial: the ``w`` positions with the smallest uniforms (a uniform weight-``w`` vector);
    uniform: ``u < 1/2``; diagnostic: all-ones, then all-ones with bit ``i`` cleared for each ``i``,
    then ``u < 1/2``.
    """
    p = config.p
    if config.sampling == "adversarial":
        w = config.weight
        if w == p:
            return np.ones(u.shape, dtype=np.uint8)
        # The w smallest uniforms of a row are those at or below its w-th smallest value.
        kth = np.partition(u, w - 1, axis=-1)[..., w - 1 : w]
        return (u <= kth).astype(np.uint8)
    payload = (u < 0.5).astype(np.uint8)
    if config.sampling == "diagnostic":
        fixed = np.ones((p + 1, p), dtype=np.uint8)
        fixed[np.arange(1, p + 1), np.arange(p)] = 0
        rows = min(p + 1, u.shape[-2])
        payload[..., :rows, :] = fixed[:rows]
    return payload


def circuit_labels(address: np.ndarray, payload_masks: np.ndarray, term_masks: np.ndarray) -> np.ndarray:
    """Evaluate ``XOR_j a_j M_j(v)`` over the terms given, on every sample: (..., K) ``uint8``.

    ``address`` is (..., K, >= m), ``payload_masks`` (..., K) and ``term_masks`` (..., m).
    """
    m = term_masks.shape[-1]
    active = address[..., :m].astype(bool) & fires(payload_masks, term_masks)
    return (np.count_nonzero(active, axis=-1) & 1).astype(np.uint8)


def evidence_from_uniforms(
    u: np.ndarray, g: np.ndarray | int, term_masks: np.ndarray, config: TaskConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The step-``g`` oracle applied to uniforms ``u`` (..., K, n + p): (address, payload, labels).

    ``g`` is an int or one depth per leading index; ``term_masks`` (..., n) are the instance's
    terms. Address column ``g`` is 1, earlier columns are ``u < 1/2``, later ones 0.
    """
    p = config.p
    n = u.shape[-1] - p
    g = np.asarray(g)[..., None, None]
    cols = np.arange(n)
    address = (((u[..., :n] < 0.5) & (cols < g)) | (cols == g)).astype(np.uint8)
    payload = payloads_from_uniforms(u[..., n:], config)
    used = int(g.max()) + 1  # columns past every depth are zero: skip them
    labels = circuit_labels(address, pack_bits(payload), term_masks[..., :used])
    return address, payload, labels


def draw_evidence(rng: np.random.Generator, instance: Instance, g: int, config: TaskConfig) -> Evidence:
    """K fresh samples of the step-``g`` oracle for ``instance``."""
    if not 0 <= g < instance.n:
        raise GF2ConfigError(f"depth g={g} is outside [0, n) = [0, {instance.n}); the next term must exist.")
    u = sample_uniforms(rng, config, instance.n)
    address, payload, labels = evidence_from_uniforms(u, g, instance.masks, config)
    return Evidence(g=g, address=address, payload=payload, labels=labels)


def prefix_mask_bits(evidence: Evidence, instance: Instance) -> np.ndarray:
    """The prefix part of each label, ``XOR_{j<g} a_j M_j(v)``; ``labels ^ this`` is the residual."""
    g = evidence.g
    return circuit_labels(evidence.address, evidence.payload_masks, instance.masks[:g])
