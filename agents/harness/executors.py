"""Where an evaluation's cells are answered: in this process (``local``) or as Ray tasks (``ray``).

One idea: an agent's answer on a cell is a pure function of ``(agent, cell, seed)``
(:func:`answer_cell`: its tie-breaking generator is fixed by the seed, the agent and the setting), so
an executor only decides where that function runs. :func:`gf2env.agents.harness.evaluate.evaluate` builds
the rows from the answers, in cell order, whichever executor ran them: the rows, the summary and
the fit are the same bytes either way, but for the measured compute columns (``wall_ms``...).

The Ray executor ships each cell once to the object store and runs one task per cell × agent:
estimators travel as themselves, SB3 agents as their checkpoint (:class:`~gf2env.agents.sb3_agent.SB3Spec`
with an absolute path, loaded once per worker process), and agents that ask ahead (LLMs, whose
work is on their servers and whose query log is this process's file) answer here, in the driver.
Every node needs this project installed (the same commit, ``pip install -e '.[ray]'``): workers
import it by name.
"""

from __future__ import annotations

import re
import time
import zlib
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from gf2env.agents.base import Agent, AsksAhead, Cell, Estimate
from gf2env.agents.sb3_agent import SB3Agent, SB3Spec
from gf2env.errors import GF2ConfigError, MissingExtraError

if TYPE_CHECKING:
    from tqdm import tqdm

EXECUTORS = ("local", "ray")
_HOST_PORT = re.compile(r"^(ray://)?[A-Za-z0-9_.\-\[\]:]*[A-Za-z0-9_.\-\]]:(\d{1,5})$")


def agent_rng(seed: int, agent: str, cell: Cell) -> np.random.Generator:
    """The tie-breaking generator of ``agent`` on a cell: fixed by the seed, agent and setting."""
    b = cell.batch
    key = zlib.crc32(f"{agent}|{cell.source}|{cell.sampling}|{b.p}|{b.d}|{b.K}|{b.g}".encode())
    return np.random.default_rng([seed, key])


class Skipped(NamedTuple):
    """An agent that cannot run at a cell's setting; ``why`` is its check's message (``None``: no
    reason given, nothing to report)."""

    why: str | None


Answer = Estimate | Skipped


def answer_cell(agent: Agent, cell: Cell, seed: int) -> Answer:
    """``agent`` on ``cell``: its estimate, or why it skips the setting. A pure function of its inputs,
    but for the measured ``wall_ms``: the time of ``answer`` divided by the cell's records, unless the
    agent measured its own (an LLM: its model and sandbox time, not its lookups)."""
    b = cell.batch
    if not agent.supports(b.p, b.d, b.K, b.g):
        try:
            agent.check(b.p, b.d, b.K, b.g)
        except GF2ConfigError as err:
            return Skipped(str(err))
        return Skipped(None)
    start = time.perf_counter()
    estimate = agent.answer(cell, agent_rng(seed, agent.name, cell))
    wall_ms = (time.perf_counter() - start) * 1000 / b.R
    if "wall_ms" in estimate.compute:
        return estimate
    return replace(estimate, compute={**estimate.compute, "wall_ms": np.full(b.R, wall_ms)})


class Executor(Protocol):
    """Answers every agent on every cell; yields each cell with its answers (in ``agents`` order), in
    cell order, and advances ``bar`` by a cell's records when all its answers are in."""

    def answers(
        self, agents: Sequence[Agent], cells: Iterable[Cell], seed: int, bar: tqdm
    ) -> Iterator[tuple[Cell, list[Answer]]]: ...


class LocalExecutor:
    """One cell after another, every agent in this process (the default)."""

    def answers(
        self, agents: Sequence[Agent], cells: Iterable[Cell], seed: int, bar: tqdm
    ) -> Iterator[tuple[Cell, list[Answer]]]:
        for cell in cells:
            answers = [answer_cell(agent, cell, seed) for agent in agents]
            bar.update(cell.batch.R)
            yield cell, answers


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as err:
        raise MissingExtraError(
            f"executor 'ray' needs Ray: pip install -e '.[ray]' (or use the default executor 'local'; {err})."
        ) from None
    return ray


def _connect(ray: Any, address: str) -> None:
    """Join the cluster at ``address``, or say what to check."""
    try:
        ray.init(address=address, log_to_driver=False)
    except ConnectionError as err:
        raise GF2ConfigError(
            f"No Ray cluster answered at address={address!r} ({err}). Start one there (ray start --head "
            "--port 6379) and pass the address it prints. A cluster with token authentication (ray start "
            "turns it on where ~/.ray/auth_token exists) also needs RAY_AUTH_MODE=token here, and the "
            "same token in ~/.ray/auth_token or RAY_AUTH_TOKEN."
        ) from None


@lru_cache(maxsize=8)
def _sb3_agent(spec: SB3Spec) -> SB3Agent:
    """A worker's SB3 agent of a checkpoint, loaded once per worker process."""
    return SB3Agent(spec)


def _answer_task(agent: Agent | SB3Spec, cell: Cell, seed: int) -> Answer:
    """The Ray task: :func:`answer_cell` on a worker (an SB3 checkpoint is loaded there first)."""
    return answer_cell(_sb3_agent(agent) if isinstance(agent, SB3Spec) else agent, cell, seed)


