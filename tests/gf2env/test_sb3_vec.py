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


def test_sb3_per_sub_env_calls_answer_each_row_of_the_batch():
    from stable_baselines3.common.vec_env import VecMonitor

    from gf2env.errors import GF2ConfigError

    kwargs = dict(p=6, d=3, n=4, K=8, step_mode="terminate")  # a wrong step ends the episode
    env = VecMonitor(SB3VecEnv(3, **kwargs))  # through a VecEnvWrapper, as training does
    single = GF2ReconEnv(**kwargs)
    env.seed(2)
    obs = env.reset()
    rng = np.random.default_rng(0)
    while len(set(obs["depth"])) < 3:  # until the sub-envs are at three different depths
        obs, *_ = env.step(rng.integers(0, 15, size=3))
    # per-sub-env state: element i of the batch, in the order of `indices`
    assert env.get_attr("depth") == obs["depth"].tolist()
    assert env.get_attr("depth", indices=[2, 0]) == [obs["depth"][2], obs["depth"][0]]
    assert len(env.get_attr("attempt", indices=1)) == 1
    assert env.get_attr("action_space", indices=[0, 1]) == [single.action_space] * 2
    assert env.get_attr("render_mode") == [None] * 3 and env.has_attr("step_mode")
    assert not env.has_attr("np_random")  # not answered from a template env
    with pytest.raises(AttributeError, match=r"get_attr\('np_random'\) is not one of"):
        env.get_attr("np_random")
    # a setting every sub-env shares: set on all of them, used by the next resets
    env.set_attr("start_depth", 2)
    assert env.get_attr("start_depth") == [2, 2, 2] and env.reset()["depth"].tolist() == [2, 2, 2]
    with pytest.raises(GF2ConfigError, match=r"share one start_depth; pass indices=None"):
        env.set_attr("start_depth", 1, indices=[0])
    with pytest.raises(GF2ConfigError, match=r"start_depth=4 is outside \[0, n\)"):
        env.set_attr("start_depth", 4)
    with pytest.raises(AttributeError, match=r"only \['start_depth'\] can be set"):
        env.set_attr("depth", 1)
    assert env.env_method("action_to_indices", 5, indices=[0, 2]) == [single.action_to_indices(5)] * 2
    assert env.env_method("indices_to_action", (0, 1)) == [single.indices_to_action((0, 1))] * 3
    with pytest.raises(AttributeError, match=r"env_method\('reset'\) is not one of"):
        env.env_method("reset", indices=[1])
