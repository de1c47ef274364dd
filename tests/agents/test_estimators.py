"""The classical estimators A/B/C/D and the decoder, checked against brute force and each other."""

from __future__ import annotations

from itertools import combinations, product
from math import comb, log

import numpy as np
import pytest

from gf2env import read_records
from gf2env.agents import (
    DataOnly,
    Diligent,
    HistoryOnly,
    IntersectionDecoder,
    KnownTerms,
    Partial,
    make_estimator,
)
from gf2env.errors import GF2ConfigError, InconsistentEvidenceError
from gf2env.records.record import generate_records
from gf2env.task.combinatorics import fires, supports_to_masks
from gf2env.task.oracle import TaskConfig, adversarial_weight
from gf2env.task.posterior import StepBatch, candidate_masks, max_exact_unknown, normalise, residuals
from tests.paths import REFERENCE

RNG = np.random.default_rng(0)


def batch_of(config: TaskConfig, g: int, trials: int, seed: int = 0) -> StepBatch:
    return StepBatch.from_records(list(generate_records(config, [g], trials, seed)))


def brute_force_consistent(batch: StepBatch, i: int) -> list[int]:
    """Ranks of the candidates whose monomial equals the residual on every sample of step i."""
    r = residuals(batch).astype(bool)[i]
    out = []
    for rank, support in enumerate(combinations(range(batch.p), batch.d - 1)):
        m = supports_to_masks(np.array([support]))
        if (fires(batch.payload[i], m)[:, 0] == r).all():
            out.append(rank)
    return out


def brute_force_data_only(batch: StepBatch, i: int, known: list[int]) -> np.ndarray:
    """Exact posterior of step i by summing over every assignment of the unknown prefix terms."""
    cands = candidate_masks(batch.p, batch.d)
    f = fires(batch.payload[i], cands)  # (K, C)
    a = batch.address[i]
    y = batch.labels[i].astype(bool)
    known_part = np.zeros(batch.K, dtype=bool)
    for j in known:
        known_part ^= a[:, j] & fires(batch.payload[i], batch.prefix[i, j : j + 1])[:, 0]
    unknown = [j for j in range(batch.g) if j not in known]
    like = np.zeros(len(cands))
    for assignment in product(range(len(cands)), repeat=len(unknown)):
        mask = known_part.copy()
        for j, t in zip(unknown, assignment, strict=True):
            mask ^= a[:, j] & f[:, t]
        like += ((mask[:, None] ^ f) == y[:, None]).all(axis=0)
    return like / like.sum()


def brute_force_composite(batch: StepBatch, i: int) -> np.ndarray:
    """The paper's composite likelihood of step i (no known term), term by term in plain Python."""
    cands = candidate_masks(batch.p, batch.d)
    total = comb(batch.p, batch.d - 1)
    logl = np.zeros(len(cands))
    for k in range(batch.K):
        v = int(batch.payload[i, k])
        q = comb(bin(v).count("1"), batch.d - 1) / total
        m = int(batch.address[i, k].sum())
        pi = 0.5 * (1 - (1 - 2 * q) ** m)
        for c, mask in enumerate(cands):
            fire = (v & int(mask)) == int(mask)
            need_mask = int(batch.labels[i, k]) ^ int(fire)  # the mask the data asks for
            prob = pi if need_mask else 1 - pi
            logl[c] += log(prob) if prob > 0 else -np.inf
    return normalise(logl[None])[0]


@pytest.mark.parametrize("sampling", ["adversarial", "uniform", "diagnostic"])
def test_gamma_a_is_one_over_consistent_count_and_truth_is_consistent(sampling):
    config = TaskConfig(p=7, d=3, n=12, K=6, sampling=sampling)  # few samples: ties happen
    for g in (0, 3, 11):
        batch = batch_of(config, g, 15, seed=3)
        est = Diligent().evaluate(batch, RNG)
        post = Diligent().posterior(batch)
        for i in range(batch.R):
            consistent = brute_force_consistent(batch, i)
            assert batch.target[i] in consistent
            assert est.gamma[i] == pytest.approx(1 / len(consistent))
            assert np.flatnonzero(post[i]).tolist() == consistent
            assert est.tie_size[i] == len(consistent) and est.action[i] in consistent
        assert (est.gamma < 1).any() or g == 0  # the test exercises ties


