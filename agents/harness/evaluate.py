"""Run agents over the cells of a grid or a records file (:mod:`gf2env.agents.harness.grid`) and collect rows.

:func:`evaluate` feeds each :class:`~gf2env.task.posterior.StepBatch` to every agent and returns one
row per agent × record (``gf2env.report.results.RESULT_COLUMNS``, with what the step cost the agent),
wherever its executor (:mod:`gf2env.agents.harness.executors`) answers the cells; an agent that asks ahead (an
LLM) first gets every cell it supports, so its queries at all depths are in flight together. An
agent that cannot run at a setting (the exact data-only posterior past its depth limit) is skipped
there and the skip is reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm import tqdm

from gf2env.agents.base import Agent, AsksAhead, Cell
from gf2env.agents.estimators import make_estimator
from gf2env.agents.harness.executors import Executor, LocalExecutor, Skipped
from gf2env.agents.llm.agent import LLMAgent, LLMSpec
from gf2env.agents.llm.query_log import QueryLog
from gf2env.agents.sb3_agent import SB3Spec
from gf2env.errors import GF2ConfigError


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


def evaluate(
    agents: Sequence[Agent],
    cells: Iterable[Cell],
    seed: int = 0,
    total: int | None = None,
    progress: bool = True,
    executor: Executor | None = None,
) -> Evaluation:
    """Every agent on every cell: one row per agent × record (``gf2env.report.results.RESULT_COLUMNS``),
    in cell order, then agent order. ``executor`` says where the cells are answered (default: here,
    one after another); the rows are the same whichever runs them."""
    out = Evaluation()
    ahead = [agent for agent in agents if isinstance(agent, AsksAhead)]
    if ahead:
        cells = list(cells)
    for early in ahead:
        early.prepare(
            [c for c in cells if early.supports(c.batch.p, c.batch.d, c.batch.K, c.batch.g)], progress
        )
    bar = tqdm(total=total, unit="rec", desc="records", disable=not progress)
    for cell, answers in (executor or LocalExecutor()).answers(agents, cells, seed, bar):
        b = cell.batch
        for agent, est in zip(agents, answers, strict=True):
            if isinstance(est, Skipped):
                if est.why is not None:
                    setting = f"{cell.source}, p={b.p} d={b.d} K={b.K} {cell.sampling}"
                    out.skipped.setdefault((agent.name, setting), []).append((b.g, est.why))
                continue
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
                        **est.compute_row(i),  # what the step cost (gf2env.report.schema.COMPUTE)
                    }
                )
    bar.close()
    return out


def make_agents(specs: Sequence[str | LLMSpec | SB3Spec], log: QueryLog | None = None) -> list[Agent]:
    """Agents from estimator names (see :func:`gf2env.agents.estimators.make_estimator`), LLM specs and SB3
    checkpoints; no duplicate names. LLM agents share ``log``, the resumable query log (required if
    there are any)."""
    agents: list[Agent] = []
    for spec in specs:
        if isinstance(spec, SB3Spec):
            from gf2env.agents.sb3_agent import SB3Agent

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


__all__ = [
    "Evaluation",
    "evaluate",
    "make_agents",
]
