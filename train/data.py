"""Training prompts drawn from the environment: a stream that follows a depth curriculum.

Prompt ``i`` of a run is a pure function of ``(seed, i)``: its depth is drawn from the curriculum's
active depths with a generator keyed by ``(seed, i)`` (:func:`gf2env.records.record.mixed_depth`), and its
record is ``generate_record(config, g, i, seed)`` (the same records ``gf2 generate`` would write). Each row
holds what TRL needs (``prompt``: chat messages) and what the rewards read (``target``, ``p``,
``answer_offset``) plus ``g`` and the record's JSON (``record``: the tool environment's input).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gf2env.config.settings import TaskSettings
from gf2env.records.record import Record, generate_record, mixed_depth
from gf2env.records.rows import prompt_row
from gf2env.text.prompt import check_prompt_id
from gf2env.train.curriculum import Curriculum


@dataclass(frozen=True)
class TaskSpec(TaskSettings):
    """The task the prompts come from and the prompt they are rendered with (``n = g + 1`` at each
    depth: only ``g + 1`` terms matter)."""

    prompt_id: str = "compact-v1"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_prompt_id(self.prompt_id)

    def record(self, g: int, index: int, seed: int) -> Record:
        return generate_record(self.at_depth(g), g, index, seed)


def prompt_stream(
    task: TaskSpec, curriculum: Curriculum, seed: int, start: int = 0, tools: bool = False
) -> Iterator[dict[str, Any]]:
    """Rows ``start, start + 1, ...`` forever, each at a depth the curriculum allows when it is made."""
    index = start
    while True:
        g = mixed_depth(seed, index, curriculum.depths())
        yield prompt_row(task.record(g, index, seed), task.prompt_id, tools)
        index += 1


def curriculum_dataset(task: TaskSpec, curriculum: Curriculum, seed: int, tools: bool = False) -> Any:
    """The stream as a ``datasets.IterableDataset`` (for TRL; read in-process, so curriculum moves apply)."""
    from datasets import IterableDataset

    return IterableDataset.from_generator(lambda: prompt_stream(task, curriculum, seed, tools=tools))


__all__ = ["TaskSpec", "curriculum_dataset", "prompt_row", "prompt_stream"]