def test_history_only_is_exactly_the_trivial_baseline():
    batch = batch_of(TaskConfig(), 5, 20)
    est = HistoryOnly().evaluate(batch, RNG)
    assert (est.gamma == 1 / comb(12, 3)).all() and (est.tie_size == 220).all()


def test_b_at_depth_zero_equals_a():
    batch = batch_of(TaskConfig(K=16), 0, 50)
    np.testing.assert_array_equal(DataOnly().posterior(batch), Diligent().posterior(batch))
    np.testing.assert_array_equal(DataOnly("exact").posterior(batch), Diligent().posterior(batch))


@pytest.mark.parametrize("g", [1, 4, 9])
def test_d_with_every_term_known_equals_a_and_with_none_equals_b(g):
    batch = batch_of(TaskConfig(p=9, d=3, K=12), g, 40, seed=g)
    np.testing.assert_allclose(Partial(KnownTerms(count=g)).posterior(batch), Diligent().posterior(batch))
    np.testing.assert_allclose(Partial(KnownTerms(count=0)).posterior(batch), DataOnly().posterior(batch))
    everything = Partial(KnownTerms(fraction=1.0)).posterior(batch)
    np.testing.assert_allclose(everything, Diligent().posterior(batch))


def test_composite_likelihood_matches_its_definition():
    config = TaskConfig(p=7, d=3, K=8, sampling="uniform")  # mixed payload weights, hard samples too
    batch = batch_of(config, 3, 12, seed=5)
    post = DataOnly().posterior(batch)
    for i in range(batch.R):
        np.testing.assert_allclose(post[i], brute_force_composite(batch, i), atol=1e-12)


@pytest.mark.parametrize(("g", "known"), [(1, []), (2, []), (3, []), (3, [0]), (3, [0, 1]), (2, [0, 1])])
def test_exact_data_only_posterior_equals_brute_force(g, known):
    config = TaskConfig(p=6, d=3, K=7)  # C = 15 candidates: 15^3 prefixes enumerable
    batch = batch_of(config, g, 6, seed=11 + g)
    est = Partial(KnownTerms(count=len(known)), likelihood="exact")
    post = est.posterior(batch)
    for i in range(batch.R):
        np.testing.assert_allclose(post[i], brute_force_data_only(batch, i, known), atol=1e-12)


def test_exact_refuses_past_its_limit_with_the_limit_in_the_message():
    assert max_exact_unknown(12, 4) == 3
    batch = batch_of(TaskConfig(), 4, 2)
    with pytest.raises(GF2ConfigError, match="at most 3 unknown terms"):
        DataOnly("exact").evaluate(batch, RNG)
    assert not DataOnly("exact").supports(12, 4, 32, 4) and DataOnly("exact").supports(12, 4, 32, 3)
    assert make_estimator("D-exact(g//2)").supports(12, 4, 32, 6)  # 3 known, 3 unknown


def test_exact_beats_composite_at_small_depth():
    # docs/design.md §2: the composite likelihood is well below the exact data-only posterior at g = 3.
    batch = batch_of(TaskConfig(), 3, 60, seed=2)
    exact = DataOnly("exact").evaluate(batch, RNG).gamma.mean()
    composite = DataOnly().evaluate(batch, RNG).gamma.mean()
    assert exact > composite + 0.2


def test_decoder_failure_rate_is_within_the_recovery_bound():
    p, d = 12, 4
    w = adversarial_weight(p, d)
    batch = batch_of(TaskConfig(p=p, d=d, K=12), 5, 3000, seed=4)  # few samples: failures happen
    est = IntersectionDecoder().evaluate(batch, RNG)
    failed = est.tie_size > 1  # the intersection is larger than the support
    positives = residuals(batch).astype(int).sum(axis=1)
    bound = np.minimum(1.0, (p - d + 1) * ((w - d + 1) / (p - d + 1)) ** positives)
    assert failed.mean() > 0.01  # the test has failures to bound
    stderr = np.sqrt(failed.mean() * (1 - failed.mean()) / batch.R)
    assert failed.mean() <= bound.mean() + 4 * stderr
    assert (est.gamma > 0).all()  # the truth is always inside the intersection
    a = Diligent().evaluate(batch, RNG).gamma
    assert (a >= est.gamma - 1e-12).all()  # negatives only ever help


