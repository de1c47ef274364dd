"""Records as Parquet (extra ``parquet``: pyarrow): one row a record, in columns any reader opens.

Columns: ``exp``, ``n``, ``p``, ``d_max``, ``g``, ``prefix`` (the ``g * (d-1)`` indices, term by
term), ``target``, ``bits`` (each sample's ``n + p`` bits ``(a, v)``, ``np.packbits`` row by row)
and ``labels`` (one byte a sample); ``datasets.load_dataset("parquet", data_files=...)`` reads it.
Parquet is columnar, compressed and read without parsing text: the format for large datasets.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gf2env.errors import GF2ConfigError, MissingExtraError, RecordFormatError
from gf2env.records.columns import RecordColumns, shapes
from gf2env.task.combinatorics import MAX_PAYLOAD_BITS

PARQUET_SUFFIXES = (".parquet", ".pq")


def require_pyarrow() -> Any:
    """``(pyarrow, pyarrow.parquet)``, or the error naming the install."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtraError(
            "Parquet files need pyarrow: pip install -e '.[parquet]' (or pip install pyarrow)."
        ) from None
    return pa, pq


def _lists(pa: Any, values: np.ndarray, rows: int, width: int) -> Any:
    """``rows`` lists of ``width`` int8 values each."""
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * width)
    return pa.ListArray.from_arrays(offsets, pa.array(values.reshape(-1), type=pa.int8()))


def _binaries(pa: Any, values: np.ndarray, rows: int, width: int) -> Any:
    """``rows`` binary values of ``width`` bytes each."""
    offsets = pa.py_buffer((np.arange(rows + 1, dtype=np.int32) * width).tobytes())
    data = pa.py_buffer(np.ascontiguousarray(values, dtype=np.uint8).tobytes())
    return pa.Array.from_buffers(pa.binary(), rows, [None, offsets, data])


def write_parquet(path: str | Path, groups: Sequence[RecordColumns]) -> int:
    """Write columns as a Parquet file, one row a record, in file order; returns the rows written."""
    pa, pq = require_pyarrow()
    tables = []
    for c in groups:
        R, K = c.R, c.K
        bits = np.packbits(np.concatenate([c.address, c.payload], axis=2), axis=2).reshape(R, -1)
        per_row = bits.shape[1]
        k = c.d - 1

        tables.append(
            pa.table(
                {
                    "index": pa.array(c.index),
                    "exp": pa.array(list(c.exp), type=pa.string()),
                    "n": pa.array(np.full(R, c.n, dtype=np.int32)),
                    "p": pa.array(np.full(R, c.p, dtype=np.int32)),
                    "d_max": pa.array(np.full(R, c.d, dtype=np.int32)),
                    "g": pa.array(np.full(R, c.g, dtype=np.int32)),
                    "prefix": _lists(pa, c.prefix.astype(np.int8), R, c.g * k),
                    "target": _lists(pa, c.target.astype(np.int8), R, k),
                    "bits": _binaries(pa, bits, R, per_row),
                    "labels": _binaries(pa, c.labels, R, K),
                }
            )
        )
    if not tables:
        raise GF2ConfigError("No records to write; pass at least one.")
    table = pa.concat_tables(tables).sort_by("index").drop(["index"])
    pq.write_table(table, str(path))
    return table.num_rows


