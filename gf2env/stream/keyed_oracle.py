"""The step oracle on the counter-based stream (``GF2Recon-v1``): instances and evidence from words.

This is the NumPy reference; :mod:`gf2env.stream.keyed_kernel` computes the same bits in compiled code and
is tested equal to it. Every function takes a batch of sub-envs on the leading axis.

Which words make what (all from :func:`gf2env.stream.philox.stream_words`):

- Instance (domain ``DOMAIN_INSTANCE``, draw 0, part 0): term ``j`` takes words
  ``j*m .. j*m + m - 1``, ``m = min(d-1, p-d+1)``, and is a uniform ``(d-1)``-subset
  (:func:`subset_masks`, Floyd's algorithm).
- Evidence (domain ``DOMAIN_EVIDENCE``, draw ``t``): part 0 holds the address bits bit-sliced,
  word ``c*B + b`` (``B = ceil(K/64)``) being column ``c`` of samples ``64b .. 64b + 63`` (so depth
  ``g`` reads only the first ``g*B`` words); part 1 the payloads, sample ``k`` taking words
  ``k*P .. k*P + P - 1``: ``P = min(w, p-w)`` for adversarial sampling (a uniform weight-``w``
  subset), 1 for uniform and diagnostic sampling (the word's low ``p`` bits).
"""

from __future__ import annotations

import numpy as np

from gf2env.stream.philox import DOMAIN_EVIDENCE, DOMAIN_INSTANCE, mulhilo, stream_words
from gf2env.task.combinatorics import fires
from gf2env.task.oracle import TaskConfig

_ONE = np.uint64(1)


def full_mask(p: int) -> np.uint64:
    """The ``p`` low bits set."""
    return np.uint64((1 << p) - 1)


SUBSET_WORD_RANGE = 2**32  # the most combined outcomes one word serves (bias <= 2^32 / 2^64)


def subset_steps(p: int, size: int) -> int:
    """Steps of Floyd's algorithm a ``size``-subset of ``[0, p)`` takes: ``min(size, p - size)``."""
    return min(size, p - size)


def subset_plan(p: int, size: int) -> list[int]:
    """The word each Floyd step reads: consecutive steps share a word while the product of their
    ranges stays within :data:`SUBSET_WORD_RANGE`."""
    m = subset_steps(p, size)
    plan, word, product = [], 0, 1
    for step in range(m):
        bound = p - m + step + 1
        if product * bound > SUBSET_WORD_RANGE:
            word, product = word + 1, 1
        product *= bound
        plan.append(word)
    return plan


def subset_words(p: int, size: int) -> int:
    """Words a uniform ``size``-subset of ``[0, p)`` takes (:func:`subset_plan`)."""
    plan = subset_plan(p, size)
    return plan[-1] + 1 if plan else 0


def subset_masks(words: np.ndarray, p: int, size: int) -> np.ndarray:
    """Uniform ``size``-subsets of ``[0, p)`` as uint64 masks from words (..., subset_words(p, size)).

    Floyd's algorithm in ``m = subset_steps(p, size)`` steps: for ``j = p-m .. p-1`` take ``t``
    uniform in ``[0, j]`` and add ``t``, or ``j`` if ``t`` is already in; that is a uniform
    ``m``-subset, the subset itself when ``m = size``, its complement when ``m = p - size``. Step
    ``t`` is the high word of ``x * (j + 1)``, ``x`` the step's word (:func:`subset_plan`) or, for
    later steps on the same word, the low word of the previous product: one word serves outcomes
    up to :data:`SUBSET_WORD_RANGE` with a relative bias below ``2^32 / 2^64``.
    """
    m = subset_steps(p, size)
    plan = subset_plan(p, size)
    mask = np.zeros(words.shape[:-1], dtype=np.uint64)
    x = mask
    for step in range(m):
        j = p - m + step
        if step == 0 or plan[step] != plan[step - 1]:
            x = words[..., plan[step]]
        t, x = mulhilo(x, np.uint64(j + 1))
        bit = _ONE << t
        taken = (mask & bit) != 0
        mask |= np.where(taken, _ONE << np.uint64(j), bit)
    return mask if m == size else mask ^ full_mask(p)


