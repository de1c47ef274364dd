"""Records as columns: the records of one shape ``(n, p, d, g, K)`` held as arrays.

:class:`RecordColumns` holds supports, sample bits and labels of many records, so they become a
:class:`~gf2env.task.posterior.StepBatch` without a Python object per record
(:meth:`~RecordColumns.step_batch`); :class:`LazyRecords` builds a :class:`~gf2env.records.record.Record`
only when one is read. :func:`generate_columns` draws a depth's records in one batch, bit for bit
those of :func:`gf2env.records.record.generate_record`; :func:`generate_episode_columns` draws the steps of
episodes (one instance walked through its depths, as the environment does) instead. Files:
:mod:`gf2env.records.files`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from hashlib import blake2b
from typing import overload

import numpy as np

from gf2env.errors import GF2ConfigError, RecordFormatError
from gf2env.records.record import Record, episode_exp, episode_seed, labels_from_terms, record_rng
from gf2env.stream.batch import Buffers, PhiloxStream
from gf2env.task.combinatorics import supports_to_masks
from gf2env.task.oracle import SAMPLING_MODES, TaskConfig, evidence_from_uniforms
from gf2env.task.posterior import StepBatch


@dataclass(frozen=True)
class RecordColumns:
    """``R`` records of one shape; ``index`` is each record's position in its file."""

    n: int
    p: int
    d: int
    g: int
    index: np.ndarray  # (R,) int64
    prefix: np.ndarray  # (R, g, d-1) int64, each term ascending
    target: np.ndarray  # (R, d-1) int64, ascending
    address: np.ndarray  # (R, K, n) uint8
    payload: np.ndarray  # (R, K, p) uint8
    labels: np.ndarray  # (R, K) uint8
    exp: tuple[str, ...]

    @property
    def R(self) -> int:
        return int(self.index.shape[0])

    @property
    def K(self) -> int:
        return int(self.labels.shape[1])

    def take(self, rows: np.ndarray) -> RecordColumns:
        """The records at positions ``rows`` of this group."""
        return RecordColumns(
            n=self.n, p=self.p, d=self.d, g=self.g, index=self.index[rows], prefix=self.prefix[rows],
            target=self.target[rows], address=self.address[rows], payload=self.payload[rows],
            labels=self.labels[rows], exp=tuple(self.exp[i] for i in np.asarray(rows).tolist()),
        )  # fmt: skip

    def samplings(self) -> np.ndarray:
        """Each record's sampling mode (the one rule; ``gf2env.agents.harness.grid.sampling_of`` applies it to
        one record): named in ``exp``; else ``"diagnostic"`` for the all-ones payload then the
        one-bit-cleared ones, ``"adversarial"`` for one payload weight throughout (K > 1),
        ``"unknown"`` otherwise."""
        out = np.full(self.R, "unknown", dtype=object)
        head = min(self.K, self.p + 1)
        pattern = np.ones((self.p + 1, self.p), dtype=np.uint8)
        pattern[np.arange(1, self.p + 1), np.arange(self.p)] = 0
        weights = self.payload.sum(axis=2)
        if self.K > 1:
            out[(weights == weights[:, :1]).all(axis=1)] = "adversarial"
        if head > 1:
            out[(self.payload[:, :head] == pattern[:head]).all(axis=(1, 2))] = "diagnostic"
        for row, exp in enumerate(self.exp):
            named = [mode for mode in SAMPLING_MODES if mode in exp]
            if len(named) == 1:
                out[row] = named[0]
        return out

    def step_batch(self) -> StepBatch:
        """The records as one batch (what :meth:`StepBatch.from_records` gives, from arrays)."""
        return StepBatch.from_supports(
            self.p, self.d, self.prefix, self.address, self.payload, self.labels, self.target
        )

    def recomputed_labels(self) -> np.ndarray:
        """(R, K) labels evaluated from each record's prefix and target on its samples (one numpy
        pass; :meth:`Record.recomputed_labels` for all rows): oracle data has them equal ``labels``."""
        return labels_from_terms(self.address, self.payload, self.prefix, self.target)

    def record(self, row: int) -> Record:
        """Record ``row`` as a :class:`~gf2env.records.record.Record`."""
        return Record(
            n=self.n,
            p=self.p,
            d=self.d,
            prefix=tuple(map(tuple, self.prefix[row].tolist())),
            target=tuple(self.target[row].tolist()),
            address=self.address[row],
            payload=self.payload[row],
            labels=self.labels[row],
            exp=self.exp[row],
        )

    def records(self) -> LazyRecords:
        """The records as a sequence that builds each :class:`Record` when it is read."""
        return LazyRecords(self)


