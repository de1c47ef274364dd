"""Training in several processes (``torchrun``, ``accelerate launch``): which process this is, and the γ
evaluation's generation shared out over them.

One rule everywhere: every process runs the same callbacks and reaches the same collectives in the
same order; only the main process writes files (the γ CSV and query log, the curriculum's CSV, the
run record). The γ evaluation's queries are cut into batches (``gamma.batch_size`` queries, the
unit the transformers backend seeds), batch ``b`` goes to process ``b mod N``, and the answers are
gathered on every process. A batch is the same batch whatever ``N`` is, so the γ table of a run in
``N`` processes is the one-process table of the same model (up to floating-point differences of the
hardware). Every process makes the same number of ``generate`` calls (one short of batches repeats
its last one and drops the answers): under ZeRO-3 or FSDP, ``generate`` synchronises the processes
at every token, and a process that stopped early would leave the others waiting for ever.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from gf2env.agents.llm.queries import Backend, Callback, Completion, Query, SamplingParams

T = TypeVar("T")


def process_index() -> int:
    """This process's rank (0 without a process group)."""
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def num_processes() -> int:
    """How many processes train together (1 without a process group)."""
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def is_main_process() -> bool:
    return process_index() == 0


def broadcast(value: T) -> T:
    """The main process's ``value``, on every process (a collective: every process calls it)."""
    if num_processes() == 1:
        return value
    import torch.distributed as dist

    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather(values: Sequence[T]) -> list[T]:
    """Every process's ``values``, concatenated in process order, on every process (a collective)."""
    if num_processes() == 1:
        return list(values)
    import torch.distributed as dist

    parts: list[Any] = [None] * num_processes()
    dist.all_gather_object(parts, list(values))
    return [v for part in parts for v in part]


def shard(batches: int, rank: int, world: int) -> list[int]:
    """The batches process ``rank`` of ``world`` generates, padded to ``ceil(batches / world)`` calls
    with its last batch (or batch 0) so that every process makes the same number of calls."""
    mine = list(range(rank, batches, world))
    calls = -(-batches // world)
    return mine + [mine[-1] if mine else 0] * (calls - len(mine))


class ShardedBackend(Backend):
    """A backend whose batches are shared out over the training processes (see the module docs).

    Args:
        inner: the backend that answers (its ``name`` and ``model`` are this one's).
        answer: answers one batch (e.g. ``TransformersBackend.answer_batch``); a pure function of the
            batch, so that any process may answer it.
        batch_size: queries a batch.
    """

    def __init__(
        self,
        inner: Backend,
        answer: Callable[[Sequence[Query], SamplingParams], list[Completion]],
        batch_size: int,
    ) -> None:
        self.name, self.model = inner.name, inner.model
        self.answer, self.batch_size = answer, batch_size

    async def run(self, queries: Sequence[Query], params: SamplingParams, on_result: Callback) -> None:
        batches = [queries[i : i + self.batch_size] for i in range(0, len(queries), self.batch_size)]
        rank, world = process_index(), num_processes()
        own = len(range(rank, len(batches), world))  # the batches of this process; then repeats
        answered: list[Completion] = []
        for call, b in enumerate(shard(len(batches), rank, world)):
            completions = self.answer(batches[b], params)
            if call < own:
                answered.extend(completions)
        everyone = {c.key: c for c in gather(answered)}
        for query in queries:
            on_result(everyone[query.key])


__all__ = [
    "ShardedBackend",
    "broadcast",
    "gather",
    "is_main_process",
    "num_processes",
    "process_index",
    "shard",
]
