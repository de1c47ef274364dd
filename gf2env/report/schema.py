"""The CSV tables gf2env writes, each column named and typed once, and the typed cell converters.

=============== ====================================== =============================================
table           written by                             one row is
=============== ====================================== =============================================
``RESULTS``     :func:`~gf2env.report.results.write_results_csv`  an agent's answer at one record
``SUMMARY``     :func:`~gf2env.report.results.write_summary_csv`  an agent at one setting and depth
``D_CURVE``     :meth:`~gf2env.report.d_curve.DCurve.write_csv`   mean γ of D knowing k of g terms
``DEPTH_COUNTS`` :meth:`~gf2env.report.fit.DepthCounts.write_csv` an agent's successes at a depth
``FITS``        :func:`~gf2env.report.fit.write_fits_csv`         an effective-prefix fit
=============== ====================================== =============================================

The training loops' ``gamma.csv`` is ``SUMMARY`` with a few run columns around it (``gf2env.train.gamma``).
"""

from __future__ import annotations

import csv
import math
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gf2env.errors import GF2ConfigError, RecordFormatError

ErrorType = Callable[[str], Exception]


@dataclass(frozen=True)
class Column:
    """A named, typed column (``int``, ``float`` or ``str``); ``optional`` cells may be blank (a
    blank number reads back as ``None``, a blank string as ``""``). An ``added`` column came after
    files were first written: a file or row without it reads as if its cells were blank. A ``flag`` is
    an ``int`` column of 0 and 1 that also takes booleans (:func:`to_flag`)."""

    name: str
    kind: type
    optional: bool = False
    added: bool = False
    flag: bool = False

    def __post_init__(self) -> None:
        assert self.optional or not self.added, f"column {self.name}: an added column is optional"


