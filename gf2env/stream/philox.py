"""The environment's counter-based random stream: Philox4x64-10, as ``numpy.random.Philox`` computes it.

A counter-based generator turns a ``key`` and a ``counter`` into random words with no state in
between, so any word of any sub-env at any step can be computed directly, and one vectorised call
serves a whole batch of sub-envs. :func:`philox4x64` is the 10-round Philox 4x64 block function
(Salmon et al., SC'11) of ``numpy.random.Philox``: for a key ``k`` and counter ``c``,
``philox4x64(c + 1, k)`` equals the first four words of ``Philox(key=k, counter=c).random_raw()``
(numpy increments its counter before each block), which the tests check.

Addressing (:func:`stream_words`): a sub-env's key comes from its seed (:func:`key_from_generator`);
the counter is ``(part * 2^32 + block, draw, episode, domain)``. ``domain`` separates the
instance's words from the evidence's, ``episode`` counts resets since seeding, ``draw`` counts
evidence draws within an episode, ``part`` separates a draw's address words from its payload words
and ``block`` indexes 4-word blocks within a part.
"""

from __future__ import annotations

import numpy as np

# Philox 4x64 multipliers and Weyl key increments (Random123's constants; numpy's Philox uses them).
M0 = np.uint64(0xD2E7470EE14C6C93)
M1 = np.uint64(0xCA5A826395121157)
W0 = np.uint64(0x9E3779B97F4A7C15)
W1 = np.uint64(0xBB67AE8584CAA73B)
ROUNDS = 10

DOMAIN_INSTANCE = 0  # the words of an episode's hidden circuit
DOMAIN_EVIDENCE = 1  # the words of one evidence draw

_LO32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def mulhilo(a: np.ndarray | np.uint64, b: np.ndarray | np.uint64) -> tuple[np.ndarray, np.ndarray]:
    """The high and low 64-bit halves of the 128-bit products ``a * b`` (uint64, elementwise)."""
    a = np.asarray(a, dtype=np.uint64)
    b = np.asarray(b, dtype=np.uint64)
    a_lo, a_hi = a & _LO32, a >> _S32
    b_lo, b_hi = b & _LO32, b >> _S32
    ll = a_lo * b_lo
    lh = a_lo * b_hi
    hl = a_hi * b_lo
    hh = a_hi * b_hi
    mid = (ll >> _S32) + (lh & _LO32) + (hl & _LO32)  # < 3 * 2^32: no overflow
    hi = hh + (lh >> _S32) + (hl >> _S32) + (mid >> _S32)
    return hi, a * b


def philox4x64(counter: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Philox4x64-10 blocks: ``counter`` (..., 4) and ``key`` (..., 2) uint64 -> (..., 4) uint64.

    ``counter`` and ``key`` broadcast against each other on their leading axes.
    """
    counter = np.asarray(counter, dtype=np.uint64)
    key = np.asarray(key, dtype=np.uint64)
    shape = np.broadcast_shapes(counter.shape[:-1], key.shape[:-1])
    c0, c1, c2, c3 = (np.broadcast_to(counter[..., i], shape) for i in range(4))
    k0, k1 = (np.broadcast_to(key[..., i], shape) for i in range(2))
    with np.errstate(over="ignore"):
        for r in range(ROUNDS):
            hi0, lo0 = mulhilo(M0, c0)
            hi1, lo1 = mulhilo(M1, c2)
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
            if r + 1 < ROUNDS:
                k0, k1 = k0 + W0, k1 + W1
    return np.stack([c0, c1, c2, c3], axis=-1)


def stream_words(
    keys: np.ndarray,
    episode: np.ndarray | int,
    draw: np.ndarray | int,
    domain: int,
    num_words: int,
    part: int = 0,
) -> np.ndarray:
    """The first ``num_words`` words of one part of a draw for a batch of sub-envs: (N, num_words).

    ``keys`` is (N, 2); ``episode`` and ``draw`` are (N,) (or scalars). Word ``j`` is word ``j % 4``
    of the block with counter ``(part * 2^32 + j // 4, draw, episode, domain)``: a draw has
    separate parts (address words, payload words) so each can be read without the other.
    """
    keys = np.asarray(keys, dtype=np.uint64)
    N = keys.shape[0]
    blocks = -(-num_words // 4)
    counter = np.empty((N, blocks, 4), dtype=np.uint64)
    counter[..., 0] = np.arange(blocks, dtype=np.uint64) + np.uint64(part << 32)
    counter[..., 1] = np.asarray(draw, dtype=np.uint64).reshape(-1, 1)
    counter[..., 2] = np.asarray(episode, dtype=np.uint64).reshape(-1, 1)
    counter[..., 3] = np.uint64(domain)
    return philox4x64(counter, keys[:, None, :]).reshape(N, blocks * 4)[:, :num_words]


def key_from_generator(rng: np.random.Generator) -> np.ndarray:
    """A sub-env's Philox key (2 uint64), the first draw from its seeded generator.

    The single env takes it from ``self.np_random`` after ``super().reset(seed=seed)``; the vector
    env from ``gymnasium.utils.seeding.np_random(seed + i)``: the same seeds give the same keys.
    """
    return rng.integers(0, 2**64, size=2, dtype=np.uint64, endpoint=False)


def bounded(words: np.ndarray, bound: np.ndarray | int) -> np.ndarray:
    """``floor(words * bound / 2^64)``: integers in ``[0, bound)`` from uniform 64-bit words.

    Each value has probability ``floor(2^64 / bound)`` or ``ceil(2^64 / bound)`` over ``2^64``: a
    relative deviation below ``bound / 2^64`` (< 2^-57 for ``bound <= 128``), far below any
    measurable effect, and no rejection, so a draw always takes the same words.
    """
    hi, _ = mulhilo(words, np.asarray(bound, dtype=np.uint64))
    return hi
