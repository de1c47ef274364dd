"""A ``GF2ReconText`` OpenEnv session in the shape of TRL's ``GRPOTrainer(environment_factory=...)``.

TRL makes one instance per rollout (and reuses them), calls ``reset(**row)`` with the dataset row and
appends what it returns to the last user message, exposes the public methods as tools (their
docstrings are the tool descriptions) and scores a finished rollout with ``get_reward()``. Here the
episode runs on the server: ``reset`` starts one (the row's ``seed`` and ``start_depth`` columns, when
present, are its reset fields) and returns the first prompt; the one tool, ``submit(indices)``, hands in
the next term as the server's text env reads it (``\\boxed{[...]}`` in the prompt's numbering, graded by
gf2env's scorer on the server) and returns the verdict and the next step's prompt; ``get_reward()`` is
the episode's return, its number of right steps. No TRL import: TRL only calls these methods.
"""

from __future__ import annotations

from typing import Any

from gf2env.integrations.openenv.client import GF2ReconTextClient
from gf2env.integrations.openenv.models import GF2ReconTextAction
from gf2env.text.answers import submitted_answer

SUBMIT_NOTE = (
    "Answer with the tool submit(indices): the next term's variable indices in the prompt's numbering. "
    "Each submission is final for its step; the reply says whether it was right and gives the next step."
)


class GF2ReconTextTools:
    """``environment_factory=lambda: GF2ReconTextTools(base_url)`` for a ``GF2ReconText-v*`` server."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self._client: Any = None  # connected at the first reset, one server session per instance
        self.rewards: list[float] = []
        self.done = True

    def reset(self, seed: int | None = None, start_depth: int | None = None, **row: Any) -> str:
        """Start an episode on the server; returns its first prompt and how to answer."""
        if self._client is None:
            self._client = GF2ReconTextClient(base_url=self.base_url).sync()
        fields = {k: v for k, v in (("seed", seed), ("start_depth", start_depth)) if v is not None}
        result = self._client.reset(**fields)
        self.rewards, self.done = [], result.done
        return f"{result.observation.prompt}\n\n{SUBMIT_NOTE}"

    def submit(self, indices: list[int]) -> str:
        """Submit the next term of the circuit for the current step.

        Args:
            indices: The variable indices of the next term's payload variables, in the prompt's numbering.

        Returns:
            Whether the term was right, then the next step's prompt (or that the episode is over).
        """
        if self.done or self._client is None:
            raise ValueError("The episode is over; there is no step to answer.")
        result = self._client.step(GF2ReconTextAction(response=submitted_answer(indices)))
        self.rewards.append(float(result.reward))
        self.done = result.done
        verdict = "Right." if result.reward else "Wrong."
        if self.done:
            return f"{verdict} The episode is over."
        return f"{verdict} Next step:\n{result.observation.prompt}"

    def get_reward(self) -> float:
        """The episode's return: the number of steps answered right."""
        return float(sum(self.rewards))


__all__ = ["SUBMIT_NOTE", "GF2ReconTextTools"]
