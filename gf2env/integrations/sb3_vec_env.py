"""stable-baselines3 adapter: train SB3 algorithms directly on the native vector env.

SB3's ``VecEnv`` resets a finished sub-env within the same step and hands back its final
observation as ``info["terminal_observation"]``; :class:`SB3VecEnv` does exactly that on top of
:class:`~gf2env.envs.vector.GF2ReconVectorEnv` (whose own autoreset is Gymnasium's NEXT_STEP). Needs the
``sb3`` extra.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices

from gf2env.envs.vector import GF2ReconVectorEnv


class SB3VecEnv(VecEnv):
    """``SB3VecEnv(num_envs, **GF2Recon kwargs)``, or ``SB3VecEnv.wrap(vector_env)``."""

    def __init__(self, num_envs: int = 1, *, vector_env: GF2ReconVectorEnv | None = None, **kwargs: Any):
        self.venv = vector_env if vector_env is not None else GF2ReconVectorEnv(num_envs, **kwargs)
        self.render_mode = None
        super().__init__(
            self.venv.num_envs, self.venv.single_observation_space, self.venv.single_action_space
        )
        self._actions = np.zeros(self.num_envs, dtype=np.int64)

    @classmethod
    def wrap(cls, vector_env: GF2ReconVectorEnv) -> SB3VecEnv:
        return cls(vector_env=vector_env)

    def reset(self) -> dict[str, np.ndarray]:
        seeds = None if all(s is None for s in self._seeds) else self._seeds
        options = self._options[0] if self._options and self._options[0] else None
        obs, info = self.venv.reset(seed=seeds, options=options)
        self.reset_infos = self._split_info(info)
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions, dtype=np.int64).reshape(self.num_envs)

    def step_wait(self) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, list[dict]]:
        obs, rewards, terminated, truncated, info = self.venv.step(self._actions)
        dones = terminated | truncated
        infos = self._split_info(info)
        done_idx = np.flatnonzero(dones)
        for i in done_idx:
            infos[i]["terminal_observation"] = {key: value[i].copy() for key, value in obs.items()}
            infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
        if len(done_idx):
            obs = self.venv.reset_now(done_idx)
        return obs, rewards.astype(np.float32), dones, infos

    @staticmethod
    def _split_info(info: dict[str, Any]) -> list[dict[str, Any]]:
        n = len(next(iter(info.values())))
        out: list[dict[str, Any]] = [{} for _ in range(n)]
        for key, values in info.items():
            if key.startswith("_"):
                continue
            mask = info.get(f"_{key}", np.ones(n, dtype=bool))
            for i in np.flatnonzero(mask):
                value = values[i]
                out[i][key] = tuple(int(x) for x in value) if isinstance(value, np.ndarray) else value.item()
        return out

    def close(self) -> None:
        self.venv.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        if attr_name == "render_mode":
            return [None] * len(list(self._get_indices(indices)))
        value = getattr(self.venv.single, attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        raise AttributeError(f"SB3VecEnv sub-envs share one batch; setting {attr_name!r} is not supported.")

    def env_method(self, method_name: str, *args: Any, indices: VecEnvIndices = None, **kwargs: Any) -> list:
        method = getattr(self.venv.single, method_name)
        return [method(*args, **kwargs) for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]
