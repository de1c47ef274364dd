"""The step validator: is a candidate a well-formed term, and is it the next one? O(d)."""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


class Failure(str, enum.Enum):
    """Why a candidate is not the next term. ``NONE`` means it is."""

    NONE = "none"
    NO_ANSWER = "no_answer"
    MULTIPLE_CONFLICTING = "multiple_conflicting"  # model text with differing final answers (answers.py)
    NOT_INTEGER = "not_integer"
    WRONG_DEGREE = "wrong_degree"
    DUPLICATE = "duplicate"
    OUT_OF_RANGE = "out_of_range"
    WRONG_TERM = "wrong_term"


@dataclass(frozen=True)
class Verdict:
    """The validator's answer. ``indices`` are the candidate's payload indices when it parsed."""

    well_formed: bool
    correct: bool
    failure: Failure
    indices: tuple[int, ...] | None


_LIST = re.compile(r"^\s*(?:\[\s*([^\[\]]*?)\s*\]|([^\[\]]*?))\s*$")


def parse_index_list(text: str) -> list[str] | None:
    """Split ``"[i, j, k]"`` (brackets optional) into its comma-separated items; ``None`` if empty."""
    match = _LIST.match(text)
    body = None if match is None else (match.group(1) if match.group(1) is not None else match.group(2))
    if body is None or not body.strip():
        return None
    return [item.strip() for item in body.split(",")]


def validate(
    candidate: Sequence[int] | str | None,
    target: Sequence[int],
    p: int,
    *,
    offset: int = 0,
) -> Verdict:
    """Check ``candidate`` against the next term ``target`` (payload indices in ``[0, p)``).

    ``candidate`` is a sequence of indices or the text of an answer list such as ``"[4, 5, 7]"``.
    ``offset`` is subtracted from every index first: pass ``offset=n`` for answers written as
    variable indices ``x_n .. x_{n+p-1}`` (the prompt's numbering). A candidate is well-formed when
    it has exactly ``d - 1 = len(target)`` distinct integer indices in range; it is correct when it
    equals ``target`` as a set.
    """
    k = len(target)
    if candidate is None:
        return Verdict(False, False, Failure.NO_ANSWER, None)
    if isinstance(candidate, str):
        items = parse_index_list(candidate)
        if items is None:
            return Verdict(False, False, Failure.NO_ANSWER, None)
        values: list[int] = []
        for item in items:
            if not re.fullmatch(r"[+-]?[0-9]+", item):
                return Verdict(False, False, Failure.NOT_INTEGER, None)
            values.append(int(item))
    elif isinstance(candidate, (bytes, bytearray)) or not isinstance(candidate, Sequence | np.ndarray):
        return Verdict(False, False, Failure.NOT_INTEGER, None)
    else:
        values = []
        for item in candidate:
            if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
                return Verdict(False, False, Failure.NOT_INTEGER, None)
            values.append(int(item))
    values = [v - offset for v in values]
    if len(values) != k:
        return Verdict(False, False, Failure.WRONG_DEGREE, tuple(values))
    if len(set(values)) != k:
        return Verdict(False, False, Failure.DUPLICATE, tuple(values))
    if any(not 0 <= v < p for v in values):
        return Verdict(False, False, Failure.OUT_OF_RANGE, tuple(values))
    indices = tuple(sorted(values))
    correct = set(indices) == {int(t) for t in target}
    return Verdict(True, correct, Failure.NONE if correct else Failure.WRONG_TERM, indices)