def instance_words(config: TaskConfig) -> int:
    """Words an instance takes."""
    return config.n * subset_words(config.p, config.k)


def instance_masks(keys: np.ndarray, episode: np.ndarray, config: TaskConfig) -> np.ndarray:
    """The hidden circuits of a batch of sub-envs: (N, n) uint64 term masks."""
    c = config
    m = subset_words(c.p, c.k)
    words = stream_words(keys, episode, 0, DOMAIN_INSTANCE, instance_words(c))
    return subset_masks(words.reshape(len(keys), c.n, m), c.p, c.k)


def payload_words(config: TaskConfig) -> int:
    """Words one sample's payload takes."""
    return subset_words(config.p, config.weight) if config.sampling == "adversarial" else 1


def payload_masks_from_words(words: np.ndarray, config: TaskConfig) -> np.ndarray:
    """Payload masks (N, K) from the payload part's words (N, K * payload_words)."""
    c = config
    N = words.shape[0]
    if c.sampling == "adversarial":
        return subset_masks(words.reshape(N, c.K, payload_words(c)), c.p, c.weight)
    masks = words.reshape(N, c.K) & full_mask(c.p)
    if c.sampling == "diagnostic":
        rows = min(c.p + 1, c.K)
        fixed = np.full(c.p + 1, full_mask(c.p), dtype=np.uint64)
        fixed[1:] ^= _ONE << np.arange(c.p, dtype=np.uint64)
        masks[:, :rows] = fixed[:rows]
    return masks


def address_words(config: TaskConfig, g: int) -> int:
    """Words the random address columns ``0 .. g-1`` take: ``g * ceil(K / 64)``."""
    return g * -(-config.K // 64)


def address_bits_from_words(words: np.ndarray, g: np.ndarray, config: TaskConfig) -> np.ndarray:
    """Address bits (N, K, n) uint8: columns ``< g`` from the words (N, >= address_words(max g)),
    column ``g`` one, later columns zero. Word ``c*B + s//64`` (``B = ceil(K/64)``) holds column
    ``c`` of samples ``64*(s//64) ..``, sample ``s`` at bit ``s % 64``."""
    c = config
    N = words.shape[0]
    B = -(-c.K // 64)
    g = np.asarray(g, dtype=np.int64).reshape(N)
    used = words.shape[1] // B
    samples = np.arange(c.K)
    cols = np.arange(c.n)
    bits = np.zeros((N, c.K, c.n), dtype=np.uint64)
    if used:
        index = np.arange(used)[None, :] * B + (samples // 64)[:, None]  # (K, used)
        shift = (samples % 64).astype(np.uint64)[:, None]
        bits[..., :used] = (words[:, index] >> shift) & _ONE
    gg = g[:, None, None]
    return (((bits == 1) & (cols < gg)) | (cols == gg)).astype(np.uint8)


def labels_from_bits(address: np.ndarray, payload_masks: np.ndarray, term_masks: np.ndarray) -> np.ndarray:
    """``y = XOR_j a_j M_j(v)`` (N, K) uint8 on address bits (N, K, n) and uint64 masks."""
    active = address.astype(bool) & fires(payload_masks, term_masks)
    return (np.count_nonzero(active, axis=-1) & 1).astype(np.uint8)


def evidence(
    keys: np.ndarray,
    episode: np.ndarray,
    draw: np.ndarray,
    g: np.ndarray,
    term_masks: np.ndarray,
    config: TaskConfig,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The step-``g`` oracle for a batch of sub-envs: (address (N, K, n), payload masks (N, K),
    labels (N, K)), from words ``(keys, episode, draw)``."""
    c = config
    g = np.asarray(g, dtype=np.int64)
    top = int(g.max()) if g.size else 0
    addr_words = stream_words(keys, episode, draw, DOMAIN_EVIDENCE, max(address_words(c, top), 0), part=0)
    address = address_bits_from_words(addr_words, g, c)
    pay_words = stream_words(keys, episode, draw, DOMAIN_EVIDENCE, c.K * payload_words(c), part=1)
    payload = payload_masks_from_words(pay_words, c)
    labels = labels_from_bits(address[..., : top + 1], payload, term_masks[..., : top + 1])
    return address, payload, labels
