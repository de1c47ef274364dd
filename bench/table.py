"""Shared output of the bench scripts."""

from __future__ import annotations

import csv


def write_csv(path: str, rows: list[dict]) -> None:
    """Write ``rows`` (dicts with the same keys) as a CSV table with a header."""
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
