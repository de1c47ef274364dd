"""Estimators as policies on ``GF2Recon-v1`` observations.

:class:`EstimatorPolicy` turns an observation into a one-step :class:`~gf2env.task.posterior.StepBatch`,
asks its estimator for the posterior, and returns the argmax (ties broken at random) or a sample
from the posterior. The full posterior of the last decision is kept in ``last_posterior``.

Randomness is tied to the environment: the policy's generator is spawned from the env's
``np_random`` (a child of its seed sequence, so the env's own stream is untouched) and re-spawned
whenever the env is reseeded. ``env.reset(seed=s)`` therefore makes the whole episode, agent's
tie-breaks included, a function of ``s``. Pass ``rng=`` instead to keep a generator of your own.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from gf2env.agents.estimators import Estimator, make_estimator
from gf2env.envs.env import GF2ReconEnv
from gf2env.errors import GF2ConfigError
from gf2env.task.posterior import StepBatch

DECISIONS = ("argmax", "sample")


class EstimatorPolicy:
    """Play an estimator on a ``GF2Recon-v1`` env.

    Args:
        estimator: an :class:`~gf2env.agents.estimators.Estimator` or its name (``"A"``, ``"B"``,
        ``"D(k=3)"``...).
        env: the env it plays (wrappers allowed); gives ``p``, ``d`` and the generator.
        decision: ``"argmax"`` (ties broken uniformly) or ``"sample"`` (from the posterior).
        rng: a generator to use instead of one spawned from the env's.
    """

    def __init__(
        self,
        estimator: Estimator | str,
        env: gym.Env,
        decision: str = "argmax",
        rng: np.random.Generator | None = None,
    ) -> None:
        if decision not in DECISIONS:
            raise GF2ConfigError(f"decision={decision!r} is not one of {DECISIONS}.")
        self.estimator = make_estimator(estimator) if isinstance(estimator, str) else estimator
        self.env = env
        base = env.unwrapped
        if not isinstance(base, GF2ReconEnv):
            raise GF2ConfigError(
                f"EstimatorPolicy plays GF2Recon-v1; got {type(base).__name__}. "
                "Pass gym.make('GF2Recon-v1', ...)."
            )
        config = base.config
        self.p, self.d = config.p, config.d
        self.decision = decision
        self._own_rng = rng
        self._parent: np.random.Generator | None = None
        self._rng: np.random.Generator | None = None
        self.last_posterior: np.ndarray | None = None

    @property
    def name(self) -> str:
        return self.estimator.name

    @property
    def rng(self) -> np.random.Generator:
        """The generator of the agent's choices (spawned from the env's, see the module docs)."""
        if self._own_rng is not None:
            return self._own_rng
        parent = self.env.unwrapped.np_random
        if parent is not self._parent:
            self._parent, self._rng = parent, parent.spawn(1)[0]
        assert self._rng is not None
        return self._rng

    def act(self, observation: dict[str, Any]) -> int:
        """The action for one observation; the posterior is left in ``last_posterior``."""
        batch = StepBatch.from_observation(observation, self.p, self.d)
        self.estimator.check(batch.p, batch.d, batch.K, batch.g)
        log_weights = self.estimator.log_weights(batch, self.rng)
        posterior = np.exp(log_weights[0] - log_weights[0].max())
        self.last_posterior = posterior / posterior.sum()
        if self.decision == "sample":
            return int(self.rng.choice(len(posterior), p=self.last_posterior))
        best = np.flatnonzero(log_weights[0] == log_weights[0].max())
        return int(best[self.rng.integers(len(best))]) if len(best) > 1 else int(best[0])

    def __call__(self, observation: dict[str, Any]) -> int:
        return self.act(observation)


__all__ = ["DECISIONS", "EstimatorPolicy"]
