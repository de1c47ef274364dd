"""Files of records: the paper's JSON, JSON Lines and Parquet, read and checked as arrays.

:func:`read_record_columns` reads the paper's JSON (an array of records) and JSON Lines through the
compiled scanner (:mod:`gf2env.records.scan`), every check done on whole arrays; a file the
scanner's plain form does not cover (escapes, floats, unknown keys) or that fails a check is read by
the general path (:meth:`gf2env.records.record.Record.from_json`), which raises the error naming the
record and field. Parquet files (:mod:`gf2env.records.parquet`) are told by their suffix; a dataset
folder's split (:mod:`gf2env.records.hf_dataset`: its ``data/<split>.parquet``, or the folder when it has one
split) is read from its ``record`` column, the records' JSON, by the same scanner.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from gf2env.errors import GF2ConfigError, RecordFormatError
from gf2env.records.columns import RecordColumns, columns_from_records, records_in_file_order, shapes
from gf2env.records.hf_dataset import split_records_json
from gf2env.records.parquet import PARQUET_SUFFIXES, read_parquet
from gf2env.records.record import Record, short_repr
from gf2env.records.scan import decode_hex, scan_records
from gf2env.task.combinatorics import MAX_PAYLOAD_BITS

MAX_RECORDS_BYTES = 4 << 30  # a records file's largest size read (4 GiB: ~10 million records)


def check_records_file(path: Path) -> None:
    """Refuse, at once, a records path that is no regular file (a device such as /dev/zero, a FIFO, a
    socket), or one larger than MAX_RECORDS_BYTES: either would be read until memory runs out."""
    import stat

    status = path.stat()
    if not stat.S_ISREG(status.st_mode):
        raise GF2ConfigError(
            f"{path} is not a regular file (nor a dataset folder); pass a records file (JSON, JSON Lines "
            "or Parquet) or a folder written by gf2 generate --format hf."
        )
    if status.st_size > MAX_RECORDS_BYTES:
        raise GF2ConfigError(
            f"{path} holds {status.st_size} bytes, more than the {MAX_RECORDS_BYTES} a records file "
            "may; split it (gf2 generate writes one file a setting)."
        )


def read_record_columns(path: str | Path) -> list[RecordColumns]:
    """A records file (JSON array, JSON Lines or Parquet) or a dataset split as columns, one entry a
    shape, in the order each shape first appears."""
    path = Path(path)
    if not path.exists():
        raise GF2ConfigError(
            f"There is no records file at {path} (a relative path is read from the working directory); "
            "fix the path, or write one with gf2 generate (a dataset folder also works)."
        )
    if not path.is_dir():
        check_records_file(path)
    data = split_records_json(path)
    if data is None and path.suffix.lower() in PARQUET_SUFFIXES:
        return read_parquet(path)
    if data is None:
        data = path.read_bytes()
    if not data or data.isspace():  # isspace stops at the first other byte: no copy of a large file
        raise RecordFormatError(
            f"{path} is empty; a records file holds a JSON array of records, or one a line."
        )
    scanned, _ = scan_records(data)
    groups = None if scanned is None else _columns_from_scan(data, scanned)
    if groups is None:  # the general path: reads what the scanner does not cover, or names the error
        return columns_from_records(_read_json_records(data, path))
    return groups


def _read_json_records(data: bytes, source: str | Path = "the records file") -> list[Record]:
    """The records of a JSON array or of JSON Lines (blank lines skipped), read in file order; the
    first problem raises the error naming ``source``, the record (in JSON Lines, its line) and the field."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RecordFormatError(
            f"{source} is not UTF-8 text: byte {err.start} is {data[err.start]:#04x}."
        ) from None
    items = _array_items(text, source) if text.lstrip().startswith("[") else _line_items(text, source)
    out = []
    for place, obj in items:
        if not isinstance(obj, dict):
            raise RecordFormatError(f"{place} is not a JSON object: {short_repr(obj)}.")
        try:
            out.append(Record.from_json(obj))
        except RecordFormatError as err:
            raise RecordFormatError(f"{place}: {err}") from None
    return out


def _line_items(text: str, source: str | Path) -> Iterator[tuple[str, Any]]:
    """``(where, value)`` of each JSON Lines line that is not blank; where: "FILE, line L: Record i"."""
    index = 0
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise RecordFormatError(
                f"{source}, line {number}, is not JSON (column {err.colno}: {err.msg})."
            ) from None
        except RecursionError:
            message = f"{source}, line {number}, is nested too deeply to be a record."
            raise RecordFormatError(message) from None
        yield f"{source}, line {number}: Record {index}", obj
        index += 1