@dataclass(frozen=True)
class Table:
    """A CSV table: its columns, in order."""

    kind: str
    columns: tuple[Column, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def required(self) -> tuple[str, ...]:
        """The names of the columns every file and row has (all but the ``added`` ones)."""
        return tuple(c.name for c in self.columns if not c.added)

    def of(self, kind: type) -> tuple[str, ...]:
        """The names of the columns of type ``kind``."""
        return tuple(c.name for c in self.columns if c.kind is kind)

    def around(self, kind: str, before: Sequence[Column] = (), after: Sequence[Column] = ()) -> Table:
        """This table with extra columns before and after (e.g. a training log of summaries)."""
        return Table(kind, (*before, *self.columns, *after))

    def parse(
        self, row: Mapping[str, Any], where: str, error: ErrorType = RecordFormatError
    ) -> dict[str, Any]:
        """``row``'s columns with their types restored (see :class:`Column` for blank cells)."""
        out: dict[str, Any] = {}
        for col in self.columns:
            value = row.get(col.name) if col.added else row[col.name]
            if col.kind is str:
                out[col.name] = to_str(value, col.name, where, error, required=not col.optional)
            elif col.optional and is_blank(value):
                out[col.name] = None
            elif col.flag:
                out[col.name] = to_flag(value, col.name, where, error)
            elif col.kind is int:
                out[col.name] = to_int(value, col.name, where, error)
            elif col.kind is float:
                out[col.name] = to_float(value, col.name, where, error)
            else:
                raise AssertionError(f"column {col.name} has no converter for {col.kind}")
        return out


#: What a step cost the agent that answered it (blank: unknown). Per record, averaged over its samples
#: where an LLM answers a record several times; see :mod:`gf2env.report.results` for each column.
COMPUTE = (
    Column("wall_ms", float, optional=True, added=True),
    Column("model_ms", float, optional=True, added=True),
    Column("prompt_tokens", float, optional=True, added=True),
    Column("completion_tokens", float, optional=True, added=True),
    Column("sandbox_runs", float, optional=True, added=True),
    Column("sandbox_ms", float, optional=True, added=True),
)
COMPUTE_COLUMNS = tuple(c.name for c in COMPUTE)
#: What compute can be measured in (plots, tables): the compute columns, and prompt + completion tokens.
COMPUTE_MEASURES = (*COMPUTE_COLUMNS, "total_tokens")

RESULTS = Table(
    "results",
    (
        Column("agent", str),
        Column("source", str, optional=True),  # "grid", or the records file's name
        Column("sampling", str),
        Column("p", int),
        Column("d", int),
        Column("K", int),
        Column("n", int),
        Column("g", int),
        Column("trial", int),
        Column("seed", int, optional=True),  # blank for records files
        Column("gamma", float),
        Column("correct", int, flag=True),
        Column("action", int),
        Column("target", int),
        Column("num_candidates", int),
        *COMPUTE,
    ),
)

SUMMARY_KEYS = ("agent", "sampling", "p", "d", "K", "g")
SUMMARY = Table(
    "summary",
    (
        Column("agent", str),
        Column("sampling", str),
        Column("p", int),
        Column("d", int),
        Column("K", int),
        Column("g", int),
        Column("trials", int),
        Column("gamma_mean", float),
        Column("gamma_lo", float),
        Column("gamma_hi", float),
        Column("accuracy", float),
        Column("accuracy_lo", float),
        Column("accuracy_hi", float),
        Column("chance", float),
        Column("level", float),
        *COMPUTE,  # the group's mean of each (blank where none of its rows has it)
    ),
)

D_CURVE = Table("D curve", (Column("g", int), Column("k", int), Column("gamma", float)))

DEPTH_COUNTS = Table(
    "depth counts",
    (
        Column("agent", str, optional=True),
        Column("g", int),
        Column("successes", float),
        Column("trials", int),
    ),
)

FITS = Table(
    "fits",
    (
        Column("agent", str, optional=True),
        # The setting fitted and what counted as success (blank in files written before them).
        Column("sampling", str, optional=True, added=True),
        Column("p", int, optional=True, added=True),
        Column("d", int, optional=True, added=True),
        Column("K", int, optional=True, added=True),
        Column("value", str, optional=True, added=True),  # "gamma" or "correct"
        Column("method", str),  # "interpolated" (gf2env's real-valued k) or "paper" (integer k)
        Column("u", float),
        Column("v", float),
        Column("loglik_proportional", float),
        Column("loglik_constant", float),
        Column("aic_proportional", float),
        Column("aic_constant", float),
        Column("delta_aic", float),
        Column("preferred", str),
        Column("depths", str),  # space-separated
        Column("total_trials", int),
    ),
)


# ------------------------------------------------------------------------------------- cells


def is_blank(value: Any) -> bool:
    """An empty cell: ``None``, a blank string or NaN."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def to_int(value: Any, column: str, where: str, error: ErrorType = GF2ConfigError) -> int:
    """A cell as an int (integral floats and integer strings too), else ``error``. A boolean is not a
    count or a depth: it is refused here (a 0/1 column is a flag, :func:`to_flag`)."""
    if isinstance(value, (bool, np.bool_)):
        raise error(f"{where}: {column}={value!r} is a boolean; give {column} as an int.")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise error(f"{where}: {column}={value!r} is not an integer; give {column} as an int.")


def to_flag(value: Any, column: str, where: str, error: ErrorType = GF2ConfigError) -> int:
    """A 0/1 cell as an int: ``True``/``False``, the numbers 0 and 1, or the texts ``0``, ``1``,
    ``true``, ``false`` (any case), else ``error``."""
    number = value
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, str):
        text = value.strip().lower()
        flag = {"true": 1, "false": 0}.get(text)
        if flag is not None:
            return flag
        try:
            number = float(text)
        except ValueError:
            pass
    if isinstance(number, (int, np.integer, float, np.floating)) and number in (0, 1):
        return int(number)
    raise error(f"{where}: {column}={value!r} is not 0 or 1; give {column} as 1/0 or True/False.")


def to_float(value: Any, column: str, where: str, error: ErrorType = GF2ConfigError) -> float:
    """A cell as a finite float, else ``error``."""
    try:
        out = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise error(f"{where}: {column}={value!r} is not a number; give {column} as a float.") from None
    if not math.isfinite(out):
        raise error(f"{where}: {column}={value!r} is not finite; give a finite {column}.")
    return out


def to_str(value: Any, column: str, where: str, error: ErrorType, required: bool = True) -> str:
    """A cell as a string (``None``/NaN are empty); a required one must not be blank."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        value = ""
    out = str(value)
    if required and not out.strip():
        raise error(f"{where}: {column} is empty; give a non-empty {column} string.")
    return out


def format_cell(value: Any) -> str:
    """How a value is written: floats in full precision (they round-trip), ``None`` blank."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def missing(keys: Iterable[str], columns: Sequence[str]) -> list[str]:
    """The ``columns`` not among ``keys``, in column order."""
    present = set(keys)
    return [c for c in columns if c not in present]


MAX_TABLE_BYTES = 1 << 30  # a results table of ~5 million rows; a larger "table" is not one of ours


def check_table_file(path: str | Path, kind: str) -> Path:
    """``path`` if it is a regular file of at most :data:`MAX_TABLE_BYTES`; else a typed error at once
    (a device such as /dev/zero would be read until memory ran out, a FIFO would wait for ever)."""
    path = Path(path)
    try:
        status = path.stat()
    except OSError as err:
        raise GF2ConfigError(f"{path}: {err.strerror or err}; pass a {kind} CSV written by gf2.") from None
    if not stat.S_ISREG(status.st_mode):
        raise GF2ConfigError(f"{path} is not a regular file; pass a {kind} CSV written by gf2.")
    if status.st_size > MAX_TABLE_BYTES:
        raise GF2ConfigError(
            f"{path} holds {status.st_size} bytes, more than the {MAX_TABLE_BYTES} a {kind} CSV may."
        )
    return path


def check_output_file(path: str | Path) -> Path:
    """``path`` if a table can be written there without waiting for ever or landing in a folder: absent
    (in an existing folder), a regular file, or a character device such as /dev/null."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise GF2ConfigError(
                f"--out {path}: the folder {path.parent} does not exist; create it first."
            ) from None
        return path
    if not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
        raise GF2ConfigError(
            f"--out {path} exists and is not a file (a folder, FIFO or socket); name a file."
        )
    return path


