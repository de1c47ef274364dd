"""The env's rules: the step transition."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gf2env.errors import GF2ConfigError
from gf2env.rules import STEP_MODES, step_transition


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
