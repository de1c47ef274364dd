"""Estimators as env policies (generator tied to the env's seed) and the Bayes ceiling in info."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import gf2env  # noqa: F401  (registers GF2Recon-v1)
from gf2env.agents import Diligent, EstimatorPolicy
from gf2env.envs.vector import GF2ReconVectorEnv
from gf2env.errors import GF2ConfigError
from gf2env.task.posterior import StepBatch


def play(env, policy, seed: int) -> tuple[list[int], list[float]]:
    obs, _ = env.reset(seed=seed)
    actions, rewards = [], []
    terminated = False
    while not terminated:
        action = policy.act(obs)
        obs, reward, terminated, _, _ = env.step(action)
        actions.append(action)
        rewards.append(reward)
    return actions, rewards


def test_policy_choices_are_a_function_of_the_env_seed():
    env = gym.make("GF2Recon-v1", p=7, d=3, n=10, K=4)  # few samples: ties to break
    policy = EstimatorPolicy("A", env)
    first = play(env, policy, seed=3)
    again = play(env, policy, seed=3)
    other = play(env, policy, seed=4)
    assert first == again and first != other


def test_policy_leaves_the_env_stream_untouched():
    env_a = gym.make("GF2Recon-v1", p=7, d=3, n=6, K=4)
    env_b = gym.make("GF2Recon-v1", p=7, d=3, n=6, K=4)
    policy = EstimatorPolicy("A", env_a, decision="sample")
    obs_a, _ = env_a.reset(seed=1)
    obs_b, _ = env_b.reset(seed=1)
    for _ in range(5):
        action = policy.act(obs_a)  # draws from a child generator of env_a's
        obs_a, *_ = env_a.step(action)
        obs_b, *_ = env_b.step(action)
        for key in obs_a:
            np.testing.assert_array_equal(obs_a[key], obs_b[key])


def test_policy_posterior_side_channel_matches_the_batch_estimator():
    env = gym.make("GF2Recon-v1", bayes_ceiling=True)
    policy = EstimatorPolicy("B", env)
    obs, _ = env.reset(seed=0)
    for _ in range(4):
        policy.act(obs)
        post = policy.last_posterior
        assert post.shape == (220,) and post.sum() == pytest.approx(1.0)
        ceiling_b = post[env.unwrapped.indices_to_action(env.unwrapped.instance.term(int(obs["depth"])))]
        obs, _, _, _, info = env.step(int(post.argmax()))
        assert info["bayes_ceiling_B"] == pytest.approx(ceiling_b)


def test_diligent_policy_is_near_perfect_and_history_only_at_chance():
    env = gym.make("GF2Recon-v1", n=16)
    a = np.mean([play(env, EstimatorPolicy("A", env), seed=s)[1] for s in range(5)])
    c = np.mean([play(env, EstimatorPolicy("C", env), seed=s)[1] for s in range(5)])
    assert a > 0.95 and c < 0.05


def test_own_generator_and_bad_decision():
    env = gym.make("GF2Recon-v1", p=7, d=3, n=6, K=4)
    rng = np.random.default_rng(0)
    assert EstimatorPolicy(Diligent(), env, rng=rng).rng is rng
    with pytest.raises(GF2ConfigError, match="decision"):
        EstimatorPolicy("A", env, decision="best")


def test_bayes_ceiling_in_info_is_estimator_a_and_b_on_the_judged_samples():
    env = gym.make("GF2Recon-v1", n=12, bayes_ceiling=True)
    obs, _ = env.reset(seed=2)
    steps = 0
    terminated = False
    while not terminated:
        batch = StepBatch.from_step(env.unwrapped.instance, env.unwrapped.evidence)
        expected_a = Diligent().evaluate(batch, np.random.default_rng(0)).gamma[0]
        obs, _, terminated, _, info = env.step(0)
        assert info["bayes_ceiling_A"] == pytest.approx(expected_a)
        assert 0.0 <= info["bayes_ceiling_B"] <= 1.0
        steps += 1
    assert steps == 12


def test_bayes_ceiling_off_by_default_and_must_be_a_bool():
    env = gym.make("GF2Recon-v1", n=4)
    env.reset(seed=0)
    assert "bayes_ceiling_A" not in env.step(0)[-1]
    with pytest.raises(GF2ConfigError, match="bayes_ceiling"):
        gym.make("GF2Recon-v1", bayes_ceiling="yes")


def test_vector_env_ceiling_equals_single_envs():
    N = 3
    vec = GF2ReconVectorEnv(num_envs=N, n=6, bayes_ceiling=True)
    singles = [gym.make("GF2Recon-v1", n=6, bayes_ceiling=True) for _ in range(N)]
    vec.reset(seed=[10 + i for i in range(N)])
    for i, env in enumerate(singles):
        env.reset(seed=10 + i)
    for step in range(8):  # runs past the end: autoreset steps carry no ceiling
        actions = np.full(N, step % 5)
        _, _, _, _, vinfo = vec.step(actions)
        for i, env in enumerate(singles):
            if not vinfo["_bayes_ceiling_A"][i]:
                env.reset()  # the vector env autoresets this sub-env now
                continue
            info = env.step(int(actions[i]))[-1]
            assert vinfo["bayes_ceiling_A"][i] == pytest.approx(info["bayes_ceiling_A"])
            assert vinfo["bayes_ceiling_B"][i] == pytest.approx(info["bayes_ceiling_B"])
