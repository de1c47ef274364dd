"""The settings an evaluation covers, as cells of records: a :class:`Grid` or a records file.

A :class:`Grid` names the settings (``p``, ``d``, ``K``, sampling mode, depths), the trials a depth
and the seed; its records are the ones ``gf2 generate`` writes for the same seed (record ``trial``
at depth ``g`` is a pure function of ``(seed, g, trial)``), so every agent sees the same steps.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.base import Cell
from gf2env.errors import GF2ConfigError
from gf2env.oracle import SAMPLING_MODES, TaskConfig
from gf2env.posterior import StepBatch
from gf2env.record_columns import RecordColumns, check_trials, columns_from_records, generate_columns
from gf2env.records import Record, check_seed
from gf2env.settings import TaskSettings, check_depths


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
        check_depths(self.depths, "depths")
        check_seed(self.seed)
        for mode in self.sampling:
            if mode not in SAMPLING_MODES:
                raise GF2ConfigError(f"sampling={mode!r} is not one of {SAMPLING_MODES}.")
        if self.n is not None and self.n <= max(self.depths):
            raise GF2ConfigError(
                f"n={self.n} terms leave no next term at depth {max(self.depths)}; pass n > "
                f"{max(self.depths)} or n=None (g + 1 terms at each depth)."
            )
        self.tasks()  # validate every setting up front, with TaskConfig's messages

    def tasks(self) -> list[TaskSettings]:
        """The grid's task settings, sampling outermost, then p, d, K."""
        return [
            TaskSettings(p=p, d=d, K=K, sampling=sampling)
            for sampling in self.sampling
            for p in self.p
            for d in self.d
            for K in self.K
        ]

    def settings(self) -> Iterator[tuple[TaskConfig, int]]:
        """``(config, g)`` for every cell of the grid, depth innermost."""
        for task in self.tasks():
            for g in self.depths:
                yield (task.at_depth(g) if self.n is None else task.config(self.n)), g

    def records(self, config: TaskConfig, g: int) -> RecordColumns:
        """The ``trials`` records of one setting: record ``t`` is a pure function of (seed, g, t)."""
        return generate_columns(config, g, self.trials, self.seed)

    @property
    def num_records(self) -> int:
        return len(self.sampling) * len(self.p) * len(self.d) * len(self.K) * len(self.depths) * self.trials


def grid_cells(grid: Grid) -> Iterator[Cell]:
    """The grid's records, one :class:`Cell` a setting, generated deterministically."""
    for config, g in grid.settings():
        columns = grid.records(config, g)
        yield Cell(
            "grid",
            config.sampling,
            config.n,
            grid.seed,
            columns.index,
            columns.step_batch(),
            columns.records(),
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
    """Records grouped by ``(sampling, p, d, K, n, g)``; ``trial`` is a record's position in the file
    (refused as :func:`column_cells` refuses them)."""
    check_trials(columns_from_records(records))
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, rec in enumerate(records):
        groups.setdefault((sampling_of(rec), rec.p, rec.d, rec.K, rec.n, rec.g), []).append(i)
    parts = [(key[0], key[-2], tuple(records[i] for i in idx), idx) for key, idx in groups.items()]
    return (
        Cell(source, sampling, n, None, np.array(idx), StepBatch.from_records(group), group)
        for sampling, n, group, idx in parts
    )  # a generator, the check made already


def column_cells(groups: Sequence[RecordColumns], source: str) -> Iterator[Cell]:
    """:func:`record_cells` for records read as columns: the same cells, in the same order, each
    batch built from arrays and its records built only when read. Records that would count wrongly
    (no samples, labels their terms do not give, repeats) are refused (:func:`check_trials`)."""
    check_trials(groups)
    parts = []
    for columns in groups:
        modes = columns.samplings()
        for mode in dict.fromkeys(modes.tolist()):
            rows = np.flatnonzero(modes == mode)
            parts.append((int(columns.index[rows[0]]), str(mode), columns.take(rows)))
    return (
        Cell(source, mode, part.n, None, part.index, part.step_batch(), part.records())
        for _, mode, part in sorted(parts, key=lambda item: item[0])
    )  # a generator, the check made already


def lone_settings(groups: Sequence[RecordColumns]) -> list[str]:
    """Notes on records that are alone at their ``(p, d, K)`` in a file whose other settings hold
    several: a file may mix settings, but a lone record (a changed ``p``, say) is a setting of its
    own whose γ rests on one trial, more likely an edit than a design."""
    counts: dict[tuple[int, int, int], list[int]] = {}
    for c in groups:
        counts.setdefault((c.p, c.d, c.K), []).extend(c.index.tolist())
    if len(counts) < 2 or max(len(rows) for rows in counts.values()) < 2:
        return []
    return [
        f"record {rows[0]} is the only one at p={p} d={d} K={K} in the file: a setting of its own (its "
        "row in the summary rests on this one trial); check the record if it belongs to another setting"
        for (p, d, K), rows in counts.items()
        if len(rows) == 1
    ]


__all__ = ["Grid", "column_cells", "grid_cells", "lone_settings", "record_cells", "sampling_of"]
