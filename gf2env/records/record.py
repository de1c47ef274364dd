"""Records in the paper's JSON format (docs/design.md §5) and deterministic dataset generation.

A record is ``{"exp", "n", "p", "d_max", "g", "prefix", "target", "samples"}``; each sample is
``{"x": hex, "y": 0|1}``, ``x`` being the ``n + p`` bits ``(a, v)`` read most significant first
(``a_1`` is the top bit), and payload indices 0-based within ``v``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from gf2env.errors import GF2ConfigError, InvalidActionError, RecordFormatError
from gf2env.task.combinatorics import MAX_PAYLOAD_BITS, pack_bits, supports_to_masks
from gf2env.task.oracle import (
    Evidence,
    Instance,
    TaskConfig,
    circuit_labels,
    draw_evidence,
    draw_instance,
)
from gf2env.task.rules import check_support


@dataclass(frozen=True)
class Record:
    """One step of one instance: the prefix, the next term and the samples offered for it."""

    n: int
    p: int
    d: int
    prefix: tuple[tuple[int, ...], ...]
    target: tuple[int, ...]
    address: np.ndarray  # (K, n) uint8
    payload: np.ndarray  # (K, p) uint8
    labels: np.ndarray  # (K,) uint8
    exp: str = "grid"

    @property
    def g(self) -> int:
        return len(self.prefix)

    @property
    def K(self) -> int:
        return int(self.labels.shape[0])

    @property
    def evidence(self) -> Evidence:
        return Evidence(g=self.g, address=self.address, payload=self.payload, labels=self.labels)

    def instance(self) -> Instance:
        """The circuit restricted to the ``g + 1`` terms this record knows (prefix, then target)."""
        return Instance.from_supports(np.array([*self.prefix, self.target]), self.p, self.d)

    def recomputed_labels(self) -> np.ndarray:
        """Labels evaluated from the prefix and target on the samples (they equal ``labels``)."""
        prefix = np.array(self.prefix, dtype=np.int64).reshape(self.g, self.d - 1)
        return labels_from_terms(self.address, self.payload, prefix, np.array(self.target, dtype=np.int64))

    @classmethod
    def from_step(cls, instance: Instance, evidence: Evidence, exp: str = "grid") -> Record:
        g = evidence.g
        return cls(
            n=instance.n,
            p=instance.p,
            d=instance.d,
            prefix=tuple(instance.term(j) for j in range(g)),
            target=instance.term(g),
            address=evidence.address,
            payload=evidence.payload,
            labels=evidence.labels,
            exp=exp,
        )

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        bits = np.concatenate([self.address, self.payload], axis=1)
        return {
            "exp": self.exp,
            "n": self.n,
            "p": self.p,
            "d_max": self.d,
            "g": self.g,
            "prefix": [list(s) for s in self.prefix],
            "target": list(self.target),
            "samples": [
                {"x": x, "y": int(y)} for x, y in zip(_hex_rows(bits), self.labels.tolist(), strict=True)
            ],
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Record:
        missing = {"n", "p", "d_max", "g", "prefix", "target", "samples"} - set(obj)
        if missing:
            raise RecordFormatError(f"Record lacks the fields {sorted(missing)}.")
        n, p, d, g = (_count(obj, key) for key in ("n", "p", "d_max", "g"))
        if not 1 <= p <= MAX_PAYLOAD_BITS:
            raise RecordFormatError(f"Record has p={p}; the payload has 1 to {MAX_PAYLOAD_BITS} bits.")
        if not 2 <= d <= p + 1:
            raise RecordFormatError(f"Record has d_max={d}; need 2 <= d_max <= p+1={p + 1}.")
        for key in ("prefix", "samples"):
            if not isinstance(obj[key], list):
                raise RecordFormatError(f"Record's {key}={short_repr(obj[key])} is not a list.")
        exp = obj.get("exp", "grid")
        if not isinstance(exp, str):
            raise RecordFormatError(f"Record's exp={short_repr(exp)} is not a string.")
        try:
            prefix = _terms(obj["prefix"], p, d - 1)
        except InvalidActionError as err:
            raise RecordFormatError(f"Record with g={g} has an invalid term in its prefix: {err}") from err
        try:
            target = check_support(obj["target"], p, d - 1)
        except InvalidActionError as err:
            raise RecordFormatError(f"Record with g={g} has an invalid term as its target: {err}") from err
        if len(prefix) != g:
            raise RecordFormatError(f"Record says g={g} but its prefix has {len(prefix)} terms.")
        if not g < n:
            raise RecordFormatError(f"Record has g={g} but only n={n} address bits; need g < n.")
        bits, labels = _sample_bits(obj["samples"], n, p)
        return cls(
            n=n,
            p=p,
            d=d,
            prefix=prefix,
            target=target,
            address=bits[:, :n],
            payload=bits[:, n:],
            labels=labels,
            exp=exp,
        )


def labels_from_terms(
    address: np.ndarray, payload: np.ndarray, prefix: np.ndarray, target: np.ndarray
) -> np.ndarray:
    """The labels that the known terms (``prefix`` supports ``(..., g, d - 1)``, then ``target``
    ``(..., d - 1)``) give on the samples (``address`` ``(..., K, >= g + 1)``, ``payload`` ``(..., K, p)``):
    of one record or, with a leading axis, of many. Oracle data has them equal its labels."""
    terms = np.concatenate([prefix, target[..., None, :]], axis=-2)
    return circuit_labels(address, pack_bits(payload), supports_to_masks(terms))


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _count(obj: dict[str, Any], key: str) -> int:
    """The record's field ``key``: a JSON integer >= 0 (no bools, floats, strings or nulls)."""
    value = obj[key]
    if type(value) is not int or value < 0:
        raise RecordFormatError(f"Record's {key}={short_repr(value)} is not a non-negative integer.")
    return value


