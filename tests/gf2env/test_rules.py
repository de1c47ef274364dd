"""The env's rules: the one support check (env, records and scorer alike) and the step transition."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gf2env.envs.env import GF2ReconEnv
from gf2env.errors import GF2ConfigError, InvalidActionError, RecordFormatError
from gf2env.records.record import Record, generate_record
from gf2env.task.oracle import TaskConfig
from gf2env.task.rules import STEP_MODES, Failure, SupportCheck, check_support, read_support, step_transition
from gf2env.text.answers import score_answer, validate_answer


# ---------------------------------------------------------------------- check_support
def test_check_support_accepts_and_sorts():
    assert check_support([7, 4, 5], 12, 3) == (4, 5, 7)
    assert check_support(np.array([11, 0, 5]), 12, 3) == (0, 5, 11)
    assert check_support((np.int32(2), np.uint8(1), 0), 3, 3) == (0, 1, 2)
    out = check_support([63, 0, 1], 64, 3)
    assert out == (0, 1, 63) and all(type(i) is int for i in out)
    assert check_support({7, 4, 5}, 12, 3) == (4, 5, 7)  # any iterable of indices, as before
    assert check_support(iter([7, 4, 5]), 12, 3) == (4, 5, 7)


@pytest.mark.parametrize(
    ("indices", "named"),
    [
        ([1, 2], "[1, 2]"),  # too short
        ([1, 2, 3, 4], "[1, 2, 3, 4]"),  # too long
        ([], "[]"),
        ([1, 1, 2], "[1, 1, 2]"),  # duplicate
        ([5, 2, 5], "[5, 2, 5]"),
        ([0, 1, 12], "12"),  # out of range (p = 12)
        ([-1, 0, 1], "-1"),
        ([0, 1, 99], "99"),
        ([0, 1, 1.5], "1.5"),  # not integers
        ([0, 1, "a"], "'a'"),
        ([0, 1, None], "None"),
        ([0, 1, 2.0], "2.0"),
        ([0, 1, True], "True"),
    ],
)
def test_check_support_errors_name_the_value(indices, named):
    with pytest.raises(InvalidActionError) as info:
        check_support(indices, 12, 3)
    assert named in str(info.value), str(info.value)


# ---------------------------------------------------------------------- read_support
@pytest.mark.parametrize(
    ("indices", "failure", "values"),
    [
        ([7, 4, 5], Failure.NONE, (7, 4, 5)),
        ([0, 1.5, 99, 99], Failure.NOT_INTEGER, None),  # integers first
        ([1, 1], Failure.WRONG_DEGREE, (1, 1)),  # then the count
        ([4, 4, 12], Failure.OUT_OF_RANGE, (4, 4, 12)),  # then the range, before distinctness
        ([-1, -1, 3], Failure.OUT_OF_RANGE, (-1, -1, 3)),
        ([4, 4, 7], Failure.DUPLICATE, (4, 4, 7)),
        (5, Failure.NOT_INTEGER, None),  # not a collection of indices at all
        (None, Failure.NOT_INTEGER, None),
        ("457", Failure.NOT_INTEGER, None),
        (b"\x04\x05\x07", Failure.NOT_INTEGER, None),
        (np.int64(3), Failure.NOT_INTEGER, None),
        (np.array(3), Failure.NOT_INTEGER, None),
        (np.array([[4, 5, 7]]), Failure.NOT_INTEGER, None),
    ],
)
def test_read_support_checks_in_order(indices, failure, values):
    check = read_support(indices, 12, 3)
    assert isinstance(check, SupportCheck)
    assert (check.failure, check.values) == (failure, values)
    assert (check.message == "") == (failure is Failure.NONE)


def test_read_support_offset_reads_prompt_variables():
    assert read_support([39, 36, 37], 12, 3, offset=32) == SupportCheck(Failure.NONE, (7, 4, 5), "")
    assert read_support([39, 36, 37], 12, 3, offset=32).support == (4, 5, 7)
    assert read_support([31, 36, 37], 12, 3, offset=32).failure is Failure.OUT_OF_RANGE


BAD_SUPPORTS = [
    ([1, 2], Failure.WRONG_DEGREE),
    ([1, 2, 3, 4], Failure.WRONG_DEGREE),
    ([1, 1, 2], Failure.DUPLICATE),
    ([0, 1, 12], Failure.OUT_OF_RANGE),
    ([-1, 0, 1], Failure.OUT_OF_RANGE),
    ([3, 3, 12], Failure.OUT_OF_RANGE),  # duplicate and out of range: the range is checked first
    ([5, 5, 5, 5], Failure.WRONG_DEGREE),
]


@pytest.mark.parametrize(("support", "failure"), BAD_SUPPORTS)
def test_env_records_and_scorer_report_the_same_failure(support, failure):
    p, d, n = 12, 4, 32
    check = read_support(support, p, d - 1)
    assert check.failure is failure
    # the env, on a support action and in indices_to_action
    env = GF2ReconEnv(p=p, d=d, n=n)
    env.reset(seed=0)
    with pytest.raises(InvalidActionError) as step_error:
        env.step(support)
    with pytest.raises(InvalidActionError) as convert_error:
        env.indices_to_action(support)
    assert str(step_error.value) == str(convert_error.value) == check.message
    # a record whose target is that set
    obj = generate_record(TaskConfig(p=p, d=d, n=n, K=4), 2, 0, seed=0).to_json()
    with pytest.raises(RecordFormatError, match="invalid term") as record_error:
        Record.from_json({**obj, "target": support})
    assert check.message in str(record_error.value)
    with pytest.raises(RecordFormatError, match="invalid term"):
        Record.from_json({**obj, "prefix": [obj["prefix"][0], support]})
    # the scorer, on an answer naming it as prompt variables (offset n)
    text = "\\boxed{[" + ", ".join(str(i + n) for i in support) + "]}"
    assert score_answer(text, (0, 1, 2), p, n).failure is failure
    assert validate_answer([i + n for i in support], (0, 1, 2), p, offset=n).failure is failure


@pytest.mark.parametrize("term", [5, None, "457"])
def test_records_reject_a_term_that_is_no_collection(term):
    obj = generate_record(TaskConfig(p=12, d=4, n=8, K=4), 1, 0, seed=0).to_json()
    with pytest.raises(RecordFormatError, match="invalid term"):
        Record.from_json({**obj, "target": term})


# ---------------------------------------------------------------------- step_transition
def scalar(correct, depth, attempt, mode, live=True, n=4, max_attempts=3):
    return step_transition(correct, depth, attempt, n=n, step_mode=mode, max_attempts=max_attempts, live=live)


@pytest.mark.parametrize(
    ("mode", "correct", "depth", "attempt", "expected"),
    [
        # expected: (advance, retry, finished, terminated, exhausted, depth, attempt)
        ("reveal", True, 0, 1, (True, False, False, False, False, 1, 1)),
        ("reveal", False, 0, 1, (True, False, False, False, False, 1, 1)),
        ("reveal", False, 3, 1, (True, False, True, True, False, 4, 1)),
        ("terminate", True, 1, 1, (True, False, False, False, False, 2, 1)),
        ("terminate", False, 1, 1, (False, False, False, True, False, 1, 1)),
        ("terminate", True, 3, 1, (True, False, True, True, False, 4, 1)),
        ("retry", True, 1, 2, (True, False, False, False, False, 2, 1)),
        ("retry", False, 1, 1, (False, True, False, False, False, 1, 2)),
        ("retry", False, 1, 2, (False, True, False, False, False, 1, 3)),
        ("retry", False, 1, 3, (True, False, False, False, True, 2, 1)),  # attempts ran out
        ("retry", False, 3, 3, (True, False, True, True, True, 4, 1)),
    ],
)
def test_step_transition_table(mode, correct, depth, attempt, expected):
    t = scalar(correct, depth, attempt, mode)
    assert tuple(t) == expected
    # scalars in, Python scalars out (the single env puts them in info and returns them)
    assert [type(v) for v in t] == [bool] * 5 + [int] * 2


@pytest.mark.parametrize("mode", STEP_MODES)
def test_step_transition_on_arrays_is_the_scalar_rule_elementwise(mode):
    rng = np.random.default_rng(0)
    size = 500
    correct = rng.random(size) < 0.4
    depth = rng.integers(0, 4, size)
    attempt = rng.integers(1, 4, size)
    live = rng.random(size) < 0.8
    t = scalar(correct, depth, attempt, mode, live=live)
    for field, values in zip(t._fields, t, strict=True):
        assert isinstance(values, np.ndarray) and values.shape == (size,), field
    for i in range(size):
        one = scalar(bool(correct[i]), int(depth[i]), int(attempt[i]), mode) if live[i] else None
        got = tuple(v[i].item() for v in t)
        if one is None:  # awaiting autoreset: nothing moves
            assert got == (False, False, False, False, False, int(depth[i]), int(attempt[i])), (i, got)
        else:
            assert got == tuple(one), (i, got, one)


def test_step_transition_does_not_alias_its_inputs():
    live, depth, attempt = np.ones(3, dtype=bool), np.zeros(3, dtype=np.int64), np.ones(3, dtype=np.int64)
    t = scalar(np.array([True, False, True]), depth, attempt, "reveal", live)
    t.advance[:] = False
    t.depth[:] = 7
    t.attempt[:] = 7
    assert live.all() and (depth == 0).all() and (attempt == 1).all()


def test_step_transition_rejects_unknown_mode():
    with pytest.raises(GF2ConfigError, match="bogus"):
        scalar(True, 0, 1, "bogus")


def test_step_transition_every_scalar_case_keeps_depth_and_attempt_in_range():
    for mode, correct, depth, attempt in itertools.product(STEP_MODES, (True, False), range(4), range(1, 4)):
        t = scalar(correct, depth, attempt, mode)
        assert t.advance + t.retry <= 1 and t.depth == depth + t.advance
        assert 1 <= t.attempt <= 3 and (t.attempt == 1 or t.retry or not t.advance)
        assert t.finished == (t.advance and depth == 3)
