"""Run estimators over a grid of settings or a records file and collect tidy result rows.

A :class:`Grid` names the settings (``p``, ``d``, ``K``, sampling mode, depths), the trials a depth
and the seed; its records are the ones ``gf2 generate`` writes for the same seed (record ``trial``
at depth ``g`` is a pure function of ``(seed, g, trial)``), so every agent sees the same steps.
:func:`evaluate` feeds each :class:`~gf2env.posterior.StepBatch` to every agent and returns one
row per agent × record (``gf2env.results.RESULT_COLUMNS``). An agent that cannot run at a setting
(the exact data-only posterior past its depth limit) is skipped there and the skip is reported.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from tqdm import tqdm

from agents.estimators import Estimate, KnownTerms, Partial, make_estimator
from agents.llm_agent import LLMAgent, LLMSpec
from agents.llm_eval import QueryLog
from agents.sb3_agent import SB3Spec
from gf2env.errors import GF2ConfigError
from gf2env.fit import DCurve
from gf2env.oracle import SAMPLING_MODES, TaskConfig
from gf2env.posterior import StepBatch
from gf2env.records import Record, generate_record


@dataclass(frozen=True)
class Grid:
    """Settings to evaluate on: every combination of ``p``, ``d``, ``K``, ``sampling`` and depth.

    ``n`` is the number of terms an instance has: ``None`` for ``g + 1`` at each depth (only the
    first ``g + 1`` matter to a step), or a fixed count larger than every depth.
    """

    depths: tuple[int, ...]
    trials: int
    p: tuple[int, ...] = (12,)
    d: tuple[int, ...] = (4,)
    K: tuple[int, ...] = (32,)
    sampling: tuple[str, ...] = ("adversarial",)
    seed: int = 0
    n: int | None = None

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise GF2ConfigError(f"trials={self.trials} is less than the minimum 1; pass trials >= 1.")
        if not self.depths or min(self.depths) < 0:
            raise GF2ConfigError(f"depths={self.depths} must be a non-empty list of depths >= 0.")
        for mode in self.sampling:
            if mode not in SAMPLING_MODES:
                raise GF2ConfigError(f"sampling={mode!r} is not one of {SAMPLING_MODES}.")
        if self.n is not None and self.n <= max(self.depths):
            raise GF2ConfigError(
                f"n={self.n} terms leave no next term at depth {max(self.depths)}; pass n > "
                f"{max(self.depths)} or n=None (g + 1 terms at each depth)."
            )
        for p in self.p:  # validate every setting up front, with TaskConfig's messages
            for d in self.d:
                for K in self.K:
                    TaskConfig(p=p, d=d, K=K, n=max(self.depths) + 1)

    def settings(self) -> Iterator[tuple[TaskConfig, int]]:
        """``(config, g)`` for every cell of the grid, depth innermost."""
        for sampling in self.sampling:
            for p in self.p:
                for d in self.d:
                    for K in self.K:
                        for g in self.depths:
                            n = g + 1 if self.n is None else self.n
                            yield TaskConfig(p=p, d=d, K=K, n=n, sampling=sampling), g

    def records(self, config: TaskConfig, g: int) -> list[Record]:
        """The ``trials`` records of one setting: record ``t`` is a pure function of (seed, g, t)."""
        return [generate_record(config, g, t, self.seed) for t in range(self.trials)]

    @property
    def num_records(self) -> int:
        return len(self.sampling) * len(self.p) * len(self.d) * len(self.K) * len(self.depths) * self.trials


@dataclass(frozen=True)
class Cell:
    """The records of one setting, batched: what each result row says about its source."""

    source: str
    sampling: str
    n: int
    seed: int | None
    trials: np.ndarray  # (R,) the records' trial indices
    batch: StepBatch
    records: tuple[Record, ...]  # the same steps as records (what a prompt is rendered from)


@dataclass
class Evaluation:
    """Result rows, and the settings each agent was skipped at because it cannot run there."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    # (agent, setting) -> [(depth, why)]
    skipped: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)

    def skipped_report(self) -> list[str]:
        """One line per agent and setting it was skipped at: the depths, and the first reason."""
        return [
            f"{agent} skipped at g = {', '.join(str(g) for g, _ in cases)} ({setting}): {cases[0][1]}"
            for (agent, setting), cases in self.skipped.items()
        ]


def grid_cells(grid: Grid) -> Iterator[Cell]:
    """The grid's records, one :class:`Cell` a setting, generated deterministically."""
    for config, g in grid.settings():
        records = grid.records(config, g)
        yield Cell(
            "grid",
            config.sampling,
            config.n,
            grid.seed,
            np.arange(grid.trials),
            StepBatch.from_records(records),
            tuple(records),
        )


def sampling_of(record: Record) -> str:
    """The sampling mode of a record: named in its ``exp``, else read off its payloads.

    One payload weight throughout is ``"adversarial"``; the all-ones payload followed by the
    one-bit-cleared ones is ``"diagnostic"``; anything else is ``"unknown"`` (uniform payloads
    cannot be told apart from a mix with certainty).
    """
    named = [mode for mode in SAMPLING_MODES if mode in record.exp]
    if len(named) == 1:
        return named[0]
    weights = record.payload.sum(axis=1)
    head = min(record.K, record.p + 1)
    diagnostic = np.ones((record.p + 1, record.p), dtype=np.uint8)
    diagnostic[np.arange(1, record.p + 1), np.arange(record.p)] = 0
    if head > 1 and np.array_equal(record.payload[:head], diagnostic[:head]):
        return "diagnostic"
    if len(set(weights.tolist())) == 1 and record.K > 1:
        return "adversarial"
    return "unknown"


