"""GF2ReconVectorEnv: bit-for-bit equal to N single envs across autoresets; Gymnasium conventions."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector.utils import batch_space

import gf2env  # noqa: F401  (registers GF2Recon-v1)
from gf2env import GF2ReconEnv, GF2ReconVectorEnv, InvalidActionError

STEP_MODES = [
    {"step_mode": "reveal"},
    {"step_mode": "terminate"},
    {"step_mode": "retry", "max_attempts": 2},
]


def single_rollout(kwargs, seed, actions):
    """What one single env does under NEXT_STEP autoreset with the given action sequence."""
    env = GF2ReconEnv(**kwargs)
    obs, info = env.reset(seed=seed)
    out = [(obs, None, False, info)]
    needs_reset = False
    for a in actions:
        if needs_reset:
            obs, info = env.reset()
            out.append((obs, 0.0, False, info))
            needs_reset = False
            continue
        obs, reward, terminated, _, info = env.step(int(a))
        out.append((obs, reward, terminated, info))
        needs_reset = terminated
    return out


STREAMS = [
    {"stream": "philox"},
    {"stream": "philox", "kernel": "numpy"},
    {"stream": "generator"},
]


@pytest.mark.parametrize("stream", STREAMS, ids=lambda s: "-".join(s.values()))
@pytest.mark.parametrize("mode", STEP_MODES, ids=lambda m: m["step_mode"])
@pytest.mark.parametrize("sampling", ["adversarial", "diagnostic", "uniform"])
def test_vector_env_equals_single_envs_across_autoresets(mode, sampling, stream):
    kwargs = dict(p=5, d=3, n=4, K=8, sampling=sampling, **mode, **stream)  # C(5,2)=10: many right answers
    N, T = 5, 30
    actions = np.random.default_rng(0).integers(0, 10, size=(T, N))
    vec = GF2ReconVectorEnv(num_envs=N, **kwargs)
    obs, info = vec.reset(seed=100)
    singles = [single_rollout(kwargs, 100 + i, actions[:, i]) for i in range(N)]
    steps = [(obs, None, None, info)]
    for t in range(T):
        obs, reward, terminated, truncated, info = vec.step(actions[t])
        assert not truncated.any()
        steps.append((obs, reward, terminated, info))
    for t, (obs, reward, terminated, info) in enumerate(steps):
        for i in range(N):
            s_obs, s_reward, s_term, s_info = singles[i][t]
            for key in s_obs:
                np.testing.assert_array_equal(obs[key][i], s_obs[key], err_msg=f"t={t} env={i} {key}")
            if t:
                assert reward[i] == s_reward and terminated[i] == s_term, (t, i)
            for key, value in s_info.items():
                assert info[f"_{key}"][i], (t, i, key)
                got = info[key][i]
                got = tuple(int(x) for x in got) if isinstance(value, tuple) else got
                assert got == value, (t, i, key)


def test_make_vec_uses_the_native_vector_env_and_batched_spaces():
    vec = gym.make_vec("GF2Recon-v1", num_envs=3, vectorization_mode="vector_entry_point", p=6, d=3)
    assert isinstance(vec.unwrapped, GF2ReconVectorEnv)
    assert vec.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    single = GF2ReconEnv(p=6, d=3)
    batched = batch_space(single.observation_space, 3)  # Gymnasium's: Box(0, 1, int8) for MultiBinary
    assert vec.observation_space.keys() == batched.keys()
    for key, space in vec.observation_space.items():
        assert space.shape == batched[key].shape and space.dtype == batched[key].dtype, key
        assert batched[key].contains(space.sample()), key
    assert vec.observation_space["depth"] == batched["depth"]
    assert vec.action_space == batch_space(single.action_space, 3)
    obs, _ = vec.reset(seed=1)
    assert vec.observation_space.contains(obs)


def test_reset_seed_int_and_list():
    a = GF2ReconVectorEnv(num_envs=3)
    b = GF2ReconVectorEnv(num_envs=3)
    obs_a, _ = a.reset(seed=7)
    obs_b, _ = b.reset(seed=[7, 8, 9])
    for key in obs_a:
        np.testing.assert_array_equal(obs_a[key], obs_b[key])
    obs_c, _ = b.reset(seed=[9, 8, 7])
    np.testing.assert_array_equal(obs_c["payload"][0], obs_a["payload"][2])
    with pytest.raises(ValueError, match="2 seeds"):
        a.reset(seed=[1, 2])


def test_bad_vector_actions_raise():
    vec = GF2ReconVectorEnv(num_envs=2)
    vec.reset(seed=0)
    with pytest.raises(InvalidActionError, match="outside Discrete"):
        vec.step(np.array([0, 220]))
    with pytest.raises(InvalidActionError, match="shape"):
        vec.step(np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="num_envs=0"):
        GF2ReconVectorEnv(num_envs=0)


def _peak_bytes(num_envs: int, copy: bool = True, **kwargs) -> tuple[float, float]:
    """Peak traced bytes of building and stepping a vector env, and its observation's bytes, per sub-env."""
    import tracemalloc

    GF2ReconVectorEnv(num_envs=2, **kwargs).reset(seed=0)  # one-time costs: kernels, support tables
    tracemalloc.start()
    vec = GF2ReconVectorEnv(num_envs=num_envs, copy=copy, **kwargs)
    obs, _ = vec.reset(seed=0)
    for _ in range(3):
        obs = vec.step(np.zeros(num_envs, dtype=np.int64))[0]  # the caller holds the last observation
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / num_envs, sum(value.nbytes for value in obs.values()) / num_envs


@pytest.mark.parametrize("kwargs", [dict(p=12, K=32, n=32), dict(p=64, K=32, n=256)], ids=str)
def test_memory_per_sub_env_is_a_small_multiple_of_its_observation(kwargs):
    small, _ = _peak_bytes(64, **kwargs)
    large, obs = _peak_bytes(512, **kwargs)
    assert large <= 1.1 * small, (small, large)  # linear in num_envs
    # The env's buffers (the observation's bytes, plus 8 + d-1 bytes a term), the copy a step
    # returns and the previous one the caller holds: about 3x. Views instead of copies: about 1.2x.
    assert large <= 3.6 * obs, large / obs
    views, _ = _peak_bytes(512, copy=False, **kwargs)
    assert views <= 1.9 * obs, views / obs
