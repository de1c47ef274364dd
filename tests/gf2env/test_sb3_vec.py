"""The SB3 adapter reproduces SB3's own DummyVecEnv over single envs, and PPO trains on it."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv  # noqa: E402

from gf2env import GF2ReconEnv  # noqa: E402
from gf2env.integrations.sb3_vec_env import SB3VecEnv  # noqa: E402


@pytest.mark.parametrize("step_mode", ["reveal", "terminate"])
def test_sb3_adapter_equals_dummy_vec_env(step_mode):
    kwargs = dict(p=5, d=3, n=3, K=8, step_mode=step_mode)
    N = 4
    ours = SB3VecEnv(N, **kwargs)
    theirs = DummyVecEnv([lambda: GF2ReconEnv(**kwargs) for _ in range(N)])
    ours.seed(11)
    theirs.seed(11)
    obs_a, obs_b = ours.reset(), theirs.reset()
    rng = np.random.default_rng(0)
    for _ in range(12):
        for key in obs_a:
            np.testing.assert_array_equal(obs_a[key], obs_b[key].reshape(obs_a[key].shape))
        actions = rng.integers(0, 10, size=N)
        obs_a, rew_a, done_a, info_a = ours.step(actions)
        obs_b, rew_b, done_b, info_b = theirs.step(actions)
        np.testing.assert_array_equal(rew_a, rew_b)
        np.testing.assert_array_equal(done_a, done_b)
        for ia, ib in zip(info_a, info_b, strict=True):
            for key in ("depth", "correct", "attempt", "target", "action_indices"):
                assert ia[key] == ib[key], key
            if "terminal_observation" in ib:
                for key, value in ib["terminal_observation"].items():
                    np.testing.assert_array_equal(ia["terminal_observation"][key], value)


def test_ppo_trains_on_the_native_vector_env():
    env = SB3VecEnv(8, p=6, d=3, n=4, K=8)
    model = PPO("MultiInputPolicy", env, n_steps=16, batch_size=32, n_epochs=1, device="cpu", seed=0)
    model.learn(total_timesteps=256)
    obs = env.reset()
    actions, _ = model.predict(obs, deterministic=True)
    assert actions.shape == (8,) and env.action_space.contains(int(actions[0]))