class LazyRecords(Sequence[Record]):
    """The records of a :class:`RecordColumns`, each built on access (nothing is built up front)."""

    def __init__(self, columns: RecordColumns) -> None:
        self.columns = columns

    def __len__(self) -> int:
        return self.columns.R

    @overload
    def __getitem__(self, i: int) -> Record: ...
    @overload
    def __getitem__(self, i: slice) -> list[Record]: ...
    def __getitem__(self, i: int | slice) -> Record | list[Record]:
        if isinstance(i, slice):
            return [self.columns.record(j) for j in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self.columns.record(i % len(self))

    def __iter__(self) -> Iterator[Record]:
        return (self.columns.record(j) for j in range(len(self)))


def shapes(n: np.ndarray, p: np.ndarray, d: np.ndarray, g: np.ndarray, K: np.ndarray) -> Iterator[np.ndarray]:
    """The rows of each distinct ``(n, p, d, g, K)``, shapes in order of first appearance."""
    keys = np.stack([n, p, d, g, K], axis=1)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    for shape in np.argsort(first, kind="stable"):
        yield np.flatnonzero(inverse == shape)


def check_trials(groups: Sequence[RecordColumns]) -> None:
    """Refuse records that would count wrongly as trials: a record without samples (no evidence,
    a "K=0" setting), labels that its prefix and target do not give (not oracle data), and the
    same record twice (one trial counted twice). Checked on whole arrays, group by group; the
    error names the records' positions in the file."""
    for c in groups:
        if c.R and c.K == 0:
            raise RecordFormatError(
                f"Record {int(c.index[0])} has no samples (K=0): a step without evidence is no trial; "
                "drop the record (or write it again with samples)."
            )
    for c in groups:
        recomputed = c.recomputed_labels()
        wrong = np.flatnonzero((recomputed != c.labels).any(axis=1))
        if wrong.size:
            row = int(wrong[0])
            sample = int(np.flatnonzero(recomputed[row] != c.labels[row])[0])
            raise RecordFormatError(
                f"Record {int(c.index[row])}: the label of sample {sample} is not what its prefix and "
                f"target give ({wrong.size} such record(s) in all); the file is not oracle data: check "
                "the bit order of x and the labels y, or write the records again with gf2 generate."
            )
    for c in groups:
        keys = np.concatenate(
            [
                np.ascontiguousarray(c.prefix.reshape(c.R, -1)).view(np.uint8),
                np.ascontiguousarray(c.target).view(np.uint8),
                c.address.reshape(c.R, -1),
                c.payload.reshape(c.R, -1),
                c.labels,
            ],
            axis=1,
        )
        seen: dict[bytes, int] = {}  # a row's digest -> its first row (sorting whole rows is slower)
        repeats = []
        for row in range(c.R):
            first = seen.setdefault(blake2b(keys[row].tobytes(), digest_size=16).digest(), row)
            if first != row and np.array_equal(keys[first], keys[row]):
                repeats.append((int(c.index[first]), int(c.index[row])))
        if repeats:
            was, row = min(repeats, key=lambda pair: pair[1])
            raise RecordFormatError(
                f"Records {was} and {row} are the same record ({len(repeats)} repeat(s) in all): each "
                "would count as a trial of its own; drop the repeats."
            )


def columns_from_records(records: Sequence[Record]) -> list[RecordColumns]:
    """Records (of any shapes) as columns, one entry a shape."""
    if not records:
        return []
    shape = np.array([(r.n, r.p, r.d, r.g, r.K) for r in records], dtype=np.int64)
    out = []
    for rows in shapes(*shape.T):
        group = [records[i] for i in rows]
        r0 = group[0]
        k = r0.d - 1
        out.append(
            RecordColumns(
                n=r0.n, p=r0.p, d=r0.d, g=r0.g, index=rows.astype(np.int64),
                prefix=np.array([r.prefix for r in group], dtype=np.int64).reshape(len(group), r0.g, k),
                target=np.array([r.target for r in group], dtype=np.int64).reshape(len(group), k),
                address=np.stack([r.address for r in group]).astype(np.uint8),
                payload=np.stack([r.payload for r in group]).astype(np.uint8),
                labels=np.stack([r.labels for r in group]).astype(np.uint8),
                exp=tuple(r.exp for r in group),
            )
        )  # fmt: skip
    return out


def records_in_file_order(groups: Sequence[RecordColumns]) -> list[Record]:
    """The records of all groups as :class:`Record` objects, in file order."""
    total = sum(c.R for c in groups)
    out: list[Record | None] = [None] * total
    for c in groups:
        for row, i in enumerate(c.index.tolist()):
            out[i] = c.record(row)
    assert all(r is not None for r in out)
    return out  # type: ignore[return-value]


GENERATION_CHUNK = 4096  # records drawn at once (their uniforms are held in memory together)


def _check_trials_count(trials: int) -> int:
    """``trials`` records a depth: an integer >= 1 (a typed error naming the fix otherwise)."""
    if isinstance(trials, bool) or not isinstance(trials, (int, np.integer)) or trials < 1:
        raise GF2ConfigError(f"trials={trials!r} is not an integer >= 1; pass 1 or more records a depth.")
    return int(trials)


def generate_columns(
    config: TaskConfig, g: int, trials: int, seed: int, n: int | None = None
) -> RecordColumns:
    """Records ``0 .. trials-1`` at depth ``g`` as columns, bit for bit those of
    :func:`gf2env.records.record.generate_record`: each record's generator draws its uniforms in turn, and
    the supports, payloads and labels are computed for all of them at once."""
    c = config
    n = c.n if n is None else n
    trials = _check_trials_count(trials)
    if not 0 <= g < n:
        raise GF2ConfigError(f"depth g={g} is outside [0, n) = [0, {n}); the next term must exist.")
    parts = []
    for lo in range(0, trials, GENERATION_CHUNK):
        T = min(GENERATION_CHUNK, trials - lo)
        u_terms = np.empty((T, n, c.p))
        u_step = np.empty((T, c.K, n + c.p))
        for t in range(T):
            rng = record_rng(seed, g, lo + t)
            rng.random(out=u_terms[t])  # draw_instance's draw, then draw_evidence's
            rng.random(out=u_step[t])
        supports = np.sort(np.argsort(u_terms, axis=2)[:, :, : c.k], axis=2)
        address, payload, labels = evidence_from_uniforms(
            u_step, np.full(T, g), supports_to_masks(supports), c
        )
        parts.append((supports, address, payload, labels))
    supports, address, payload, labels = (np.concatenate(arrays) for arrays in zip(*parts, strict=True))
    return RecordColumns(
        n=n, p=c.p, d=c.d, g=g, index=np.arange(trials, dtype=np.int64), prefix=supports[:, :g],
        target=supports[:, g], address=address, payload=payload, labels=labels, exp=("grid",) * trials,
    )  # fmt: skip


def _episode_steps(config: TaskConfig, seeds: Sequence[int], depths: np.ndarray) -> Buffers:
    """Sub-env ``i`` of a ``GF2Recon-v1`` batch reset with ``seeds[i]`` and walked in ``reveal`` mode
    to depth ``depths[i]``: its circuit and the evidence it is shown there (the stream's
    ``depths[i]``-th draw of the episode), all sub-envs in one compiled call."""
    count = len(seeds)
    idx = np.arange(count)
    stream = PhiloxStream(config, count)
    out = Buffers(config, count)
    stream.begin(idx, [np.random.default_rng(s) for s in seeds])  # the key gymnasium's np_random(s) gives
    stream.instances(idx, out)
    stream.seek(idx, depths)
    stream.evidence(idx, np.asarray(depths, dtype=np.int64), out)
    return out


def generate_episode_columns(config: TaskConfig, g: int, trials: int, seed: int) -> RecordColumns:
    """Step ``g`` of episodes ``0 .. trials-1`` of ``seed`` as columns: row ``e`` is what
    ``gym.make("GF2Recon-v1", p, d, n, K, sampling, w, step_mode="reveal")`` shows at depth ``g``
    after ``reset(seed=episode_seed(seed, e))`` (every step reveals the term, whatever the answer).
    The instances have ``config.n`` terms, one instance an episode at every depth; ``exp`` names
    the episode (:func:`gf2env.records.record.episode_exp`)."""
    c = config
    trials = _check_trials_count(trials)
    if not 0 <= g < c.n:
        raise GF2ConfigError(
            f"depth g={g} is outside [0, n) = [0, {c.n}); pass a depth below n or more terms."
        )
    parts = []
    for lo in range(0, trials, GENERATION_CHUNK):
        T = min(GENERATION_CHUNK, trials - lo)
        out = _episode_steps(c, [episode_seed(seed, e) for e in range(lo, lo + T)], np.full(T, g))
        parts.append((out.supports, out.address, out.payload, out.labels))
    supports, address, payload, labels = (np.concatenate(arrays) for arrays in zip(*parts, strict=True))
    supports = supports.astype(np.int64)
    return RecordColumns(
        n=c.n, p=c.p, d=c.d, g=g, index=np.arange(trials, dtype=np.int64), prefix=supports[:, :g],
        target=supports[:, g], address=address.astype(np.uint8), payload=payload.astype(np.uint8),
        labels=labels.astype(np.uint8), exp=tuple(episode_exp(seed, e, c.sampling) for e in range(trials)),
    )  # fmt: skip


def generate_episode(config: TaskConfig, episode: int, seed: int) -> list[Record]:
    """Episode ``episode`` of ``seed`` as its ``config.n`` records, depths ``0 .. n-1``: record ``g`` is
    row ``episode`` of :func:`generate_episode_columns` at depth ``g`` (one call for all depths)."""
    c = config
    out = _episode_steps(c, [episode_seed(seed, episode)] * c.n, np.arange(c.n))
    terms = tuple(map(tuple, out.supports[0].astype(np.int64).tolist()))
    exp = episode_exp(seed, episode, c.sampling)
    return [
        Record(
            n=c.n,
            p=c.p,
            d=c.d,
            prefix=terms[:g],
            target=terms[g],
            address=out.address[g].astype(np.uint8),
            payload=out.payload[g].astype(np.uint8),
            labels=out.labels[g].astype(np.uint8),
            exp=exp,
        )
        for g in range(c.n)
    ]
