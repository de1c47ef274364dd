"""Argmax ties decided exactly: integer completion counts (B-exact, D-exact) and a composite
likelihood (B, D) whose equal multisets of terms give bit-identical log-likelihoods."""

from __future__ import annotations

import json
from collections import defaultdict
from itertools import product
from math import comb, log

import numpy as np
import pytest

from gf2env.agents import DataOnly, KnownTerms, Partial
from gf2env.errors import GF2ConfigError
from gf2env.records.record import Record, generate_record, generate_records
from gf2env.task.combinatorics import fires
from gf2env.task.oracle import TaskConfig
from gf2env.task.posterior import (
    StepBatch,
    candidate_masks,
    composite_log_likelihood,
    exact_completion_counts,
    exact_log_likelihood,
    known_terms,
)
from tests.agents.test_estimators import brute_force_composite
from tests.paths import REFERENCE

TIE_RECORD = REFERENCE / "tie-record-1162.json"


def brute_force_counts(batch: StepBatch, i: int, known: np.ndarray) -> np.ndarray:
    """Completions of step i per candidate: assignments of the unknown prefix supports that,
    XORed with the known part and the candidate's monomial, reproduce every label."""
    cands = candidate_masks(batch.p, batch.d)
    f = fires(batch.payload[i], cands)  # (K, C)
    a = batch.address[i]
    y = batch.labels[i].astype(bool)
    mask = np.zeros(batch.K, dtype=bool)
    for j in np.flatnonzero(known):
        mask ^= a[:, j] & fires(batch.payload[i], batch.prefix[i, j : j + 1])[:, 0]
    unknown = np.flatnonzero(~known).tolist()
    counts = np.zeros(len(cands), dtype=np.int64)
    for assignment in product(range(len(cands)), repeat=len(unknown)):
        m = mask.copy()
        for j, t in zip(unknown, assignment, strict=True):
            m ^= a[:, j] & f[:, t]
        counts += ((m[:, None] ^ f) == y[:, None]).all(axis=0)
    return counts


@pytest.mark.parametrize(
    ("p", "d", "K", "g", "k", "seed"),
    [
        (6, 3, 7, 0, 0, 1),
        (6, 3, 7, 1, 0, 2),
        (6, 3, 5, 2, 0, 3),
        (6, 3, 6, 3, 0, 4),
        (6, 3, 6, 3, 1, 5),
        (5, 2, 4, 4, 1, 6),
        (5, 3, 3, 3, 0, 7),
        (6, 3, 30, 2, 0, 8),
        (5, 3, 64, 2, 1, 9),
    ],
)  # fmt: skip  (K=30: 64-bit keys with row tags; K=64: untagged one-row blocks)
def test_completion_counts_equal_enumeration(p, d, K, g, k, seed):
    batch = StepBatch.from_records(list(generate_records(TaskConfig(p=p, d=d, K=K, n=g + 1), [g], 8, seed)))
    known = known_terms(g, k, batch.R, "random", np.random.default_rng(seed))
    counts = exact_completion_counts(batch, known)
    assert counts.dtype == np.int64 and counts.shape == (batch.R, comb(p, d - 1))
    for i in range(batch.R):
        np.testing.assert_array_equal(counts[i], brute_force_counts(batch, i, known[i]))
    assert (counts[np.arange(batch.R), batch.target] > 0).all()  # the truth always has a completion
    assert (counts.sum(axis=1) <= comb(p, d - 1) ** (g - k + 1)).all()


def test_exact_log_likelihood_is_the_log_of_the_count_over_c_to_the_u():
    batch = StepBatch.from_records(list(generate_records(TaskConfig(K=16), [2], 20, 3)))
    counts = exact_completion_counts(batch)
    ll = exact_log_likelihood(batch)
    finite = counts > 0
    assert (np.isfinite(ll) == finite).all()
    np.testing.assert_allclose(ll[finite], np.log(counts[finite]) - 2 * log(220), rtol=0, atol=1e-12)
    for i in range(batch.R):  # equal counts, equal bits
        for value in np.unique(counts[i][finite[i]]):
            assert len(set(ll[i][counts[i] == value].tolist())) == 1