def record_cells(records: Sequence[Record], source: str) -> Iterator[Cell]:
    """Records grouped by ``(sampling, p, d, K, n, g)``; ``trial`` is a record's position in the file."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, rec in enumerate(records):
        groups.setdefault((sampling_of(rec), rec.p, rec.d, rec.K, rec.n, rec.g), []).append(i)
    for (sampling, *_, n, _g), idx in groups.items():
        group = tuple(records[i] for i in idx)
        yield Cell(source, sampling, n, None, np.array(idx), StepBatch.from_records(group), group)


def agent_rng(seed: int, agent: str, cell: Cell) -> np.random.Generator:
    """The tie-breaking generator of ``agent`` on a cell: fixed by the seed, agent and setting."""
    b = cell.batch
    key = zlib.crc32(f"{agent}|{cell.source}|{cell.sampling}|{b.p}|{b.d}|{b.K}|{b.g}".encode())
    return np.random.default_rng([seed, key])


class Agent(Protocol):
    """What :func:`evaluate` asks of an agent: estimators and :class:`agents.llm_agent.LLMAgent` alike."""

    @property
    def name(self) -> str: ...

    def check(self, p: int, d: int, K: int, g: int) -> None: ...

    def supports(self, p: int, d: int, K: int, g: int) -> bool: ...

    def answer(self, cell: Cell, rng: np.random.Generator) -> Estimate: ...


def evaluate(
    agents: Sequence[Agent],
    cells: Iterable[Cell],
    seed: int = 0,
    total: int | None = None,
    progress: bool = True,
) -> Evaluation:
    """Every agent on every cell: one row per agent × record (``gf2env.results.RESULT_COLUMNS``)."""
    out = Evaluation()
    bar = tqdm(total=total, unit="rec", desc="records", disable=not progress)
    for cell in cells:
        b = cell.batch
        for agent in agents:
            if not agent.supports(b.p, b.d, b.K, b.g):
                try:
                    agent.check(b.p, b.d, b.K, b.g)
                except GF2ConfigError as err:
                    setting = f"{cell.source}, p={b.p} d={b.d} K={b.K} {cell.sampling}"
                    out.skipped.setdefault((agent.name, setting), []).append((b.g, str(err)))
                continue
            est = agent.answer(cell, agent_rng(seed, agent.name, cell))
            assert est.gamma is not None and b.target is not None
            correct = est.action == b.target
            for i in range(b.R):
                if np.isnan(est.gamma[i]):  # an LLM query that failed: reported by the agent
                    continue
                out.rows.append(
                    {
                        "agent": agent.name,
                        "source": cell.source,
                        "sampling": cell.sampling,
                        "p": b.p,
                        "d": b.d,
                        "K": b.K,
                        "n": cell.n,
                        "g": b.g,
                        "trial": int(cell.trials[i]),
                        "seed": cell.seed,
                        "gamma": float(est.gamma[i]),
                        "correct": int(correct[i]),
                        "action": int(est.action[i]),
                        "target": int(b.target[i]),
                        "num_candidates": b.num_candidates,
                    }
                )
        bar.update(b.R)
    bar.close()
    return out


def make_agents(specs: Sequence[str | LLMSpec | SB3Spec], log: QueryLog | None = None) -> list[Agent]:
    """Agents from estimator names (see :func:`agents.estimators.make_estimator`), LLM specs and SB3
    checkpoints; no duplicate names. LLM agents share ``log``, the resumable query log (required if
    there are any)."""
    agents: list[Agent] = []
    for spec in specs:
        if isinstance(spec, SB3Spec):
            from agents.sb3_agent import SB3Agent

            agents.append(SB3Agent(spec))
        elif isinstance(spec, LLMSpec):
            if log is None:
                raise GF2ConfigError(f"LLM agent {spec.label!r} needs a query log; pass log=QueryLog(path).")
            agents.append(LLMAgent(spec, log))
        else:
            agents.append(make_estimator(spec))
    names = [a.name for a in agents]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise GF2ConfigError(f"Agents {dupes} are listed twice; list each once.")
    return agents


def simulate_d_curve(
    config: TaskConfig, depths: Sequence[int], trials: int, seed: int = 0, progress: bool = True
) -> DCurve:
    """Mean γ of estimator D (composite) knowing ``k = 0..g`` terms at each depth: the table the
    effective-prefix fit interpolates. All ``k`` share the same records at a depth."""
    table: dict[int, np.ndarray] = {}
    for g in tqdm(sorted(set(depths)), desc="D curve", unit="depth", disable=not progress):
        cfg = TaskConfig(p=config.p, d=config.d, K=config.K, n=g + 1, sampling=config.sampling, w=config.w)
        batch = StepBatch.from_records([generate_record(cfg, g, t, seed) for t in range(trials)])
        rng = np.random.default_rng([seed, g])
        table[g] = np.array(
            [Partial(KnownTerms(count=k)).evaluate(batch, rng).gamma.mean() for k in range(g + 1)]
        )
    return DCurve(depths=tuple(sorted(table)), table=table)


__all__ = [
    "Agent",
    "Cell",
    "Evaluation",
    "Grid",
    "agent_rng",
    "evaluate",
    "grid_cells",
    "make_agents",
    "record_cells",
    "sampling_of",
    "simulate_d_curve",
]