_SPACE = re.compile(r"[ \t\n\r]*")


def _array_items(text: str, source: str | Path) -> Iterator[tuple[str, Any]]:
    """``(where, value)`` of each item of the JSON array ``text``, parsed one by one so that an error
    names its record; where: "FILE: Record i"."""
    decoder = json.JSONDecoder()

    def at(i: int) -> str:
        return f"line {text.count(chr(10), 0, i) + 1}, column {i - text.rfind(chr(10), 0, i)}"

    def skip(i: int) -> int:
        return _SPACE.match(text, i).end()  # type: ignore[union-attr]

    index, i = 0, skip(text.index("[") + 1)
    if text.startswith("]", i):
        i += 1
    else:
        while True:
            try:
                obj, i = decoder.raw_decode(text, i)
            except json.JSONDecodeError as err:
                raise RecordFormatError(
                    f"{source}: Record {index} is not JSON ({at(err.pos)}: {err.msg})."
                ) from None
            except RecursionError:
                message = f"{source}: Record {index} is nested too deeply to be a record."
                raise RecordFormatError(message) from None
            yield f"{source}: Record {index}", obj
            i = skip(i)
            if text.startswith(",", i):
                index, i = index + 1, skip(i + 1)
            elif text.startswith("]", i):
                i += 1
                break
            else:
                raise RecordFormatError(f"{source}: after Record {index}, expected ',' or ']' ({at(i)}).")
    if skip(i) < len(text):
        raise RecordFormatError(f"{source}: data after the array ({at(skip(i))}).")


def _columns_from_scan(data: bytes, s: Any) -> list[RecordColumns] | None:
    """Checked columns of scanned records, or ``None`` where any check fails (the general path
    then reports it with the record and field)."""
    if s.R == 0:
        return []
    n, p, d, g, K = s.n, s.p, s.d, s.g, s.sample_count
    ok = (p >= 1) & (p <= MAX_PAYLOAD_BITS) & (d >= 2) & (d - 1 <= p) & (g < n) & (s.prefix_terms == g)
    ok &= s.target_len == d - 1
    term_owner = np.repeat(np.arange(s.R), s.prefix_terms)
    if not ok.all() or not (s.term_len == (d - 1)[term_owner]).all() or not np.isin(s.y, (0, 1)).all():
        return None
    b = np.frombuffer(data, dtype=np.uint8)
    groups = []
    for rows in shapes(n, p, d, g, K):
        r0 = int(rows[0])
        gn, gp, gd, gg, gK = int(n[r0]), int(p[r0]), int(d[r0]), int(g[r0]), int(K[r0])
        k = gd - 1
        term_ids = s.prefix_start[rows, None] + np.arange(gg)
        prefix = np.sort(s.ints[s.term_start[term_ids][..., None] + np.arange(k)], axis=-1)
        target = np.sort(s.ints[s.target_start[rows, None] + np.arange(k)], axis=-1)
        for supports in (prefix, target):
            if supports.size and (supports.max() >= gp or (np.diff(supports, axis=-1) == 0).any()):
                return None
        sample_ids = (s.sample_start[rows, None] + np.arange(gK)).reshape(-1)
        bits = np.empty((sample_ids.size, gn + gp), dtype=np.uint8)
        if decode_hex(b, s.x_start[sample_ids], s.x_end[sample_ids], gn + gp, bits) >= 0:
            return None
        bits = bits.reshape(len(rows), gK, gn + gp)
        try:
            exp = tuple(
                data[a:e].decode("utf-8") if a >= 0 else "grid"
                for a, e in zip(s.exp_start[rows].tolist(), s.exp_end[rows].tolist(), strict=True)
            )
        except UnicodeDecodeError:
            return None
        groups.append(
            RecordColumns(
                n=gn, p=gp, d=gd, g=gg, index=rows.astype(np.int64), prefix=prefix, target=target,
                address=bits[:, :, :gn], payload=bits[:, :, gn:],
                labels=s.y[sample_ids].astype(np.uint8).reshape(len(rows), gK), exp=exp,
            )
        )  # fmt: skip
    return groups


def read_records(path: str | Path) -> list[Record]:
    """Read a records file (the paper's JSON array, JSON Lines or Parquet) or a dataset split as
    :class:`Record` objects in file order."""
    return records_in_file_order(read_record_columns(path))
