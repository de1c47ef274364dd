"""Reward functions for TRL trainers, in TRL's shape ``(completions, **columns) -> list[float]``.

The dataset rows of :mod:`gf2env.train.data` carry the columns these read: ``target`` (payload indices of
the next term), ``p`` and ``answer_offset`` (the prompt's index offset). Both rewards grade with
the task's one scorer, :func:`gf2env.text.answers.score_answer`, so training and evaluation agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gf2env.task.rules import Failure
from gf2env.text.answers import score_answer


def completion_text(completion: Any) -> str:
    """The text of a completion: a string (standard format) or a list of messages (conversational:
    the assistant turns joined, tool turns left out)."""
    if isinstance(completion, str):
        return completion
    turns = [m for m in completion if isinstance(m, dict) and m.get("role") == "assistant"]
    return "\n".join(str(m.get("content") or "") for m in turns)


def correct_term_reward(
    completions: Sequence[Any],
    target: Sequence[Sequence[int]],
    p: Sequence[int],
    answer_offset: Sequence[int],
    **_: Any,
) -> list[float]:
    """1.0 for a completion whose final answer is exactly the next term, else 0.0."""
    return [
        float(score_answer(completion_text(c), t, int(pp), int(off)).correct)
        for c, t, pp, off in zip(completions, target, p, answer_offset, strict=True)
    ]


def format_reward(
    completions: Sequence[Any],
    target: Sequence[Sequence[int]],
    p: Sequence[int],
    answer_offset: Sequence[int],
    **_: Any,
) -> list[float]:
    """1.0 for a completion whose final answer is a well-formed term (right or wrong), else 0.0.

    Well-formed: one unambiguous answer of d−1 distinct in-range integer indices (the scorer's
    failure is ``none`` or ``wrong_term``)."""
    ok = (Failure.NONE, Failure.WRONG_TERM)
    return [
        float(score_answer(completion_text(c), t, int(pp), int(off)).failure in ok)
        for c, t, pp, off in zip(completions, target, p, answer_offset, strict=True)
    ]


__all__ = ["completion_text", "correct_term_reward", "format_reward"]