_KINDS = {  # each column a records file needs (exp is optional), and what it holds
    "exp": "strings",
    "n": "integers",
    "p": "integers",
    "d_max": "integers",
    "g": "integers",
    "prefix": "lists of integers",
    "target": "lists of integers",
    "bits": "binary",
    "labels": "binary",
}
_KIND_CHECKS = {
    "strings": lambda pa, t: pa.types.is_string(t) or pa.types.is_large_string(t),
    "integers": lambda pa, t: pa.types.is_integer(t),
    "lists of integers": lambda pa, t: (
        (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_integer(t.value_type)
    ),
    "binary": lambda pa, t: pa.types.is_binary(t),
}


def read_parquet(path: Path) -> list[RecordColumns]:
    pa, pq = require_pyarrow()
    try:
        table = pq.read_table(str(path))
    except (OSError, pa.ArrowInvalid) as err:
        raise RecordFormatError(f"{path} is not a readable Parquet file: {err}") from None
    missing = set(_KINDS) - {"exp"} - set(table.column_names)
    if missing:
        raise RecordFormatError(f"Parquet records in {path} lack the columns {sorted(missing)}.")
    for name, kind in _KINDS.items():
        if name not in table.column_names:
            continue
        column = table.column(name)
        if not _KIND_CHECKS[kind](pa, column.type):
            raise RecordFormatError(
                f"Parquet records in {path}: column {name!r} holds {column.type}, not {kind}."
            )
        if column.null_count:
            row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
            raise RecordFormatError(f"Parquet records in {path}: column {name!r} is null at record {row}.")

    def ints(name: str) -> np.ndarray:
        return table.column(name).to_numpy().astype(np.int64)

    def flat(name: str) -> tuple[np.ndarray, np.ndarray]:
        col = table.column(name).combine_chunks()
        return col.offsets.to_numpy().astype(np.int64), col.values.to_numpy().astype(np.int64)

    n, p, d, g = ints("n"), ints("p"), ints("d_max"), ints("g")
    pre_off, pre_vals = flat("prefix")
    tgt_off, tgt_vals = flat("target")
    bit_col = table.column("bits").combine_chunks()
    lab_col = table.column("labels").combine_chunks()
    bit_off = np.frombuffer(bit_col.buffers()[1], dtype=np.int32)[: len(n) + 1].astype(np.int64)
    lab_off = np.frombuffer(lab_col.buffers()[1], dtype=np.int32)[: len(n) + 1].astype(np.int64)
    bit_data = np.frombuffer(bit_col.buffers()[2], dtype=np.uint8)
    lab_data = np.frombuffer(lab_col.buffers()[2], dtype=np.uint8)
    K = np.diff(lab_off)
    exp = table.column("exp").to_pylist() if "exp" in table.column_names else ["grid"] * len(n)
    k = d - 1
    bad = (np.diff(pre_off) != g * k) | (np.diff(tgt_off) != k) | (g >= n) | (g < 0)
    bad |= (p < 1) | (p > MAX_PAYLOAD_BITS) | (d < 2) | (d - 1 > p)
    bad |= np.diff(bit_off) != K * ((n + p + 7) // 8)
    if bad.any():
        raise RecordFormatError(
            f"Parquet record {int(np.flatnonzero(bad)[0])} of {path} has inconsistent sizes (n, p, d_max, g, "
            "the prefix's and target's lengths and the samples' bytes must agree)."
        )
    groups = []
    for rows in shapes(n, p, d, g, K):
        r0 = int(rows[0])
        gn, gp, gd, gg, gK = int(n[r0]), int(p[r0]), int(d[r0]), int(g[r0]), int(K[r0])
        gk, width, per = gd - 1, gn + gp, (gn + gp + 7) // 8
        prefix = np.sort(
            pre_vals[pre_off[rows, None] + np.arange(gg * gk)].reshape(len(rows), gg, gk), axis=-1
        )
        target = np.sort(tgt_vals[tgt_off[rows, None] + np.arange(gk)], axis=-1)
        packed = bit_data[bit_off[rows, None] + np.arange(gK * per)].reshape(len(rows), gK, per)
        bits = np.unpackbits(packed, axis=2)[:, :, :width]
        labels = lab_data[lab_off[rows, None] + np.arange(gK)]
        for name, supports in (("prefix", prefix), ("target", target)):
            if supports.size and (
                supports.min() < 0 or supports.max() >= gp or (np.diff(supports, axis=-1) == 0).any()
            ):
                raise RecordFormatError(
                    f"Parquet records in {path}: a {name} term is out of range or repeats."
                )
        if labels.size and labels.max() > 1:
            raise RecordFormatError(f"Parquet records in {path}: a label is not 0 or 1.")
        groups.append(
            RecordColumns(
                n=gn, p=gp, d=gd, g=gg, index=rows.astype(np.int64), prefix=prefix, target=target,
                address=bits[:, :, :gn], payload=bits[:, :, gn:], labels=labels,
                exp=tuple(exp[i] for i in rows.tolist()),
            )
        )  # fmt: skip
    return groups
