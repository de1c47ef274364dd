"""The env's rules: when an index set is a term (the validator), and what a judged step does next.

- :func:`check_support` is the validator, the one well-formedness rule of a support, checked in
  this order: integers, exactly ``k = d - 1`` of them, each in ``[0, p)``, all distinct (any order;
  the support is their sorted tuple); it raises :class:`~gf2env.errors.InvalidActionError` saying
  why not. :func:`read_support` returns the same verdict as a :class:`Failure` class instead. The
  env, :mod:`gf2env.records.record` and the scorer (:mod:`gf2env.text.answers`) all go through it, so
  they report the same failure for the same set.
- :func:`step_transition` is the reveal / terminate / retry transition of a judged step, written
  once for the single env (Python scalars) and the vector env (arrays with a batch axis).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

from gf2env.errors import GF2ConfigError, InvalidActionError

STEP_MODES = ("reveal", "terminate", "retry")
DEFAULT_MAX_ATTEMPTS = 10


class Failure(str, enum.Enum):
    """Why a candidate is not the next term. ``NONE`` means it is.

    ``NOT_INTEGER``, ``WRONG_DEGREE``, ``OUT_OF_RANGE`` and ``DUPLICATE`` come from
    :func:`read_support`, ``WRONG_TERM`` from comparing a well-formed support with the truth;
    ``NO_ANSWER`` and ``MULTIPLE_CONFLICTING`` arise only in answer text (:mod:`gf2env.text.answers`).
    """

    NONE = "none"
    NO_ANSWER = "no_answer"
    MULTIPLE_CONFLICTING = "multiple_conflicting"
    NOT_INTEGER = "not_integer"
    WRONG_DEGREE = "wrong_degree"
    DUPLICATE = "duplicate"
    OUT_OF_RANGE = "out_of_range"
    WRONG_TERM = "wrong_term"


class SupportCheck(NamedTuple):
    """:func:`read_support`'s verdict on an index set."""

    failure: Failure  # NONE when the set is a well-formed support
    values: tuple[int, ...] | None  # the indices as given (less the offset); None unless all integers
    message: str  # why not, naming the value and the fix; "" when well-formed

    @property
    def support(self) -> tuple[int, ...]:
        """The support, the sorted indices (only meaningful when well-formed)."""
        return tuple(sorted(self.values or ()))


def read_support(indices: Iterable[Any], p: int, k: int, *, offset: int = 0) -> SupportCheck:
    """The validator's verdict: is ``indices`` a support of ``k`` distinct payload indices in ``[0, p)``?

    ``offset`` is subtracted from every index first (``offset=n`` reads the prompt's variables
    ``x_n .. x_{n+p-1}``). Checks integers, count, range, distinctness, in that order; the first
    that fails is the verdict.
    """
    if isinstance(indices, (str, bytes, bytearray)):
        items = None
    else:
        try:
            items = list(indices)
        except TypeError:
            items = None
    if items is None:
        return SupportCheck(
            Failure.NOT_INTEGER,
            None,
            f"Support {indices!r} is not a sequence of integers; pass {k} distinct integers in [0, {p}).",
        )
    values = []
    for i in items:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            return SupportCheck(
                Failure.NOT_INTEGER,
                None,
                f"Support entry {i!r} is not an integer; pass {k} distinct integers in [0, {p}).",
            )
        values.append(int(i) - offset)
    got = tuple(values)
    if len(values) != k:
        return SupportCheck(
            Failure.WRONG_DEGREE,
            got,
            f"Support {values} has {len(values)} indices but a term has d-1={k}; "
            f"pass exactly {k} distinct payload indices.",
        )
    out_of_range = [i for i in values if not 0 <= i < p]
    if out_of_range:
        return SupportCheck(
            Failure.OUT_OF_RANGE,
            got,
            f"Support {values} has indices {out_of_range} outside the payload range [0, {p}).",
        )
    if len(set(values)) != k:
        return SupportCheck(
            Failure.DUPLICATE, got, f"Support {values} repeats an index; pass {k} distinct payload indices."
        )
    return SupportCheck(Failure.NONE, got, "")


def check_support(indices: Iterable[Any], p: int, k: int) -> tuple[int, ...]:
    """Return ``indices`` as a sorted tuple, or raise :class:`InvalidActionError` saying why not."""
    check = read_support(indices, p, k)
    if check.failure is not Failure.NONE:
        raise InvalidActionError(check.message)
    return check.support


class Transition(NamedTuple):
    """What a judged step does, per episode: booleans and the next ``(depth, attempt)``.

    Each field has the shape of :func:`step_transition`'s arguments (Python scalars in, scalars out).
    """

    advance: Any  # the true term joins the prefix: the next depth, attempt 1
    retry: Any  # the same depth again, attempt + 1 (fresh evidence is drawn after either)
    finished: Any  # advanced past the last depth: no evidence follows
    terminated: Any  # the episode ends: finished, or a wrong answer in terminate mode
    exhausted: Any  # retry mode: wrong on the last allowed attempt, so the term is revealed
    depth: Any  # the depth after the step
    attempt: Any  # the attempt (1-based, at the new depth) after the step


def step_transition(
    correct: Any,
    depth: Any,
    attempt: Any,
    *,
    n: int,
    step_mode: str,
    max_attempts: int,
    live: Any = True,
) -> Transition:
    """The step rule: after an answer judged ``correct`` at ``depth`` (``attempt``-th try there).

    - ``reveal``: always advance. ``terminate``: advance if correct, else end the episode.
    - ``retry``: advance if correct or on attempt ``max_attempts``, else try the depth again.
    The episode also ends after the step at depth ``n - 1``. Works elementwise on Python bools and
    ints or on numpy arrays with a batch axis (no numpy call on scalars); entries with ``live``
    false (vector sub-envs awaiting autoreset) neither advance nor retry.
    """
    wrong = live & (correct ^ True)
    nothing = wrong & False
    if step_mode == "reveal":
        advance, retry, ended = live | nothing, nothing, nothing
    elif step_mode == "terminate":
        advance, retry, ended = live & correct, nothing, wrong
    elif step_mode == "retry":
        retry = wrong & (attempt < max_attempts)
        advance, ended = live & (retry ^ True), nothing
    else:
        raise GF2ConfigError(f"step_mode={step_mode!r} is unknown; pass one of {STEP_MODES}.")
    exhausted = advance & wrong if step_mode == "retry" else nothing
    finished = advance & (depth == n - 1)
    return Transition(
        advance=advance,
        retry=retry,
        finished=finished,
        terminated=ended | finished,
        exhausted=exhausted,
        depth=depth + advance,
        attempt=(attempt + retry) * (advance ^ True) + advance,
    )
