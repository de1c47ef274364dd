"""Rows and CSVs less the measured compute columns: what two runs of the same work must share."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gf2env.report.schema import COMPUTE_COLUMNS


def unmeasured(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` without the compute columns (clocks differ from run to run; nothing else may)."""
    return [{k: v for k, v in row.items() if k not in COMPUTE_COLUMNS} for row in rows]


def unmeasured_csv(path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """A CSV's header and rows without the compute columns."""
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
    return [c for c in reader.fieldnames or () if c not in COMPUTE_COLUMNS], unmeasured(rows)
