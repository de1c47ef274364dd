"""The env's rules: what a judged step does next.

:func:`step_transition` is the reveal / terminate / retry transition of a judged step, written once
for the single env (Python scalars) and the vector env (arrays with a batch axis).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gf2env.errors import GF2ConfigError

STEP_MODES = ("reveal", "terminate", "retry")
DEFAULT_MAX_ATTEMPTS = 10


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
