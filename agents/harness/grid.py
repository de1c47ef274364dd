"""The settings an evaluation covers, as cells of records: a :class:`Grid` or a records file.

A :class:`Grid` names the settings (``p``, ``d``, ``K``, sampling mode, depths), the trials a depth
and the seed; its records are the ones ``gf2 generate`` writes for the same seed (record ``trial``
at depth ``g`` is a pure function of ``(seed, g, trial)``), so every agent sees the same steps.
With ``episodes=True`` (``gf2 generate --episodes``) record ``trial`` at depth ``g`` is instead step
``g`` of episode ``trial``: one instance walked through its depths, as the environment does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from gf2env.agents.base import Cell
from gf2env.config.flags import count_arg, int_list, n_arg
from gf2env.config.options import option
from gf2env.config.settings import TaskSettings, check_depths, check_distinct
from gf2env.errors import GF2ConfigError
from gf2env.records.columns import (
    RecordColumns,
    check_trials,
    columns_from_records,
    generate_columns,
    generate_episode_columns,
)
from gf2env.records.record import MAX_RECORDS, Record, check_record_count, check_seed
from gf2env.task.oracle import SAMPLING_MODES, TaskConfig

EPISODES_HELP = (
    "record t at every depth is step g of episode t (one instance walked through depths 0..n-1 as the "
    "env does in reveal mode; n = max depth + 1 unless --n is given), not a fresh instance a depth"
)


def sampling_list(text: str) -> tuple[str, ...]:
    """``--sampling``: comma-separated sampling modes (each checked by :class:`Grid`)."""
    return tuple(text.split(","))


@dataclass(frozen=True)
class Grid:
    """Settings to evaluate on: every combination of ``p``, ``d``, ``K``, ``sampling`` and depth.

    ``n`` is the number of terms an instance has: ``None`` for ``g + 1`` at each depth (only the
    first ``g + 1`` matter to a step), or a fixed count larger than every depth.

    ``episodes``: record ``trial`` at every depth is a step of episode ``trial`` of ``seed``
    (:func:`~gf2env.records.columns.generate_episode_columns`), so a trial index means one instance
    across the cells; its instances have ``n`` terms, ``max(depths) + 1`` when ``n`` is ``None``.
    """

    depths: tuple[int, ...] = field(metadata=option(type=int_list))
    trials: int = field(metadata=option(type=count_arg(1, MAX_RECORDS)))
    p: tuple[int, ...] = field(
        default=(12,), metadata=option(type=int_list, help="payload sizes, e.g. 8,12,16")
    )
    d: tuple[int, ...] = field(default=(4,), metadata=option(type=int_list))
    K: tuple[int, ...] = field(default=(32,), metadata=option(type=int_list))
    sampling: tuple[str, ...] = field(
        default=("adversarial",), metadata=option(type=sampling_list, help="e.g. adversarial,diagnostic")
    )
    seed: int = 0
    n: int | None = field(
        default=None, metadata=option(type=n_arg, help="terms an instance, or 'g+1' (default)")
    )
    episodes: bool = field(default=False, metadata=option(help=EPISODES_HELP))

    def __post_init__(self) -> None:
        if not isinstance(self.episodes, bool):
            raise GF2ConfigError(f"episodes={self.episodes!r} is not a bool; pass True or False.")
        if self.trials < 1:
            raise GF2ConfigError(f"trials={self.trials} is less than the minimum 1; pass trials >= 1.")
        check_record_count(self.trials)
        check_depths(self.depths, "depths")
        for name in ("p", "d", "K", "sampling"):
            check_distinct(getattr(self, name), name)
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

    @property
    def terms(self) -> int | None:
        """Terms an instance has: ``n``; for episodes ``max(depths) + 1`` when ``n`` is ``None``."""
        return max(self.depths) + 1 if self.n is None and self.episodes else self.n

    @property
    def source(self) -> str:
        """What the cells' rows say they come from: ``"grid"``, or ``"episodes"``."""
        return "episodes" if self.episodes else "grid"

    def settings(self) -> Iterator[tuple[TaskConfig, int]]:
        """``(config, g)`` for every cell of the grid, depth innermost."""
        n = self.terms
        for task in self.tasks():
            for g in self.depths:
                yield (task.at_depth(g) if n is None else task.config(n)), g

    def records(self, config: TaskConfig, g: int) -> RecordColumns:
        """The ``trials`` records of one setting: record ``t`` is a pure function of (seed, g, t), or
        with ``episodes`` step ``g`` of episode ``t`` of ``seed``."""
        if self.episodes:
            return generate_episode_columns(config, g, self.trials, self.seed)
        return generate_columns(config, g, self.trials, self.seed)

    @property
    def num_records(self) -> int:
        return len(self.sampling) * len(self.p) * len(self.d) * len(self.K) * len(self.depths) * self.trials


def grid_cells(grid: Grid) -> Iterator[Cell]:
    """The grid's records, one :class:`Cell` a setting, generated deterministically."""
    for config, g in grid.settings():
        columns = grid.records(config, g)
        yield Cell(
            grid.source,
            config.sampling,
            config.n,
            grid.seed,
            columns.index,
            columns.step_batch(),
            columns.records(),
        )


def sampling_of(record: Record) -> str:
    """The sampling mode of a record, as :meth:`~gf2env.records.columns.RecordColumns.samplings` reads
    it (named in its ``exp``, else read off its payloads)."""
    return str(columns_from_records([record])[0].samplings()[0])


def record_cells(records: Sequence[Record], source: str) -> Iterator[Cell]:
    """Records grouped by ``(sampling, p, d, K, n, g)``; ``trial`` is a record's position in the file.
    The cells of :func:`column_cells` on the records' columns (one check, one grouping), each
    holding the caller's own :class:`Record` objects."""
    return _cells(columns_from_records(records), source, records)


def column_cells(groups: Sequence[RecordColumns], source: str) -> Iterator[Cell]:
    """:func:`record_cells` for records read as columns: the same cells, in the same order, each
    batch built from arrays and its records built only when read. Records that would count wrongly
    (no samples, labels their terms do not give, repeats) are refused (:func:`check_trials`)."""
    return _cells(groups, source, None)


def _cells(groups: Sequence[RecordColumns], source: str, records: Sequence[Record] | None) -> Iterator[Cell]:
    """The cells of ``groups`` (checked first, all of them); a cell's records are ``records``'s at its
    trials when given, else built from the columns when read."""
    check_trials(groups)
    parts = []
    for columns in groups:
        modes = columns.samplings()
        for mode in dict.fromkeys(modes.tolist()):
            rows = np.flatnonzero(modes == mode)
            parts.append((int(columns.index[rows[0]]), str(mode), columns.take(rows)))
    return (
        Cell(
            source, mode, part.n, None, part.index, part.step_batch(),
            part.records() if records is None else tuple(records[i] for i in part.index.tolist()),
        )
        for _, mode, part in sorted(parts, key=lambda item: item[0])
    )  # a generator, the check made already  # fmt: skip


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


__all__ = [
    "EPISODES_HELP",
    "Grid",
    "sampling_list",
    "column_cells",
    "grid_cells",
    "lone_settings",
    "record_cells",
    "sampling_of",
]
