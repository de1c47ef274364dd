"""GF2Recon-v1: API conformance, step modes, determinism, bad input, rendering."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import gf2env
from gf2env import GF2ConfigError, GF2ReconEnv, InvalidActionError
from gf2env.task.oracle import circuit_labels


def test_registered_on_import_and_by_module_prefix():
    env = gym.make("GF2Recon-v1")
    assert isinstance(env.unwrapped, GF2ReconEnv)
    env2 = gym.make("gf2env:GF2Recon-v1", p=6, d=3)
    assert env2.action_space.n == 15


@pytest.mark.parametrize("sampling", ["adversarial", "diagnostic", "uniform"])
def test_gymnasium_check_env(sampling):
    check_env(GF2ReconEnv(sampling=sampling), skip_render_check=True)


def test_sb3_check_env():
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    sb3_checker.check_env(GF2ReconEnv(), warn=True)


def test_default_spaces_are_the_papers():
    env = GF2ReconEnv()
    assert env.action_space.n == 220
    space = env.observation_space
    assert space["prefix"].shape == (32, 12)
    assert space["depth"].n == 33
    assert space["address"].shape == (32, 32)
    assert space["payload"].shape == (32, 12)
    assert space["labels"].shape == (32,)


def rollout(env, seed, actions_seed=0):
    rng = np.random.default_rng(actions_seed)
    obs, _ = env.reset(seed=seed)
    trace = [obs]
    terminated = False
    while not terminated:
        obs, reward, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        trace.append((obs, reward, terminated, truncated, info))
    return trace


def test_same_seed_same_rollout_bit_for_bit():
    a = rollout(GF2ReconEnv(n=8), seed=123)
    b = rollout(GF2ReconEnv(n=8), seed=123)
    c = rollout(GF2ReconEnv(n=8), seed=124)
    assert len(a) == len(b)
    for x, y in zip(a[1:], b[1:], strict=True):
        for key in x[0]:
            np.testing.assert_array_equal(x[0][key], y[0][key])
        assert x[1:4] == y[1:4] and x[4] == y[4]
    np.testing.assert_array_equal(a[0]["payload"], b[0]["payload"])
    assert not np.array_equal(a[0]["payload"], c[0]["payload"])


def test_reveal_mode_measures_every_depth_and_observation_is_consistent():
    env = GF2ReconEnv(n=16)
    obs, info = env.reset(seed=0)
    assert info["depth"] == 0 and info["trivial_baseline"] == pytest.approx(1 / 220)
    for g in range(16):
        assert int(obs["depth"]) == g
        inst = env.instance
        # Rows of the prefix < g are the true supports; rows >= g are blank (no answer leaks).
        for j in range(16):
            expected = np.zeros(12, dtype=np.int8)
            if j < g:
                expected[list(inst.term(j))] = 1
            np.testing.assert_array_equal(obs["prefix"][j], expected)
        # The labels are the circuit's first g+1 terms on the samples shown.
        payload_masks = gf2env.task.combinatorics.pack_bits(obs["payload"])
        labels = circuit_labels(obs["address"].astype(np.uint8), payload_masks, inst.masks[: g + 1])
        np.testing.assert_array_equal(labels, obs["labels"])
        obs, reward, terminated, truncated, info = env.step(0)
        assert info["depth"] == g and info["attempt"] == 1
        assert info["correct"] == (info["target"] == (0, 1, 2)) and reward == float(info["correct"])
        assert terminated == (g == 15) and not truncated
    assert int(obs["depth"]) == 16 and obs["prefix"].sum() == 16 * 3 and obs["labels"].sum() == 0
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


def test_correct_answers_score_one_everywhere():
    env = GF2ReconEnv(n=8, step_mode="terminate")
    env.reset(seed=5)
    total = 0.0
    for _ in range(8):
        target = env.instance.term(env.depth)
        _, reward, terminated, _, info = env.step(list(target[::-1]))
        total += reward
    assert total == 8 and terminated and info["correct"]


def test_terminate_mode_ends_at_first_wrong_step():
    env = GF2ReconEnv(n=8, step_mode="terminate")
    env.reset(seed=1)
    env.step(env.indices_to_action(env.instance.term(0)))
    target = env.instance.term(1)
    wrong = next(a for a in range(220) if env.action_to_indices(a) != target)
    obs, reward, terminated, _, info = env.step(wrong)
    assert reward == 0.0 and terminated and not info["correct"] and info["depth"] == 1
    assert obs["prefix"].sum() == 3  # the wrong step did not stand, nor was the truth added


def test_retry_mode_reoffers_depth_with_fresh_evidence_until_attempts_run_out():
    env = GF2ReconEnv(n=4, step_mode="retry", max_attempts=3)
    obs, _ = env.reset(seed=2)
    target = env.instance.term(0)
    wrong = next(a for a in range(220) if env.action_to_indices(a) != target)
    seen = [obs["payload"]]
    for attempt in (1, 2):
        obs, reward, terminated, _, info = env.step(wrong)
        assert info["attempt"] == attempt and not info["exhausted"] and int(obs["depth"]) == 0
        seen.append(obs["payload"])
    assert not np.array_equal(seen[0], seen[1])
    obs, _, _, _, info = env.step(wrong)
    assert info["attempt"] == 3 and info["exhausted"] and int(obs["depth"]) == 1
    obs, reward, _, _, info = env.step(env.instance.term(1))
    assert reward == 1.0 and info["attempt"] == 1 and int(obs["depth"]) == 2


def test_start_depth_kwarg_and_reset_option():
    env = GF2ReconEnv(n=10, start_depth=4)
    obs, info = env.reset(seed=0)
    assert info["depth"] == 4 and int(obs["depth"]) == 4 and obs["prefix"][:4].sum() == 12
    obs, info = env.reset(seed=0, options={"start_depth": 9})
    assert int(obs["depth"]) == 9 and obs["address"][:, 9].all()
    _, _, terminated, _, _ = env.step(0)
    assert terminated
    with pytest.raises(GF2ConfigError, match="start_depth=10"):
        env.reset(options={"start_depth": 10})
    with pytest.raises(GF2ConfigError, match="unknown"):
        env.reset(options={"depth": 1})


def test_action_mapping_round_trip_and_index_set_actions():
    env = GF2ReconEnv(p=7, d=4)
    for a in range(env.action_space.n):
        assert env.indices_to_action(env.action_to_indices(a)) == a
    assert env.action_to_indices(0) == (0, 1, 2)
    assert env.indices_to_action((6, 4, 5)) == env.action_space.n - 1
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.array([3, 1, 2]))
    assert info["action_indices"] == (1, 2, 3)


@pytest.mark.parametrize(
    "action, match",
    [
        (220, "outside Discrete"),
        (-1, "outside Discrete"),
        (1.0, "neither an integer"),
        ("3", "neither an integer"),
        (True, "neither an integer"),
        ([1, 2], "has 2 indices"),
        ([1, 2, 2], "repeats"),
        ([1, 2, 12], "outside the payload range"),
        ([1, 2, 3.0], "not an integer"),
    ],
)
def test_bad_actions_raise_clear_errors(action, match):
    env = GF2ReconEnv()
    env.reset(seed=0)
    with pytest.raises(InvalidActionError, match=match):
        env.step(action)
    assert env.depth == 0  # nothing was consumed


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"p": 2, "d": 4}, "p=2"),
        ({"K": 0}, "K=0"),
        ({"n": 0}, "n=0"),
        ({"w": 2}, "w=2"),
        ({"w": 13}, "w=13"),
        ({"sampling": "uniform", "w": 10}, "w=10"),
        ({"sampling": "random"}, "random"),
        ({"p": 65}, "p=65"),
        ({"step_mode": "undo"}, "undo"),
        ({"max_attempts": 3}, "max_attempts=3"),
        ({"step_mode": "retry", "max_attempts": 0}, "max_attempts=0"),
        ({"start_depth": 32}, "start_depth=32"),
        ({"render_mode": "human"}, "human"),
    ],
)
def test_bad_kwargs_raise_value_errors_naming_the_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GF2ReconEnv(**kwargs)


def test_large_sizes_work():
    env = GF2ReconEnv(p=64, d=4, n=1024, K=32, start_depth=1000)
    obs, _ = env.reset(seed=0)
    assert obs["address"].shape == (32, 1024) and env.action_space.n == 41664
    for _ in range(5):
        g = int(obs["depth"])
        payload_masks = gf2env.task.combinatorics.pack_bits(obs["payload"])
        labels = circuit_labels(obs["address"].astype(np.uint8), payload_masks, env.instance.masks[: g + 1])
        np.testing.assert_array_equal(labels, obs["labels"])
        assert (obs["payload"].sum(axis=1) == 51).all()
        obs, reward, *_ = env.step(env.instance.term(g))
        assert reward == 1.0


def test_ansi_render_is_the_prompt_for_the_current_step():
    env = GF2ReconEnv(n=8, render_mode="ansi")
    env.reset(seed=0)
    env.step(0)
    text = env.render()
    term = env.instance.term(0)
    assert "* $M_{1} = x_{0} \\land " + " \\land ".join(f"x_{{{8 + i}}}" for i in term) + "$" in text
    assert "form the unknown monomial $M_{2}$" in text and "\\boxed[" in text  # the paper's prompt
    assert sum(line.startswith("| ") and line[2].isdigit() for line in text.splitlines()) == 32
    assert str(list(env.instance.term(1))) not in text.split("**Observations")[0]