def shipped(agent: Agent) -> Agent | SB3Spec | None:
    """What a Ray task gets of ``agent``: the agent itself (estimators), its checkpoint (SB3, the path
    made absolute: it must exist on every node), or ``None`` (it answers in the driver: it asks ahead)."""
    if isinstance(agent, AsksAhead):
        return None
    if isinstance(agent, SB3Agent):
        return replace(agent.spec, path=str(Path(agent.spec.path).resolve()))
    return agent


@dataclass
class _Pending:
    """A cell whose answers are coming in: an answer, or the Ray reference it will come from."""

    cell: Cell
    answers: list[Any]
    left: int = field(default=0)


class RayExecutor:
    """One Ray task per cell × agent, on the cluster at ``address`` (``None``: a local one started for
    this run, or the one this process is already connected to). At most ``window`` cells are in flight
    (their records held in the object store) at a time; ``None``: twice the cluster's CPUs, at least 4."""

    def __init__(self, address: str | None = None, window: int | None = None) -> None:
        self.address = address
        self.window = window

    def answers(
        self, agents: Sequence[Agent], cells: Iterable[Cell], seed: int, bar: tqdm
    ) -> Iterator[tuple[Cell, list[Answer]]]:
        ray = _import_ray()
        started = not ray.is_initialized()
        if started:
            if self.address is None:  # a Ray of this run's own, not one that happens to be running here
                ray.init(address="local", include_dashboard=False, log_to_driver=False)
            else:
                _connect(ray, self.address)
        try:
            yield from self._answers(ray, agents, cells, seed, bar)
        finally:
            if started:
                ray.shutdown()

    def _answers(
        self, ray: Any, agents: Sequence[Agent], cells: Iterable[Cell], seed: int, bar: tqdm
    ) -> Iterator[tuple[Cell, list[Answer]]]:
        task = ray.remote(num_cpus=1)(_answer_task)
        window = self.window or max(4, 2 * int(ray.cluster_resources().get("CPU", 1)))
        payloads = [shipped(agent) for agent in agents]
        pending: deque[_Pending] = deque()
        waiting: dict[Any, tuple[_Pending, int]] = {}  # a task's reference -> its cell and agent

        def collect(block_until: int) -> None:
            """Take finished tasks' answers until at most ``block_until`` cells are unanswered."""
            while sum(1 for item in pending if item.left) > block_until:
                ready, _ = ray.wait(list(waiting), num_returns=1)
                for ref in ready:
                    item, i = waiting.pop(ref)
                    item.answers[i] = ray.get(ref)
                    item.left -= 1
                    if not item.left:
                        bar.update(item.cell.batch.R)

        def done() -> Iterator[tuple[Cell, list[Answer]]]:
            while pending and not pending[0].left:
                item = pending.popleft()
                yield item.cell, item.answers

        for cell in cells:
            item = _Pending(cell, [None] * len(agents))
            ref = None
            for i, (agent, payload) in enumerate(zip(agents, payloads, strict=True)):
                if payload is None:
                    item.answers[i] = answer_cell(agent, cell, seed)
                    continue
                ref = ray.put(cell) if ref is None else ref
                waiting[task.remote(payload, ref, seed)] = (item, i)
                item.left += 1
            if not item.left:
                bar.update(cell.batch.R)
            pending.append(item)
            collect(window - 1)
            yield from done()
        collect(0)
        yield from done()


@dataclass(frozen=True)
class ExecutorSpec:
    """Where ``gf2 compare`` runs its cells: ``kind`` (one of :data:`EXECUTORS`) and, for Ray, the
    cluster's ``address`` (``auto``, ``host:6379`` as ``ray start --head`` prints, ``ray://host:10001``
    for Ray Client; ``None``: a local Ray started for the run)."""

    kind: str = "local"
    address: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise GF2ConfigError(
                f"executor={self.kind!r} is not one of {EXECUTORS}; pass --executor local (the default) "
                "or --executor ray (pip install -e '.[ray]')."
            )
        if self.address is None:
            return
        if self.kind != "ray":
            raise GF2ConfigError(
                f"address={self.address!r} is a Ray cluster's; add --executor ray (executor: ray) or drop it."
            )
        port = _HOST_PORT.match(self.address)
        if self.address not in ("auto", "local") and (port is None or not 0 < int(port.group(2)) < 65536):
            raise GF2ConfigError(
                f"address={self.address!r} is not a Ray address; pass auto (the cluster on this machine), "
                "HOST:6379 (the address `ray start --head` prints) or ray://HOST:10001 (Ray Client)."
            )

    def executor(self) -> Executor:
        """The executor this names (Ray is imported here: a missing Ray fails before any work)."""
        if self.kind == "local":
            return LocalExecutor()
        _import_ray()
        return RayExecutor(None if self.address == "local" else self.address)


__all__ = [
    "EXECUTORS",
    "Answer",
    "Executor",
    "ExecutorSpec",
    "LocalExecutor",
    "RayExecutor",
    "Skipped",
    "agent_rng",
    "answer_cell",
    "shipped",
]
