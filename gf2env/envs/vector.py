"""GF2ReconVectorEnv: N GF2Recon environments stepped as one numpy batch.

The maths is the single env's on a leading batch axis, and so is the random stream
(:mod:`gf2env.stream.batch`): sub-env ``i`` is seeded as Gymnasium's ``SyncVectorEnv`` seeds its
sub-envs (``seed + i``), so with the same seeds the batch reproduces N single envs exactly, across
autoresets. On ``GF2Recon-v1``'s counter-based stream one compiled call draws every sub-env's
evidence; on ``GF2Recon-v1``'s generator stream each sub-env draws its uniforms in turn.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.error import ClosedEnvironmentError
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from gf2env.envs.env import GF2ReconEnv
from gf2env.errors import GF2ConfigError, InvalidActionError, ResetNeededError
from gf2env.records.record import check_seed
from gf2env.stream.batch import Buffers, make_stream
from gf2env.task.combinatorics import (
    MAX_SUPPORT_TABLE,
    all_supports,
    pack_bits,
    rank_support,
    supports_to_masks,
    unrank_support,
)
from gf2env.task.posterior import StepBatch, bayes_ceiling
from gf2env.task.rules import step_transition


def batch_observation_space(space: spaces.Dict, num_envs: int) -> spaces.Dict:
    """The batched observation space: ``MultiBinary`` parts stay ``MultiBinary`` with a leading
    ``num_envs`` axis (the same set as Gymnasium's ``batch_space`` ``Box(0, 1, int8)``, without its
    four bound arrays of the batch's size), the depth a ``MultiDiscrete``."""
    parts = {
        key: spaces.MultiBinary((num_envs, *sub.shape))
        if isinstance(sub, spaces.MultiBinary)
        else batch_space(sub, num_envs)
        for key, sub in space.spaces.items()
    }
    return spaces.Dict(parts)


class GF2ReconVectorEnv(VectorEnv):
    """``num_envs`` copies of :class:`~gf2env.envs.env.GF2ReconEnv` (same kwargs), batched in numpy.

    Autoreset is ``NEXT_STEP``: the step after a sub-env terminates resets it (its action is
    ignored) and returns the reset observation with reward 0. Integer actions only, shape
    ``(num_envs,)``. ``info`` carries the single env's keys as arrays with ``_key`` masks;
    ``target`` and ``action_indices`` are ``(num_envs, d-1)`` integer arrays.

    Besides the single env's kwargs (``stream`` and ``kernel`` included): ``copy=True`` (default)
    returns fresh arrays; ``copy=False`` returns views of the env's own buffers, which the next
    ``step`` or ``reset`` overwrites in place (copy what you keep; Gymnasium's ``VectorEnv``
    allows this, as its own vector envs' ``copy`` argument does).
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(self, num_envs: int = 1, copy: bool = True, **kwargs: Any) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise GF2ConfigError(f"num_envs={num_envs!r} is less than the minimum 1; pass an int >= 1.")
        if kwargs.get("render_mode") is not None:
            raise GF2ConfigError("GF2ReconVectorEnv does not render; drop render_mode.")
        if not isinstance(copy, (bool, np.bool_)):
            raise GF2ConfigError(f"copy={copy!r} is not a bool; pass True or False.")
        self.copy = bool(copy)
        self.single = GF2ReconEnv(**kwargs)  # validates the kwargs, holds the spaces
        self.num_envs = int(num_envs)
        self.config = c = self.single.config
        self.single_observation_space = self.single.observation_space
        self.single_action_space = self.single.action_space
        assert isinstance(self.single.observation_space, spaces.Dict)
        self.observation_space = batch_observation_space(self.single.observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.step_mode, self.max_attempts = self.single.step_mode, self.single.max_attempts
        self.start_depth = self.single.start_depth
        N = self.num_envs
        # Tabulated supports decode a batch of actions at once; beyond the table, one by one.
        self._support_table = all_supports(c.p, c.k) if c.num_candidates <= MAX_SUPPORT_TABLE else None
        self.stream = make_stream(self.single.stream, c, N, self.single.kernel)
        self._buf = Buffers(c, N)
        self._supports, self._masks = self._buf.supports, self._buf.masks
        self._address, self._payload, self._labels = self._buf.address, self._buf.payload, self._buf.labels
        self._prefix = np.zeros((N, c.n, c.p), dtype=np.int8)
        self._seeded = False
        self._depth = np.zeros(N, dtype=np.int64)
        self._attempt = np.ones(N, dtype=np.int64)
        self._needs_reset = np.zeros(N, dtype=bool)

    # ----------------------------------------------------------------- helpers
    def _check_open(self) -> None:
        if self.closed:
            raise ClosedEnvironmentError("this GF2ReconVectorEnv is closed; make a new one.")

    def _reset_envs(self, idx: np.ndarray, seeds: list[int | None] | None, start: int) -> None:
        if seeds is None and not self._seeded:
            seeds = [None] * len(idx)  # the first reset seeds every sub-env, from entropy if need be
        rngs: list[np.random.Generator | None] = (
            [None] * len(idx) if seeds is None else [seeding.np_random(s)[0] for s in seeds]
        )
        self.stream.begin(idx, rngs)
        self.stream.instances(idx, self._buf)
        self._prefix[idx] = 0
        for j in range(start):  # reveal the first `start` terms
            self._prefix[idx[:, None], j, self._supports[idx, j]] = 1
        self._depth[idx] = start
        self._attempt[idx] = 1
        self._draw(idx)

    def _draw(self, idx: np.ndarray) -> None:
        """Fresh evidence for the sub-envs ``idx`` at their current depths (all < n)."""
        if len(idx) == 0:
            return
        self.stream.evidence(idx, self._depth, self._buf)

    def _bayes_ceiling(self, idx: np.ndarray, g: np.ndarray) -> dict[str, np.ndarray]:
        """Estimators A's and B's γ on the current evidence of sub-envs ``idx``, batched by depth."""
        c, N = self.config, self.num_envs
        out = {"A": np.zeros(N), "B": np.zeros(N)}
        for depth in np.unique(g[idx]):
            sub = idx[g[idx] == depth]
            batch = StepBatch(
                p=c.p,
                d=c.d,
                prefix=self._masks[sub, :depth],
                address=self._address[sub, :, :depth].astype(bool),
                payload=pack_bits(self._payload[sub]),
                labels=self._labels[sub].astype(np.uint8),
                target=np.array([rank_support(s, c.p) for s in self._supports[sub, depth]], dtype=np.int64),
            )
            for name, values in bayes_ceiling(batch).items():
                out[name][sub] = values
        return out

    def _observation(self) -> dict[str, np.ndarray]:
        obs: dict[str, np.ndarray] = {
            "prefix": self._prefix,
            "depth": self._depth,
            "address": self._address,
            "payload": self._payload,
            "labels": self._labels,
        }
        return {key: value.copy() for key, value in obs.items()} if self.copy else obs

    def _decode_actions(self, actions: Any) -> np.ndarray:
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs,) or not np.issubdtype(actions.dtype, np.integer):
            raise InvalidActionError(
                f"Actions of shape {actions.shape} and dtype {actions.dtype} are not "
                f"{self.num_envs} integers; pass an int array of shape ({self.num_envs},)."
            )
        n_cand = self.single.config.num_candidates
        bad = (actions < 0) | (actions >= n_cand)
        if bad.any():
            raise InvalidActionError(
                f"Actions {actions[bad].tolist()} are outside Discrete({n_cand}) (sub-envs "
                f"{np.flatnonzero(bad).tolist()}); pass integers in [0, {n_cand})."
            )
        if self._support_table is not None:
            return self._support_table[actions]
        c = self.config
        return np.array([unrank_support(int(a), c.p, c.k) for a in actions], dtype=np.int64)

    def reset_now(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        """Reset sub-envs ``idx`` at once (their generators continue) instead of on the next step,
        cancelling their pending autoreset; returns the whole batch's observation. This is what
        stable-baselines3's same-step autoreset needs (:class:`gf2env.integrations.sb3_vec_env.SB3VecEnv`)."""
        idx = np.asarray(idx, dtype=np.int64)
        if len(idx):
            self._reset_envs(idx, None, self.start_depth)
            self._needs_reset[idx] = False
        return self._observation()

    # ----------------------------------------------------------------- gym API
    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        self._check_open()
        N = self.num_envs
        if seed is None:
            seeds: list[int | None] | None = None
        elif isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
            seeds = [check_seed(seed) + i for i in range(N)]
        elif isinstance(seed, (list, tuple)):
            seeds = [None if s is None else check_seed(s, f"seed[{i}]") for i, s in enumerate(seed)]
            if len(seeds) != N:
                raise GF2ConfigError(f"reset got {len(seeds)} seeds for num_envs={N}; pass {N} seeds.")
        else:
            raise GF2ConfigError(
                f"reset seed={seed!r} is neither an int >= 0 nor a list of {N} (ints or None); pass one."
            )
        start = self.single.start_depth_from_options(options)
        self._reset_envs(np.arange(N), seeds, start)
        self._seeded = True
        self._needs_reset[:] = False
        ones = np.ones(N, dtype=bool)
        info = {
            "depth": self._depth.copy(),
            "_depth": ones,
            "attempt": self._attempt.copy(),
            "_attempt": ones.copy(),
            "trivial_baseline": np.full(N, self.config.trivial_baseline),
            "_trivial_baseline": ones.copy(),
        }
        return self._observation(), info

    def step(
        self, actions: Any
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        c, N = self.config, self.num_envs
        self._check_open()
        if not self._seeded:
            raise ResetNeededError("step() called before the first reset(); call reset() first.")
        support = self._decode_actions(actions)
        resetting = self._needs_reset.copy()
        live = ~resetting
        rows = np.arange(N)
        g = np.minimum(self._depth, c.n - 1)
        target = self._supports[rows, g].astype(np.int64)
        correct = live & (supports_to_masks(support) == self._masks[rows, g])
        attempt = self._attempt  # replaced, not written, by the step
        t = step_transition(
            correct,
            self._depth,
            attempt,
            n=c.n,
            step_mode=self.step_mode,
            max_attempts=self.max_attempts,
            live=live,
        )
        ceiling = self._bayes_ceiling(np.flatnonzero(live), g) if self.single.bayes_ceiling else None

        adv = np.flatnonzero(t.advance)
        self._prefix[adv[:, None], g[adv][:, None], self._supports[adv, g[adv]]] = 1
        self._depth, self._attempt = t.depth, t.attempt
        if t.finished.any():
            self._address[t.finished] = 0
            self._payload[t.finished] = 0
            self._labels[t.finished] = 0
        self._draw(np.flatnonzero((t.advance & ~t.finished) | t.retry))

        reset_idx = np.flatnonzero(resetting)
        if len(reset_idx):
            self._reset_envs(reset_idx, None, self.start_depth)
        self._needs_reset = t.terminated.copy()

        info: dict[str, Any] = {
            "depth": np.where(live, g, self._depth),
            "_depth": np.ones(N, dtype=bool),
            "attempt": np.where(live, attempt, 1),
            "_attempt": np.ones(N, dtype=bool),
            "trivial_baseline": np.full(N, c.trivial_baseline),
            "_trivial_baseline": np.ones(N, dtype=bool),
            "correct": correct,
            "_correct": live,
            "action_indices": support,
            "_action_indices": live,
            "target": target,
            "_target": live,
            "exhausted": t.exhausted,
            "_exhausted": live,
        }
        if ceiling is not None:
            for name, values in ceiling.items():
                info[f"bayes_ceiling_{name}"], info[f"_bayes_ceiling_{name}"] = values, live
        rewards = correct.astype(np.float64)
        return self._observation(), rewards, t.terminated, np.zeros(N, dtype=bool), info