def _hex_rows(bits: np.ndarray) -> list[str]:
    """Each row of ``bits`` as the paper's hex string (most significant first, ``hex()``'s form)."""
    rows, width = bits.shape
    pad = -width % 8
    packed = np.packbits(
        np.concatenate([np.zeros((rows, pad), np.uint8), bits.astype(np.uint8)], axis=1), axis=1
    )
    size = packed.shape[1]
    data = packed.tobytes()
    return [hex(int.from_bytes(data[i * size : (i + 1) * size], "big")) for i in range(rows)]


_NIBBLES = np.full(256, 255, dtype=np.uint8)  # ASCII hex digit -> its value; 255: not a hex digit
for _i, _c in enumerate("0123456789abcdef"):
    _NIBBLES[ord(_c)] = _NIBBLES[ord(_c.upper())] = _i


def _terms(terms: Any, p: int, k: int) -> tuple[tuple[int, ...], ...]:
    """The prefix's terms as sorted tuples: one array check when every term is well formed, else
    :func:`check_support` on each (whose error names the first bad one)."""
    if isinstance(terms, list) and terms and k > 0 and all(type(t) is list and len(t) == k for t in terms):
        if set(map(type, chain.from_iterable(terms))) == {int}:  # no bools, floats or strings
            ints = np.sort(np.array(terms, dtype=np.int64), axis=1)
            if ints.min() >= 0 and ints.max() < p and bool((np.diff(ints, axis=1) > 0).all()):
                return tuple(map(tuple, ints.tolist()))
    return tuple(check_support(s, p, k) for s in terms)


