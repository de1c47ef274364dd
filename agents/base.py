"""The agent contract: what every agent (estimator, SB3 policy, LLM) is asked and what it answers.

:func:`gf2env.agents.harness.evaluate.evaluate` hands an :class:`Agent` one :class:`Cell` (the records of
one setting, batched) at a time and gets back an :class:`Estimate` (arrays over the cell's records);
an agent that :class:`AsksAhead` first gets every cell at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from gf2env.errors import GF2ConfigError
from gf2env.records.record import Record
from gf2env.task.posterior import StepBatch


@dataclass(frozen=True)
class Cell:
    """The records of one setting, batched: what each result row says about its source."""

    source: str
    sampling: str
    n: int
    seed: int | None
    trials: np.ndarray  # (R,) the records' trial indices
    batch: StepBatch
    records: Sequence[Record]  # the same steps as records (what a prompt is rendered from)


@dataclass(frozen=True)
class Estimate:
    """Per-step results of an estimator on a batch (arrays of length R)."""

    action: np.ndarray  # argmax, ties broken with the generator
    tie_size: np.ndarray  # candidates sharing the maximum
    gamma: np.ndarray | None  # posterior mass on the truth (None when the truth is unknown)
    argmax_accuracy: np.ndarray | None  # [truth among the maxima] / tie size
    # what each step cost: compute column (gf2env.report.schema.COMPUTE_COLUMNS) -> (R,) floats, NaN
    # where unknown; the harness adds wall_ms (its own clock) where the agent gives none
    compute: Mapping[str, np.ndarray] = field(default_factory=dict)

    def compute_row(self, i: int) -> dict[str, float | None]:
        """Record ``i``'s compute columns (``None``: unknown)."""
        values = {column: float(array[i]) for column, array in self.compute.items()}
        return {column: None if np.isnan(value) else value for column, value in values.items()}


class ChecksSupport:
    """``supports`` answered by ``check``: an agent supports a setting its ``check`` accepts."""

    def check(self, p: int, d: int, K: int, g: int) -> None:
        """Raise :class:`GF2ConfigError` if this agent cannot run at ``(p, d, K, g)``."""

    def supports(self, p: int, d: int, K: int, g: int) -> bool:
        try:
            self.check(p, d, K, g)
        except GF2ConfigError:
            return False
        return True


class Agent(Protocol):
    """What :func:`evaluate` asks of an agent: estimators and
    :class:`gf2env.agents.llm.agent.LLMAgent` alike."""

    @property
    def name(self) -> str: ...

    def check(self, p: int, d: int, K: int, g: int) -> None: ...

    def supports(self, p: int, d: int, K: int, g: int) -> bool: ...

    def answer(self, cell: Cell, rng: np.random.Generator) -> Estimate: ...


@runtime_checkable
class AsksAhead(Protocol):
    """An agent whose answers are slow to get (queries to a model) and best asked all at once:
    :func:`evaluate` hands it every cell it supports before the first :meth:`Agent.answer`, so that
    servers stay busy across depths instead of draining between them."""

    def prepare(self, cells: Sequence[Cell], progress: bool = True) -> None: ...
