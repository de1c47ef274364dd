"""stable-baselines3 adapter: train SB3 algorithms directly on the native vector env.

SB3's ``VecEnv`` resets a finished sub-env within the same step and hands back its final
observation as ``info["terminal_observation"]``; :class:`SB3VecEnv` does exactly that on top of
:class:`~gf2env.envs.vector.GF2ReconVectorEnv` (whose own autoreset is Gymnasium's NEXT_STEP). Needs the
``sb3`` extra.

Sub-env ``i`` is row ``i`` of one numpy batch, not an env object, so SB3's per-sub-env calls answer
what a row has (each honours ``indices`` and returns one value per sub-env):

* ``get_attr``: the batch's per-sub-env state (``depth``, ``attempt``: element ``i``) or a setting
  every sub-env shares (:data:`SHARED_ATTRS`: spaces, ``config``, ``step_mode``, ``start_depth``, ...);
* ``set_attr``: ``start_depth`` only, on every sub-env at once (``indices`` ``None`` or all of them);
* ``env_method``: the methods that are functions of the shared settings (:data:`METHODS`).

Anything else raises ``AttributeError`` (an unknown name, as SB3's ``has_attr`` expects) or
:class:`~gf2env.errors.GF2ConfigError` (a setting for part of the batch), never answers from one
template env.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices

from gf2env.envs.vector import GF2ReconVectorEnv
from gf2env.errors import GF2ConfigError

#: Per-sub-env state: the attribute's name → the vector env's ``(num_envs,)`` array holding it.
PER_ENV_ATTRS = {"depth": "_depth", "attempt": "_attempt"}
#: Settings every sub-env shares (the single env's attributes of the same name).
SHARED_ATTRS = ("config", "observation_space", "action_space", "metadata", "spec", "render_mode",
                "step_mode", "max_attempts", "start_depth", "stream", "kernel", "bayes_ceiling")  # fmt: skip
#: Shared settings ``set_attr`` may change, on every sub-env at once.
SETTABLE_ATTRS = ("start_depth",)
#: Methods that are functions of the shared settings (``render`` is ``None``: the batch does not render).
METHODS = ("action_to_indices", "indices_to_action", "render")


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
        """Per-sub-env state (element ``i``) or a shared setting, one value per index."""
        idx = list(self._get_indices(indices))
        if attr_name in PER_ENV_ATTRS:
            values = getattr(self.venv, PER_ENV_ATTRS[attr_name])
            return [values[i].item() for i in idx]
        if attr_name in SHARED_ATTRS:
            return [getattr(self.venv.single, attr_name) for _ in idx]
        raise AttributeError(
            f"SB3VecEnv sub-envs are rows of one batch: get_attr({attr_name!r}) is not one of "
            f"{sorted(PER_ENV_ATTRS)} (per sub-env) or {list(SHARED_ATTRS)} (shared)."
        )

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set a shared setting (:data:`SETTABLE_ATTRS`) on every sub-env; the next resets use it."""
        if attr_name not in SETTABLE_ATTRS:
            raise AttributeError(
                f"SB3VecEnv sub-envs are rows of one batch: set_attr({attr_name!r}) is not supported; "
                f"only {list(SETTABLE_ATTRS)} can be set."
            )
        if sorted(self._get_indices(indices)) != list(range(self.num_envs)):
            raise GF2ConfigError(
                f"set_attr({attr_name!r}, indices={indices!r}): the {self.num_envs} sub-envs share one "
                f"{attr_name}; pass indices=None to set it on all of them."
            )
        depth = self.venv.single.start_depth_from_options({"start_depth": value})  # its checks
        self.venv.single.start_depth = self.venv.start_depth = depth

    def env_method(self, method_name: str, *args: Any, indices: VecEnvIndices = None, **kwargs: Any) -> list:
        """A method of the shared settings (:data:`METHODS`), called once per index."""
        if method_name not in METHODS:
            raise AttributeError(
                f"SB3VecEnv sub-envs are rows of one batch: env_method({method_name!r}) is not one of "
                f"{list(METHODS)}; reset, step and seed act on the whole batch (VecEnv.reset/step/seed)."
            )
        method = getattr(self.venv.single, method_name)
        return [method(*args, **kwargs) for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]
