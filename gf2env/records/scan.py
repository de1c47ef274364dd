"""A compiled scanner for files of the paper's records: JSON bytes to flat arrays in one pass.

:func:`scan_records` reads a JSON array of records, or JSON Lines, straight from the file's bytes
(numba) into flat arrays: each record's integers and the byte offsets of its strings; nothing is
turned into Python objects. It accepts only the plain form the records take (the known keys, each
once, in any order; non-negative integers; strings without escapes) and reports the byte offset of
anything else; the reader then falls back to the general JSON path, which either reads the file or
raises the error naming the record and field. The hex samples are decoded by :func:`decode_hex`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

# Key codes and their bits in a record's seen-mask.
_EXP, _N, _P, _D, _G, _PREFIX, _TARGET, _SAMPLES = range(8)
_REQUIRED = (1 << _N) | (1 << _P) | (1 << _D) | (1 << _G) | (1 << _PREFIX) | (1 << _TARGET) | (1 << _SAMPLES)
_MAX_DIGITS = 9  # integers above 10^9 - 1 go to the general path


@dataclass(frozen=True)
class ScannedRecords:
    """The flat arrays of :func:`scan_records` for ``R`` records.

    Per record (R,): ``n, p, d, g``; ``exp_start, exp_end`` (byte offsets; ``-1`` when absent);
    ``prefix_start`` / ``prefix_terms`` (first term and term count in ``term_start, term_len``);
    ``target_start`` / ``target_len`` (into ``ints``); ``sample_start`` / ``sample_count``. Per
    term: ``term_start, term_len`` into ``ints``. Per sample: ``x_start, x_end`` (the hex string's
    bytes) and ``y``.
    """

    n: np.ndarray
    p: np.ndarray
    d: np.ndarray
    g: np.ndarray
    exp_start: np.ndarray
    exp_end: np.ndarray
    prefix_start: np.ndarray
    prefix_terms: np.ndarray
    target_start: np.ndarray
    target_len: np.ndarray
    sample_start: np.ndarray
    sample_count: np.ndarray
    term_start: np.ndarray
    term_len: np.ndarray
    ints: np.ndarray
    x_start: np.ndarray
    x_end: np.ndarray
    y: np.ndarray

    @property
    def R(self) -> int:
        return int(self.n.shape[0])


@numba.njit(cache=True, inline="always")
def _ws(b, i):
    while i < b.size and (b[i] == 32 or b[i] == 10 or b[i] == 13 or b[i] == 9):
        i += 1
    return i


@numba.njit(cache=True, inline="always")
def _next(b, i, close):
    """After an item of a list or object: (1, offset of the next item) at ``,``, (0, offset after
    it) at the ``close`` byte, (-1, offset) at anything else."""
    i = _ws(b, i)
    if i < b.size and b[i] == 44:
        return 1, _ws(b, i + 1)
    if i < b.size and b[i] == close:
        return 0, i + 1
    return -1, i


@numba.njit(cache=True)
def _int(b, i):
    """A non-negative integer at ``i``: (value, next offset), or (-1, i) if there is none."""
    start = i
    value = 0
    while i < b.size and 48 <= b[i] <= 57:
        value = value * 10 + (b[i] - 48)
        i += 1
    if i == start or i - start > _MAX_DIGITS or (b[start] == 48 and i - start > 1):
        return -1, start
    return value, i


@numba.njit(cache=True)
def _string(b, i):
    """A string without escapes at ``i`` (its opening quote): (start, end, next), or (-1, -1, i)."""
    if i >= b.size or b[i] != 34:
        return -1, -1, i
    j = i + 1
    while j < b.size and b[j] != 34:
        if b[j] == 92 or b[j] < 32:  # a backslash or a control character
            return -1, -1, i
        j += 1
    if j >= b.size:
        return -1, -1, i
    return i + 1, j, j + 1


@numba.njit(cache=True)
def _key(b, start, end):
    """The code of a record key, or -1."""
    size = end - start
    c = b[start] if size else 0
    if size == 1:
        return _N if c == 110 else _P if c == 112 else _G if c == 103 else -1
    if size == 3 and c == 101 and b[start + 1] == 120 and b[start + 2] == 112:
        return _EXP
    if size == 5 and c == 100 and b[start + 1] == 95:  # d_max
        return _D if b[start + 2] == 109 and b[start + 3] == 97 and b[start + 4] == 120 else -1
    if size == 6 and c == 112 and b[start + 1] == 114:  # prefix
        return _PREFIX if b[start + 2] == 101 and b[start + 3] == 102 and b[start + 5] == 120 else -1
    if size == 6 and c == 116 and b[start + 1] == 97:  # target
        return _TARGET if b[start + 2] == 114 and b[start + 3] == 103 and b[start + 5] == 116 else -1
    if size == 7 and c == 115 and b[start + 1] == 97 and b[start + 6] == 115:  # samples
        return _SAMPLES if b[start + 2] == 109 and b[start + 3] == 112 and b[start + 4] == 108 else -1
    return -1


@numba.njit(cache=True)
def _int_list(b, i, ints, top):
    """``[int, ...]`` at ``i`` appended to ``ints[top:]``: (count, next), or (-1, offset of the fault)."""
    if i >= b.size or b[i] != 91:
        return -1, i
    i = _ws(b, i + 1)
    count = 0
    if i < b.size and b[i] == 93:
        return 0, i + 1
    while True:
        value, j = _int(b, i)
        if value < 0:
            return -1, i
        ints[top + count] = value
        count += 1
        more, i = _next(b, j, 93)
        if more < 0:
            return -1, i
        if not more:
            return count, i


@numba.njit(cache=True)
def _scan(b, rec, terms, ints, smp):
    """Fill the preallocated tables; returns (records, terms, ints, samples, fault offset or -1)."""
    nr = nt = ni = ns = 0
    i = _ws(b, 0)
    array = i < b.size and b[i] == 91
    if array:
        i = _ws(b, i + 1)
        if i < b.size and b[i] == 93:
            i = _ws(b, i + 1)
            return 0, 0, 0, 0, (-1 if i == b.size else i)
    while i < b.size:
        if b[i] != 123:
            return nr, nt, ni, ns, i
        seen = 0
        for col in range(rec.shape[1]):
            rec[nr, col] = -1
        i = _ws(b, i + 1)
        while True:
            ks, ke, i = _string(b, i)
            if ks < 0:
                return nr, nt, ni, ns, i
            code = _key(b, ks, ke)
            if code < 0 or seen & (1 << code):
                return nr, nt, ni, ns, ks
            seen |= 1 << code
            i = _ws(b, i)
            if i >= b.size or b[i] != 58:
                return nr, nt, ni, ns, i
            i = _ws(b, i + 1)
            if code == _EXP:
                s, e, i = _string(b, i)
                if s < 0:
                    return nr, nt, ni, ns, i
                rec[nr, 4], rec[nr, 5] = s, e
            elif code <= _G:
                value, i2 = _int(b, i)
                if value < 0:
                    return nr, nt, ni, ns, i
                rec[nr, code - 1] = value
                i = i2
            elif code == _TARGET:
                count, i2 = _int_list(b, i, ints, ni)
                if count < 0:
                    return nr, nt, ni, ns, i2
                rec[nr, 8], rec[nr, 9] = ni, count
                ni += count
                i = i2
            elif code == _PREFIX:
                if b[i] != 91:
                    return nr, nt, ni, ns, i
                rec[nr, 6] = nt
                i = _ws(b, i + 1)
                first = True
                while True:
                    if first and i < b.size and b[i] == 93:
                        i += 1
                        break
                    count, i2 = _int_list(b, i, ints, ni)
                    if count < 0:
                        return nr, nt, ni, ns, i2
                    terms[nt, 0], terms[nt, 1] = ni, count
                    nt += 1
                    ni += count
                    first = False
                    more, i = _next(b, i2, 93)
                    if more < 0:
                        return nr, nt, ni, ns, i
                    if not more:
                        break
                rec[nr, 7] = nt - rec[nr, 6]
            else:  # samples: [{"x": "...", "y": 0|1}, ...]
                if b[i] != 91:
                    return nr, nt, ni, ns, i
                rec[nr, 10] = ns
                i = _ws(b, i + 1)
                first = True
                while True:
                    if first and i < b.size and b[i] == 93:
                        i += 1
                        break
                    first = False
                    if i >= b.size or b[i] != 123:
                        return nr, nt, ni, ns, i
                    i = _ws(b, i + 1)
                    got = 0
                    smp[ns, 0] = smp[ns, 1] = smp[ns, 2] = -1
                    while True:
                        ks, ke, i = _string(b, i)
                        if ks < 0 or ke - ks != 1 or (b[ks] != 120 and b[ks] != 121):
                            return nr, nt, ni, ns, i
                        which = 1 if b[ks] == 120 else 2
                        if got & which:
                            return nr, nt, ni, ns, ks
                        got |= which
                        i = _ws(b, i)
                        if i >= b.size or b[i] != 58:
                            return nr, nt, ni, ns, i
                        i = _ws(b, i + 1)
                        if which == 1:
                            s, e, i = _string(b, i)
                            if s < 0:
                                return nr, nt, ni, ns, i
                            smp[ns, 0], smp[ns, 1] = s, e
                        else:
                            value, i2 = _int(b, i)
                            if value < 0:
                                return nr, nt, ni, ns, i
                            smp[ns, 2] = value
                            i = i2
                        more, i = _next(b, i, 125)
                        if more < 0:
                            return nr, nt, ni, ns, i
                        if not more:
                            break
                    if got != 3:
                        return nr, nt, ni, ns, i
                    ns += 1
                    more, i = _next(b, i, 93)
                    if more < 0:
                        return nr, nt, ni, ns, i
                    if not more:
                        break
                rec[nr, 11] = ns - rec[nr, 10]
            more, i = _next(b, i, 125)
            if more < 0:
                return nr, nt, ni, ns, i
            if not more:
                break
        if seen & _REQUIRED != _REQUIRED:
            return nr, nt, ni, ns, i
        nr += 1
        if array:
            more, i = _next(b, i, 93)
            if more < 0:
                return nr, nt, ni, ns, i
            if not more:
                i = _ws(b, i)
                return nr, nt, ni, ns, (-1 if i == b.size else i)
        else:
            i = _ws(b, i)
    return nr, nt, ni, ns, (i if array else -1)


def scan_records(data: bytes) -> tuple[ScannedRecords | None, int]:
    """Scan a file's bytes: (the records' flat arrays, -1), or (None, offset of the first thing the
    plain form does not cover)."""
    b = np.frombuffer(data, dtype=np.uint8)
    objects = int(np.count_nonzero(b == 123)) + 1  # '{': records and samples
    lists = int(np.count_nonzero(b == 91)) + 1  # '[': terms
    ints = int(np.count_nonzero(b == 44)) + lists + 1  # each integer is followed by ',' or ']'
    rec = np.empty((objects, 12), dtype=np.int64)
    terms = np.empty((lists, 2), dtype=np.int64)
    flat = np.empty(ints, dtype=np.int64)
    smp = np.empty((objects, 3), dtype=np.int64)
    nr, nt, ni, ns, fault = _scan(b, rec, terms, flat, smp)
    if fault >= 0:
        return None, int(fault)
    r = rec[:nr]
    return (
        ScannedRecords(
            n=r[:, 0], p=r[:, 1], d=r[:, 2], g=r[:, 3], exp_start=r[:, 4], exp_end=r[:, 5],
            prefix_start=r[:, 6], prefix_terms=r[:, 7], target_start=r[:, 8], target_len=r[:, 9],
            sample_start=r[:, 10], sample_count=r[:, 11], term_start=terms[:nt, 0], term_len=terms[:nt, 1],
            ints=flat[:ni], x_start=smp[:ns, 0], x_end=smp[:ns, 1], y=smp[:ns, 2],
        ),
        -1,
    )  # fmt: skip


_HEX = np.full(256, 255, dtype=np.uint8)  # ASCII hex digit -> its value; 255: not a hex digit
for _i, _c in enumerate("0123456789abcdef"):
    _HEX[ord(_c)] = _HEX[ord(_c.upper())] = _i


@numba.njit(cache=True)
def decode_hex(b, starts, ends, width, out):
    """Hex strings ``b[starts[s]:ends[s]]`` (``0x`` prefix optional, as :meth:`Record.from_json`
    reads them) as ``width`` bits, most significant first, into ``out[s]`` (uint8); returns the
    first bad sample's index or -1 (a non-hex digit, or more than ``width`` bits)."""
    digits = (width + 3) // 4
    extra = 4 * digits - width  # bits of the top digit above the width: must be zero
    for s in range(starts.size):
        lo, hi = starts[s], ends[s]
        if hi - lo >= 2 and b[lo] == 48 and (b[lo + 1] == 120 or b[lo + 1] == 88):
            lo += 2
        while lo < hi and b[lo] == 48:  # leading zeros
            lo += 1
        size = hi - lo
        if size > digits:
            return s
        first = 4 * (digits - size) - extra  # the column of the first digit's top bit
        for c in range(max(first, 0)):
            out[s, c] = 0
        for j in range(size):
            v = _HEX[b[lo + j]]
            if v > 15:
                return s
            col = first + 4 * j
            if col < 0:
                if v >> (4 + col):  # bits above the width
                    return s
                for q in range(-col, 4):
                    out[s, col + q] = (v >> (3 - q)) & 1
            else:
                out[s, col] = v >> 3
                out[s, col + 1] = (v >> 2) & 1
                out[s, col + 2] = (v >> 1) & 1
                out[s, col + 3] = v & 1
    return -1