def test_completion_counts_refuse_an_int64_overflow_with_the_value_and_the_fix():
    config = TaskConfig(p=6, d=3, K=8, n=18)  # C = 15; 17 unknown terms: 15^17 ~ 9.8e19 > 2^63
    batch = StepBatch.from_records([generate_record(config, 17, 0, seed=0)])
    with pytest.raises(GF2ConfigError, match=r"int64.*15\^17 = 9\.8\de\+19 >= 2\^63.*more known terms"):
        exact_completion_counts(batch, limit=10**12)
    with pytest.raises(GF2ConfigError, match="int64"):
        Partial(KnownTerms(count=0), likelihood="exact", exact_limit=10**12).check(6, 3, 8, 17)


def test_record_1162_has_an_exact_three_way_tie_with_the_truth_in_it():
    if not TIE_RECORD.exists():
        pytest.skip(f"the paper's tie record is not at {TIE_RECORD}")
    record = Record.from_json(json.loads(TIE_RECORD.read_text())["record"])
    batch = StepBatch.from_records([record])
    counts = exact_completion_counts(batch)[0]
    tied = np.flatnonzero(counts == counts.max())
    assert counts.max() == 3 and len(tied) == 3 and batch.target[0] in tied
    est = DataOnly("exact").evaluate(batch, np.random.default_rng(0))
    assert est.tie_size[0] == 3 and est.argmax_accuracy[0] == pytest.approx(1 / 3)
    assert est.action[0] in tied


def term_multisets(batch: StepBatch, i: int) -> list[tuple[object, ...]]:
    """Per candidate of step i (no known term), the multiset of its composite-likelihood terms as
    sorted ``(weight, active terms, mask asked for)`` keys of its soft samples, ``None`` if a hard
    sample rules it out (the term's value is a function of the key)."""
    cands = candidate_masks(batch.p, batch.d)
    out: list[tuple[object, ...]] = []
    for mask in cands.tolist():
        keys: list[tuple[int, int, int]] = []
        possible = True
        for k in range(batch.K):
            v = int(batch.payload[i, k])
            w, m = bin(v).count("1"), int(batch.address[i, k].sum())
            need = int(batch.labels[i, k]) ^ int(v & mask == mask)
            if m == 0 or comb(w, batch.d - 1) in (0, comb(batch.p, batch.d - 1)):  # hard sample
                possible &= need == (0 if m == 0 or comb(w, batch.d - 1) == 0 else m % 2)
            else:
                keys.append((w, m, need))
        out.append(tuple(sorted(keys)) if possible else (None,))
    return out


def test_composite_gives_equal_term_multisets_equal_bits():
    # Trial 775 of this grid: candidates 75 and 179 (the truth) have the same multiset of terms;
    # summed in sample order, the truth came out 8.9e-16 ahead and won alone.
    config = TaskConfig(p=12, d=4, K=32, sampling="uniform")
    batch = StepBatch.from_records([generate_record(config, 3, t, seed=1) for t in range(770, 780)])
    ll = composite_log_likelihood(batch)
    split = 0
    for i in range(batch.R):
        groups: dict[tuple[object, ...], list[int]] = defaultdict(list)
        for c, key in enumerate(term_multisets(batch, i)):
            groups[key].append(c)
        for key, members in groups.items():
            values = set(ll[i, members].tolist())
            assert len(values) == 1, (i, key, members, values)
            split += len(members) > 1 and key != (None,)
    assert split > 10  # the rows hold many equal multisets, not only the one at the maximum
    est = DataOnly().evaluate(batch.take(slice(5, 6)), np.random.default_rng(0))
    assert batch.target[5] == 179
    assert est.tie_size[0] == 2 and est.argmax_accuracy[0] == 0.5


def test_composite_over_several_sample_words_matches_its_definition():
    config = TaskConfig(p=7, d=3, K=70, sampling="uniform")  # K > 64: two words of fire patterns
    batch = StepBatch.from_records(list(generate_records(config, [2], 6, seed=9)))
    post = DataOnly().posterior(batch)
    for i in range(batch.R):
        np.testing.assert_allclose(post[i], brute_force_composite(batch, i), atol=1e-12)
