"""Supports as ranks / index sets / uint64 masks (docs/design.md §1)."""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gf2env.errors import InvalidActionError
from gf2env.task.combinatorics import (
    MAX_PAYLOAD_BITS,
    fires,
    mask_to_indices,
    num_supports,
    pack_bits,
    rank_support,
    support_mask,
    supports_to_masks,
    unpack_bits,
    unrank_support,
)

HYPOTHESIS = settings(max_examples=200, deadline=None)


@st.composite
def supports(draw, max_p: int = MAX_PAYLOAD_BITS, max_k: int = 10):
    """(p, k, support): a sorted k-subset of range(p), k <= min(p, max_k)."""
    p = draw(st.integers(1, max_p))
    k = draw(st.integers(0, min(p, max_k)))
    chosen = draw(st.lists(st.integers(0, p - 1), min_size=k, max_size=k, unique=True))
    return p, k, tuple(sorted(chosen))


# ---------------------------------------------------------------------- ranking
@pytest.mark.parametrize("p", range(1, 10))
def test_rank_unrank_exhaustive_matches_itertools_order(p):
    for k in range(0, p + 1):
        expected = list(itertools.combinations(range(p), k))
        assert num_supports(p, k) == len(expected) == comb(p, k)
        unranked = [unrank_support(r, p, k) for r in range(len(expected))]
        assert unranked == expected, (p, k)
        for r, support in enumerate(expected):
            assert rank_support(support, p) == r, (p, k, support)
            # Any order of the same indices has the same rank.
            assert rank_support(tuple(reversed(support)), p) == r
            assert rank_support(list(support), p) == r


def test_rank_endpoints_and_python_int():
    p, k = 64, 10
    total = comb(p, k)
    assert total > 2**32
    assert unrank_support(0, p, k) == tuple(range(k))
    assert unrank_support(total - 1, p, k) == tuple(range(p - k, p))
    top = rank_support(range(p - k, p), p)
    assert top == total - 1 and isinstance(top, int)
    assert rank_support(np.array([3, 1, 2], dtype=np.int64), 12) == rank_support((1, 2, 3), 12)


@HYPOTHESIS
@given(supports())
def test_rank_then_unrank_round_trip(case):
    p, k, support = case
    r = rank_support(support, p)
    assert isinstance(r, int)
    assert 0 <= r < comb(p, k)
    assert unrank_support(r, p, k) == support


@HYPOTHESIS
@given(st.data())
def test_unrank_then_rank_round_trip_and_lex_order(data):
    p = data.draw(st.integers(1, MAX_PAYLOAD_BITS))
    k = data.draw(st.integers(0, min(p, 10)))
    total = comb(p, k)
    r = data.draw(st.integers(0, total - 1))
    support = unrank_support(r, p, k)
    assert len(support) == k
    assert list(support) == sorted(set(support))
    assert all(0 <= i < p for i in support)
    assert rank_support(support, p) == r
    if r + 1 < total:
        # Lexicographic order: consecutive ranks are increasing tuples.
        assert unrank_support(r + 1, p, k) > support


@pytest.mark.parametrize(
    ("rank", "p", "k"),
    [(-1, 12, 3), (220, 12, 3), (221, 12, 3), (10**30, 64, 10), (1, 5, 0), (comb(64, 10), 64, 10)],
)
def test_unrank_out_of_range_raises(rank, p, k):
    with pytest.raises(InvalidActionError, match=str(rank)) as info:
        unrank_support(rank, p, k)
    assert isinstance(info.value, ValueError)


# ---------------------------------------------------------------------- masks
def python_pack(row) -> int:
    return sum(int(b) << i for i, b in enumerate(row))


@pytest.mark.parametrize("width", [1, 2, 12, 31, 32, 33, 63, 64])
def test_pack_unpack_round_trip(width):
    rng = np.random.default_rng(width)
    bits = rng.integers(0, 2, size=(200, width), dtype=np.uint8)
    bits[0] = 0
    bits[1] = 1
    masks = pack_bits(bits)
    assert masks.dtype == np.uint64 and masks.shape == (200,)
    assert [int(m) for m in masks] == [python_pack(row) for row in bits.tolist()]
    back = unpack_bits(masks, width)
    assert back.dtype == np.uint8
    np.testing.assert_array_equal(back, bits)
    assert int(masks[1]) == 2**width - 1


def test_pack_bit_63_and_multi_axis():
    one_hot = np.zeros(64, dtype=np.uint8)
    one_hot[63] = 1
    assert int(pack_bits(one_hot)) == 1 << 63
    assert int(pack_bits(np.ones(64, dtype=np.uint8))) == 2**64 - 1
    np.testing.assert_array_equal(unpack_bits(np.uint64(1 << 63), 64), one_hot)
    bits = np.random.default_rng(0).integers(0, 2, size=(3, 4, 64), dtype=np.uint8)
    masks = pack_bits(bits)
    assert masks.shape == (3, 4)
    np.testing.assert_array_equal(unpack_bits(masks, 64), bits)


@HYPOTHESIS
@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=20))
def test_unpack_pack_round_trip_any_mask(values):
    masks = np.array(values, dtype=np.uint64)
    np.testing.assert_array_equal(pack_bits(unpack_bits(masks, 64)), masks)


@HYPOTHESIS
@given(supports())
def test_support_mask_and_mask_to_indices(case):
    p, k, support = case
    mask = support_mask(support)
    assert mask == sum(1 << i for i in support)
    assert mask_to_indices(mask) == support
    assert bin(mask).count("1") == k


def test_supports_to_masks_matches_python():
    rng = np.random.default_rng(1)
    rows = np.array([rng.choice(64, size=5, replace=False) for _ in range(300)])
    rows[0] = [59, 60, 61, 62, 63]
    masks = supports_to_masks(rows)
    assert masks.dtype == np.uint64 and masks.shape == (300,)
    assert [int(m) for m in masks] == [support_mask(r) for r in rows.tolist()]
    assert int(masks[0]) == sum(1 << i for i in range(59, 64))
    nested = supports_to_masks(rows.reshape(30, 10, 5))
    np.testing.assert_array_equal(nested, masks.reshape(30, 10))


@pytest.mark.parametrize(("p", "k"), [(12, 3), (64, 3), (64, 1), (20, 8)])
def test_fires_matches_pure_python(p, k):
    rng = np.random.default_rng(p * 100 + k)
    payload = rng.integers(0, 2, size=(150, p), dtype=np.uint8)
    payload[0] = 1  # everything fires on the all-ones payload
    terms = np.array([rng.choice(p, size=k, replace=False) for _ in range(40)])
    out = fires(pack_bits(payload), supports_to_masks(terms))
    assert out.shape == (150, 40) and out.dtype == bool
    expected = [[all(v[i] for i in term) for term in terms.tolist()] for v in payload.tolist()]
    assert out.tolist() == expected
    assert out[0].all()
    # Some fire and some do not, so the comparison above was not vacuous.
    assert 0 < out[1:].sum() < out[1:].size