def read_csv_text(path: str | Path, kind: str) -> tuple[list[str], list[dict[str, str]]]:
    """The header and raw rows of a CSV file checked by :func:`check_table_file`; text that is not
    UTF-8 or not CSV is a :class:`RecordFormatError` naming the file."""
    path = check_table_file(path, kind)
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            return list(reader.fieldnames or []), rows
    except UnicodeDecodeError as err:
        raise RecordFormatError(
            f"{path} is not UTF-8 text ({err}); pass a {kind} CSV written by gf2."
        ) from None
    except csv.Error as err:
        raise RecordFormatError(
            f"{path} is not a readable CSV ({err}); pass a {kind} CSV written by gf2."
        ) from None


def read_table(path: str | Path, table: Table) -> list[dict[str, str]]:
    """The raw rows of a CSV that has (at least) ``table``'s required columns, else
    :class:`RecordFormatError` (an ``added`` column it lacks reads as blank)."""
    header, rows = read_csv_text(path, table.kind)
    if not header:
        raise RecordFormatError(
            f"{path} is empty; a {table.kind} CSV starts with the header {list(table.names)}."
        )
    absent = missing(header, table.required)
    if absent:
        added = [c for c in table.names if c not in table.required]
        raise RecordFormatError(
            f"{path} lacks the columns {absent}; a {table.kind} CSV has the header {list(table.required)}"
            + (f" (and optionally {added})." if added else ".")
        )
    return rows


__all__ = [
    "MAX_TABLE_BYTES",
    "check_output_file",
    "check_table_file",
    "read_csv_text",
    "COMPUTE",
    "COMPUTE_COLUMNS",
    "COMPUTE_MEASURES",
    "D_CURVE",
    "DEPTH_COUNTS",
    "FITS",
    "RESULTS",
    "SUMMARY",
    "SUMMARY_KEYS",
    "Column",
    "Table",
    "format_cell",
    "is_blank",
    "missing",
    "read_table",
    "to_float",
    "to_int",
    "to_str",
]