@pytest.mark.parametrize(("p", "g"), [(32, 31), (64, 31), (12, 1023)])
def test_estimators_run_at_large_p_and_depth(p, g):
    config = TaskConfig(p=p, d=4, n=g + 1)
    batch = batch_of(config, g, 3)
    for spec in ("A", "decoder", "B", "D(g//2)", "C"):
        est = make_estimator(spec).evaluate(batch, RNG)
        assert est.gamma.shape == (3,) and np.isfinite(est.gamma).all()
    assert (Diligent().evaluate(batch, RNG).gamma >= 0.5).all()  # ties of two happen at K=32


def test_argmax_ties_and_samples_follow_the_generator():
    batch = batch_of(TaskConfig(p=7, d=3, K=4), 2, 30, seed=1)  # K=4: many ties
    a1 = Diligent().evaluate(batch, np.random.default_rng(5)).action
    a2 = Diligent().evaluate(batch, np.random.default_rng(5)).action
    a3 = Diligent().evaluate(batch, np.random.default_rng(6)).action
    np.testing.assert_array_equal(a1, a2)
    assert (a1 != a3).any()
    post = Diligent().posterior(batch)
    draws = Diligent().sample(batch, np.random.default_rng(0))
    assert (post[np.arange(batch.R), draws] > 0).all()


def test_ties_are_broken_uniformly():
    from gf2env.task.posterior import argmax_with_ties

    lw = np.full((20000, 6), -np.inf)
    lw[:, [1, 2, 4, 5]] = 0.0
    lw[:10, 3] = 1.0  # rows with a single maximum
    action, ties = argmax_with_ties(lw, np.random.default_rng(0))
    assert (action[:10] == 3).all() and (ties[:10] == 1).all() and (ties[10:] == 4).all()
    freq = np.bincount(action[10:], minlength=6) / len(action[10:])
    np.testing.assert_allclose(freq[[1, 2, 4, 5]], 0.25, atol=0.015)
    assert freq[[0, 3]].sum() == 0


def test_ties_split_accuracy():
    batch = batch_of(TaskConfig(p=7, d=3, K=4), 2, 30, seed=1)
    est = Diligent().evaluate(batch, RNG)
    np.testing.assert_allclose(est.argmax_accuracy, 1 / est.tie_size)  # A: truth always among maxima


def test_estimator_names_and_bad_specs():
    specs = ("A", "B", "B-exact", "C", "D", "D(k=3)", "D:u=0.5", "decoder")
    names = {s: make_estimator(s).name for s in specs}
    assert names == {
        "A": "A",
        "B": "B",
        "B-exact": "B-exact",
        "C": "C",
        "D": "D(g//2)",
        "D(k=3)": "D(k=3)",
        "D:u=0.5": "D(u=0.5)",
        "decoder": "decoder",
    }
    for bad in ("E", "D(k=x)", "D(z=1)"):
        with pytest.raises(GF2ConfigError, match="Unknown estimator"):
            make_estimator(bad)
    with pytest.raises(GF2ConfigError, match="fraction"):
        KnownTerms(fraction=1.5)
    with pytest.raises(GF2ConfigError, match="exactly one"):
        KnownTerms(count=1, half=True)
    assert [KnownTerms(fraction=0.5).at(g) for g in (0, 1, 3, 7)] == [0, 0, 1, 3]
    assert [KnownTerms(count=3).at(g) for g in (0, 1, 3, 7)] == [0, 1, 3, 3]


def test_inconsistent_evidence_is_reported():
    batch = batch_of(TaskConfig(), 3, 2)
    flipped = StepBatch(batch.p, batch.d, batch.prefix, batch.address, batch.payload, batch.labels ^ 1)
    with pytest.raises(InconsistentEvidenceError, match="not oracle data"):
        Diligent().evaluate(flipped, RNG)


def test_gamma_a_near_one_at_paper_defaults():
    # The paper's released data gives γ_A ≈ .998–1.000 at every depth (docs/design.md §2).
    for g in (0, 7, 31):
        assert Diligent().evaluate(batch_of(TaskConfig(), g, 200, seed=1), RNG).gamma.mean() > 0.98


def test_estimators_on_the_papers_reference_file():
    path = REFERENCE / "experiments_llm_large_adversarial.json"
    if not path.exists():
        pytest.skip(f"the paper's reference file is not at {path}")
    records = read_records(path)
    for g in sorted({r.g for r in records}):
        batch = StepBatch.from_records([r for r in records if r.g == g])
        assert Diligent().evaluate(batch, RNG).gamma.mean() > 0.99
        b = DataOnly().evaluate(batch, RNG).gamma
        assert b.mean() < 0.05  # data only is at chance this deep
