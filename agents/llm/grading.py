"""Grading a query's reply: the task's scorer (:func:`gf2env.text.answers.score_answer`) applied to
the whole reply and, in tool mode, to the first sandbox run's output (the paper's single-tool budget).

The agent grades each answer as it arrives; the query log records the verdict and grades nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gf2env.agents.llm.planning import Planned
from gf2env.agents.llm.queries import Completion
from gf2env.text.answers import Score, score_answer


@dataclass(frozen=True)
class Verdict:
    """The scorer's verdict on a reply; ``tools`` when it ended a tool episode, whose first run's
    output alone was right (``first_run_correct``) or not, or ran no code (``None``)."""

    score: Score
    tools: bool = False
    first_run_correct: bool | None = None


def grade(planned: Planned, completion: Completion, extra: dict[str, Any] | None = None) -> Verdict:
    """Score ``completion``'s whole reply (before the log cuts it) against ``planned``'s record; with a
    tool episode's ``turns`` in ``extra``, its first sandbox run's stdout too."""
    rec = planned.record
    offset = planned.query.prompt.answer_offset
    score = score_answer(completion.text, rec.target, rec.p, offset, stopped_by=completion.stop_reason)
    if extra is None or "turns" not in extra:
        return Verdict(score)
    runs = [t["sandbox"] for t in extra["turns"] if t.get("sandbox") is not None]
    first = score_answer(runs[0]["stdout"], rec.target, rec.p, offset) if runs else None
    return Verdict(score, tools=True, first_run_correct=None if first is None else bool(first.correct))


__all__ = ["Verdict", "grade"]