def _sample_bits(samples: Any, n: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    """The samples' ``(K, n + p)`` bits (``x`` read most significant first) and ``(K,)`` labels,
    decoded as one array; the errors name the sample."""
    width = n + p
    digits = (width + 3) // 4
    try:
        xs = [s["x"] for s in samples]
        ys = [s["y"] for s in samples]
    except (KeyError, TypeError):
        j, bad = next(
            (j, s) for j, s in enumerate(samples) if not (isinstance(s, dict) and {"x", "y"} <= set(s))
        )
        raise RecordFormatError(
            f"Sample {j} is {short_repr(bad)}; every sample needs 'x' (a hex string) and 'y' (0 or 1)."
        ) from None
    padded = []
    for x in xs:
        if not isinstance(x, str):
            raise RecordFormatError(f"Sample x={x!r} is not a hex string such as '0x5fc'.")
        h = (x[2:] if x[:2] in ("0x", "0X") else x).lstrip("0")
        if len(h) > digits:
            raise RecordFormatError(f"Sample x={x} has more than n+p={width} bits for n={n}, p={p}.")
        padded.append(h.rjust(digits, "0"))
    text = "".join(padded)
    nibbles = _NIBBLES[np.frombuffer(text.encode("utf-8"), dtype=np.uint8)]
    if nibbles.size != len(xs) * digits or (nibbles == 255).any():
        bad = next(
            x for x, h in zip(xs, padded, strict=True) if not all(c in "0123456789abcdefABCDEF" for c in h)
        )
        raise RecordFormatError(f"Sample x={bad!r} is not a hex string such as '0x5fc'.")
    bits = np.unpackbits(nibbles.reshape(len(xs), digits, 1), axis=2)[:, :, 4:].reshape(len(xs), 4 * digits)
    extra = 4 * digits - width
    if extra and bits[:, :extra].any():
        bad = xs[int(np.flatnonzero(bits[:, :extra].any(axis=1))[0])]
        raise RecordFormatError(f"Sample x={bad} has more than n+p={width} bits for n={n}, p={p}.")
    for j, y in enumerate(ys):
        if type(y) is not int or y not in (0, 1):  # a JSON true/false is not a label
            raise RecordFormatError(f"Sample {j}'s label y={short_repr(y)} is not 0 or 1 (the integer).")
    return np.ascontiguousarray(bits[:, extra:]), np.array(ys, dtype=np.uint8).reshape(len(ys))


def write_records(path: str | Path, records: Iterable[Record]) -> int:
    """Write records as one JSON array (the paper's layout); returns how many were written."""
    objs = [r.to_json() for r in records]
    Path(path).write_text(json.dumps(objs) + "\n")
    return len(objs)


# ---------------------------------------------------------------------- generation
#: The most records one command generates into one file or dataset split: about what gf2's readers
#: take in one file (:data:`gf2env.records.files.MAX_RECORDS_BYTES`, 4 GiB: ~10 million records).
MAX_RECORDS = 10_000_000


def check_record_count(count: int, what: str = "trials") -> int:
    """``count`` records (a depth's, or a file's) to generate: at most ``MAX_RECORDS``, a typed error
    naming ``what`` and the fix otherwise (a huge count would be generated for hours, then be too large
    to read back). Whether it is at least 1 is the generator's check (its message names the depth)."""
    if count > MAX_RECORDS:
        raise GF2ConfigError(
            f"{what}: {count} records is more than the {MAX_RECORDS} one file or split may hold (gf2 "
            "reads records files up to 4 GiB); generate fewer, or several files with other --seed."
        )
    return int(count)


def check_seed(seed: Any, what: str = "seed") -> int:
    """``seed`` as an int >= 0, the seeds numpy's ``SeedSequence`` takes (a typed error otherwise)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise GF2ConfigError(f"{what}={seed!r} is not an integer >= 0; pass a seed of 0 or more.")
    return int(seed)


def record_rng(seed: int, g: int, trial: int) -> np.random.Generator:
    """The generator of record ``trial`` at depth ``g``: a pure function of (seed, g, trial)."""
    return np.random.default_rng([check_seed(seed), g, trial])


EPISODE_EXP = re.compile(r"episode (\d+) seed (\d+)(?: |$)")  # what episode_exp writes, read back


def episode_seed(seed: int, episode: int) -> int:
    """The ``reset`` seed of episode ``episode`` of ``seed``: a pure function of the pair.

    It is numpy's ``SeedSequence(seed).spawn(...)[episode]`` (the child of that index, the way numpy
    makes independent streams) condensed to a 128-bit int, so distinct pairs give distinct seeds
    but for a chance of about 2^-128 a pair. ``gym.make("GF2Recon-v1", ...).reset(seed=...)`` with it
    starts the episode that :func:`gf2env.records.columns.generate_episode` writes as records.
    """
    child = np.random.SeedSequence(check_seed(seed), spawn_key=(check_seed(episode, "episode"),))
    return int.from_bytes(child.generate_state(4, np.uint32).tobytes(), "little")


def episode_exp(seed: int, episode: int, sampling: str) -> str:
    """The ``exp`` of an episode's records: ``"episode E seed S SAMPLING"``. It names the sampling
    mode (which :meth:`~gf2env.records.columns.RecordColumns.samplings` reads) and the episode, so a
    reader of a records file regroups the steps of each episode (:func:`episode_of`)."""
    return f"episode {episode} seed {seed} {sampling}"


def episode_of(exp: str) -> tuple[int, int] | None:
    """``(seed, episode)`` of a record whose ``exp`` :func:`episode_exp` wrote; ``None`` for any other."""
    match = EPISODE_EXP.match(exp)
    return None if match is None else (int(match.group(2)), int(match.group(1)))


EpisodeKey = tuple[str, int, int, int, int]  # exp (episode, seed, sampling), n, p, d, K


def group_episodes(records: Iterable[Record]) -> dict[EpisodeKey, list[Record]]:
    """The steps of each episode among ``records`` (a records file's, or an episode grid's cells'):
    ``(exp, n, p, d, K)`` -> its records by depth ascending, episodes in order of first appearance.
    The key tells apart the same episode index of another seed, sampling mode or setting. A record
    whose ``exp`` names no episode, or a depth that an episode holds twice, is a
    :class:`RecordFormatError`."""
    out: dict[EpisodeKey, dict[int, Record]] = {}
    for i, record in enumerate(records):
        if episode_of(record.exp) is None:
            raise RecordFormatError(
                f"Record {i} has exp={short_repr(record.exp)}, not an episode's ('episode E seed S "
                "SAMPLING'); write episodes with gf2 generate --episodes."
            )
        steps = out.setdefault((record.exp, record.n, record.p, record.d, record.K), {})
        if record.g in steps:
            raise RecordFormatError(
                f"Record {i} is a second step at depth {record.g} of {record.exp!r} (n={record.n} "
                f"p={record.p} d={record.d} K={record.K}); an episode has one step a depth: drop the repeat."
            )
        steps[record.g] = record
    return {key: [steps[g] for g in sorted(steps)] for key, steps in out.items()}


def mixed_depth(seed: int, index: int, depths: Sequence[int]) -> int:
    """The depth of item ``index`` of a stream mixing ``depths`` (one drawn uniformly): a pure function
    of ``(seed, index, depths)``. The training prompts and the reasoning-gym items draw depths this way."""
    return int(depths[int(np.random.default_rng([check_seed(seed), index]).integers(len(depths)))])


def generate_record(config: TaskConfig, g: int, trial: int, seed: int, n: int | None = None) -> Record:
    """Record ``trial`` at depth ``g``: a fresh instance of ``n`` terms (default ``config.n``)."""
    n = config.n if n is None else n
    rng = record_rng(seed, g, trial)
    instance = draw_instance(rng, n, config.p, config.d)
    return Record.from_step(instance, draw_evidence(rng, instance, g, config))


def generate_records(
    config: TaskConfig,
    depths: Iterable[int],
    trials: int,
    seed: int,
    n_for_depth: Any = None,
) -> Iterator[Record]:
    """Records for every depth and trial, in (depth, trial) order.

    ``n_for_depth`` maps a depth to the number of terms of its instances (default: ``config.n``);
    the paper's large-depth files use ``lambda g: g + 1``.
    """
    for g in depths:
        n = config.n if n_for_depth is None else int(n_for_depth(g))
        for trial in range(trials):
            yield generate_record(config, g, trial, seed, n=n)
