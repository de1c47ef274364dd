"""Compiled (numba) kernels of the ``GF2Recon-v1`` oracle: the bits of :mod:`gf2env.stream.keyed_oracle`.

One call draws the instances or the evidence of many sub-envs, Philox blocks included, and writes
straight into the vector env's observation buffers. The NumPy functions of
:mod:`gf2env.stream.keyed_oracle` are the reference; the tests check these kernels equal to them bit for
bit. numba compiles on first use (a few seconds) and caches the machine code next to this file.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from gf2env.stream.keyed_oracle import SUBSET_WORD_RANGE
from gf2env.stream.philox import DOMAIN_EVIDENCE, DOMAIN_INSTANCE, ROUNDS
from gf2env.task.oracle import TaskConfig

SAMPLING_CODES = {"adversarial": 0, "uniform": 1, "diagnostic": 2}

_U = np.uint64
_M0, _M1 = _U(0xD2E7470EE14C6C93), _U(0xCA5A826395121157)
_W0, _W1 = _U(0x9E3779B97F4A7C15), _U(0xBB67AE8584CAA73B)
_LO, _S32, _ONE, _ZERO = _U(0xFFFFFFFF), _U(32), _U(1), _U(0)
_PART1 = _U(1 << 32)
_RANGE = _U(SUBSET_WORD_RANGE)
# _MASKS[j]: bits whose index has bit j clear (j a power of two), the blocks a transpose step keeps.
_MASKS = np.zeros(65, dtype=np.uint64)
for _j in (1, 2, 4, 8, 16, 32):
    _MASKS[_j] = sum(1 << b for b in range(64) if not b & _j)


@intrinsic
def _mulhi(typingctx, a, b):
    """The high 64 bits of the 128-bit product of two uint64 (one machine multiply)."""
    signature = types.uint64(types.uint64, types.uint64)

    def codegen(context, builder, sig, args):
        wide = ir.IntType(128)
        product = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        return builder.trunc(builder.lshr(product, ir.Constant(wide, 64)), ir.IntType(64))

    return signature, codegen


@numba.njit(cache=True)
def _fill_words(out, num, c0, c1, c2, c3, k0, k1):
    """The first ``num`` words of counters ``(c0 + block, c1, c2, c3)`` under key ``(k0, k1)``."""
    for b in range((num + 3) // 4):
        x0, x1, x2, x3 = c0 + _U(b), c1, c2, c3
        y0, y1 = k0, k1
        for _r in range(ROUNDS):
            p0, p1 = _M0 * x0, _M1 * x2
            h0, h1 = _mulhi(_M0, x0), _mulhi(_M1, x2)
            x0, x1, x2, x3 = h1 ^ x1 ^ y0, p1, h0 ^ x3 ^ y1, p0
            y0, y1 = y0 + _W0, y1 + _W1
        base = 4 * b
        out[base] = x0
        if base + 1 < num:
            out[base + 1] = x1
        if base + 2 < num:
            out[base + 2] = x2
        if base + 3 < num:
            out[base + 3] = x3


@numba.njit(cache=True, inline="always")
def _subset(words, start, p, size):
    """The uniform ``size``-subset of :func:`gf2env.stream.keyed_oracle.subset_masks` from
    ``words[start:]``."""
    m = min(size, p - size)
    mask = _ZERO
    word, product = start, _ONE
    x = words[start]
    for step in range(m):
        j = p - m + step
        bound = _U(j + 1)
        if product * bound > _RANGE:
            word, product = word + 1, _ONE
            x = words[word]
        product *= bound
        bit = _ONE << _mulhi(x, bound)
        x = x * bound
        mask |= (_ONE << _U(j)) if mask & bit else bit
    if m != size:
        mask ^= (_ONE << _U(p)) - _ONE if p < 64 else ~_ZERO
    return mask


@numba.njit(cache=True)
def draw_instances(keys, episode, idx, p, k, n, m, out_masks, out_supports):
    """Term masks (and sorted supports) of sub-envs ``idx`` for their episodes."""
    words = np.empty(n * m + 4, dtype=np.uint64)  # m = subset_words(p, k) a term
    dom = _U(DOMAIN_INSTANCE)
    for i in idx:
        _fill_words(words, n * m, _ZERO, _ZERO, episode[i], dom, keys[i, 0], keys[i, 1])
        for j in range(n):
            mask = _subset(words, j * m, p, k)
            out_masks[i, j] = mask
            pos = 0
            for b in range(p):
                if (mask >> _U(b)) & _ONE:
                    out_supports[i, j, pos] = b
                    pos += 1


@numba.njit(cache=True, inline="always")
def _pow2_at_least(x):
    size = 1
    while size < x:
        size <<= 1
    return size


@numba.njit(cache=True)
def _transpose(x, size):
    """Transpose the ``size x size`` bit matrix ``x[r] >> c & 1`` in place (``size`` a power of 2 <= 64)."""
    j = size >> 1
    while j:
        m = _MASKS[j]
        for r in range(size):
            if not r & j:
                t = ((x[r] >> _U(j)) ^ x[r + j]) & m
                x[r + j] ^= t
                x[r] ^= t << _U(j)
        j >>= 1


@numba.njit(cache=True)
def draw_evidence(
    keys, episode, draw, depth, supports, idx, p, K, n, mode, w, P, out_address, out_payload, out_labels
):
    """Evidence of sub-envs ``idx`` at their depths into the int8 observation buffers.

    The labels are computed bit-sliced, 64 samples a word: ``V[b]`` holds payload bit ``b`` of
    every sample, a term fires on ``AND`` of its ``V[b]``, and ``y = XOR_c (A_c & fires_c)``; bit
    the payload rows are transposed into these columns 64 x 64 at a time.
    """
    B = (K + 63) // 64
    # P = payload_words(config) a sample
    addr = np.empty(n * B + 4, dtype=np.uint64)
    pay = np.empty(K * P + 4, dtype=np.uint64)
    vs = np.empty(K, dtype=np.uint64)
    V = np.empty((p, B), dtype=np.uint64)
    Y = np.empty(B, dtype=np.uint64)
    x = np.empty(64, dtype=np.uint64)
    col = np.empty(n, dtype=np.uint64)
    full = (_ONE << _U(p)) - _ONE if p < 64 else ~_ZERO
    dom = _U(DOMAIN_EVIDENCE)
    k = supports.shape[2]
    for i in idx:
        g = depth[i]
        k0, k1, t, e = keys[i, 0], keys[i, 1], draw[i], episode[i]
        _fill_words(addr, g * B, _ZERO, t, e, dom, k0, k1)
        _fill_words(pay, K * P, _PART1, t, e, dom, k0, k1)
        for s in range(K):
            if mode == 0:
                v = _subset(pay, s * P, p, w)
            elif mode == 2 and s <= p:
                v = full if s == 0 else full ^ (_ONE << _U(s - 1))
            else:
                v = pay[s] & full
            vs[s] = v
            for b in range(p):
                out_payload[i, s, b] = np.int8((v >> _U(b)) & _ONE)
        for sb in range(B):  # V: the payload bits of 64 samples a word
            lo, rows = sb * 64, min(64, K - sb * 64)
            size = _pow2_at_least(max(rows, p))
            for r in range(size):
                x[r] = vs[lo + r] if r < rows else _ZERO
            _transpose(x, size)
            for b in range(p):
                V[b, sb] = x[b]
        for sb in range(B):
            Y[sb] = _ZERO
        for c in range(g + 1):
            for sb in range(B):
                fired = ~_ZERO
                for j in range(k):
                    fired &= V[supports[i, c, j], sb]
                Y[sb] ^= (addr[c * B + sb] & fired) if c < g else fired
        for sb in range(B):  # the address rows, read from the columns of 64 samples
            lo, rows = sb * 64, min(64, K - sb * 64)
            for c in range(n):
                col[c] = addr[c * B + sb] if c < g else (~_ZERO if c == g else _ZERO)
            for r in range(rows):
                shift = _U(r)
                for c in range(n):
                    out_address[i, lo + r, c] = np.int8((col[c] >> shift) & _ONE)
                out_labels[i, lo + r] = np.int8((Y[sb] >> shift) & _ONE)


def sampling_code(config: TaskConfig) -> int:
    """The kernels' integer code of the config's sampling mode."""
    return SAMPLING_CODES[config.sampling]
