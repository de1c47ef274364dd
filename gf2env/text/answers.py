"""The one scorer of model text: find the final answer in a reply and grade it by the env's rule.

Grammar (what :func:`extract_answer` accepts), in order of application:

1. **Reasoning is removed first.** ``<think>...</think>`` and ``<thinking>...</thinking>`` blocks
   (tag names case-insensitive, either closing tag ends either block, blocks do not nest) are
   dropped. An opening tag that is never closed makes everything after it reasoning (a truncated
   reply). A closing tag met outside a block makes everything before it reasoning: chat templates
   such as Qwen3's put the opening ``<think>`` in the prompt, so the reply starts inside the block.
   Answers inside reasoning never count.
2. **Boxes.** A box starts only at ``\\boxed{`` (any number of backslashes, spaces allowed before
   the brace) and ends at its matching brace; nested braces (``x_{33}``) are matched and escaped
   braces (``\\{``, ``\\}``) are not delimiters, so code such as ``d = {1: [2]}`` never ends a box.
   A box that is never closed is ignored, and so is a box that contains another box (the inner one
   counts). Empty boxes are ignored.
3. **Strict** answers are boxes whose content is a bracketed list: ``\\boxed{[13, 14, 16]}``, with
   any spacing (``\\boxed{ [13,14,16] }``), optional ``$`` around the content, and
   ``\\left[ ... \\right]``; and the form the paper's prompt asks for, a bracketed list straight
   after ``\\boxed`` whose items may be braced: ``\\boxed[{13}, {14}, {16}]``, ``\\boxed[13, 14, 16]``.
4. **Lenient** answers are used only when the reply has no strict box: any other non-empty box
   (``\\boxed{13, 14, 16}``, set notation ``\\boxed{\\{13, 14, 16\\}}`` or ``\\left\\{..\\right\\}``,
   a tuple ``(13, 14, 16)``), and answer lines such as ``Answer: [13, 14, 16]``,
   ``ANSWER: 13, 14, 16``, ``**Answer:** [..]`` or ``Final answer: ..`` whose body looks like a
   list (items without spaces; prose such as ``Answer: see above`` is not an answer).
5. **The last answer wins**, in either mode: the final answer is the last strict box outside
   reasoning, else the last lenient answer. An ``ANSWER:`` line before a final box never wins.
6. **Hedging is wrong.** If two answers of the chosen mode parse to different integer sets, the
   reply is ``multiple_conflicting`` and counts as wrong, even though the last one is reported.
   Identical repeats (as sets) are fine; answers that are not integer lists (``[i1, i2, i3]``
   echoing the prompt's format) take no part in this check.

List items are separated by commas (by whitespace when there is no comma: ``[13 14 16]``). A
variable name is read as its index: ``x_33``, ``x33``, ``x_{33}`` and the compact prompt's ``v_3``
are 33, 33, 33 and 3. Anything else that is not an integer (``1.5``, ``a``) is ``not_integer``.
Indices are in the prompt's numbering; :func:`score_answer` subtracts the prompt's answer offset
``n`` and grades the list with :func:`validate_answer`, which checks it with the env's validator
:func:`gf2env.task.rules.read_support` and compares it with the next term.

A stop string ends a completion and is not part of its text (the paper stops at ``]}``, so a
server returns ``\\boxed{[13, 14, 16`` cut open). When the server reports which stop string ended
the reply (vLLM's ``stop_reason``), :func:`score_answer` is given it as ``stopped_by`` and grades
the reply with that string put back, which is what the model wrote; nothing is guessed otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any, Literal

from gf2env.task.rules import Failure, read_support

Mode = Literal["strict", "lenient"]


FAILURE_CLASSES: tuple[str, ...] = tuple(f.value for f in Failure)


@dataclass(frozen=True)
class Verdict:
    """:func:`validate_answer`'s answer. ``indices`` are the candidate's payload indices when it parsed."""

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


def validate_answer(
    candidate: Sequence[int] | str | None,
    target: Sequence[int],
    p: int,
    *,
    offset: int = 0,
) -> Verdict:
    """Check ``candidate`` against the next term ``target`` (payload indices in ``[0, p)``). O(d).

    ``candidate`` is a sequence of indices or the text of an answer list such as ``"[4, 5, 7]"``.
    ``offset`` is subtracted from every index first: pass ``offset=n`` for answers written as
    variable indices ``x_n .. x_{n+p-1}`` (the prompt's numbering). A candidate is well-formed when
    :func:`gf2env.task.rules.read_support` accepts it (``d - 1 = len(target)`` distinct integer indices
    in range, the env's rule and order of checks); it is correct when it equals ``target`` as a set.
    """
    if candidate is None:
        return Verdict(False, False, Failure.NO_ANSWER, None)
    if isinstance(candidate, str):
        items = parse_index_list(candidate)
        if items is None:
            return Verdict(False, False, Failure.NO_ANSWER, None)
        if not all(re.fullmatch(r"[+-]?[0-9]+", item) for item in items):
            return Verdict(False, False, Failure.NOT_INTEGER, None)
        candidate = [int(item) for item in items]
    check = read_support(candidate, p, len(target), offset=offset)
    if check.failure is not Failure.NONE:
        return Verdict(False, False, check.failure, check.values)
    indices = check.support
    correct = set(indices) == {int(t) for t in target}
    return Verdict(True, correct, Failure.NONE if correct else Failure.WRONG_TERM, indices)


@dataclass(frozen=True)
class Extraction:
    """The final answer found in a reply.

    ``answer`` is the raw content of the chosen box (or answer line), ``items`` its list items
    normalised (``x_33`` read as ``33``), ``candidates`` every answer of the chosen mode outside
    reasoning, in order. ``failure`` is set only when extraction failed (``no_answer``,
    ``multiple_conflicting``).
    """

    answer: str | None
    mode: Mode | None
    failure: Failure | None
    candidates: tuple[str, ...]
    reasoning_removed: bool
    items: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Score:
    """The grading of a reply. ``indices`` are payload indices (the prompt's minus ``n``)."""

    correct: bool
    failure: Failure
    indices: tuple[int, ...] | None
    answer_text: str | None
    mode: Mode | None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values."""
        return {
            "correct": self.correct,
            "failure": self.failure.value,
            "indices": None if self.indices is None else [int(i) for i in self.indices],
            "answer_text": self.answer_text,
            "mode": self.mode,
        }


_TAG = re.compile(r"<\s*(/?)\s*think(?:ing)?\s*>", re.IGNORECASE)
_BRACE_TOKEN = re.compile(r"\\+boxed\s*\{|\\.|[{}]", re.DOTALL)
_PAPER_BOX = re.compile(r"\\+boxed\s*\[(?P<body>[^\[\]]*)\]")
_STRICT = re.compile(r"^(?:\\left\s*)?\[\s*(?P<body>[^\[\]]*?)\s*(?:\\right\s*)?\]$", re.DOTALL)
_LENIENT_WRAPPERS = (
    _STRICT,
    re.compile(r"^(?:\\left\s*)?\\\{\s*(?P<body>.*?)\s*(?:\\right\s*)?\\\}$", re.DOTALL),
    re.compile(r"^\(\s*(?P<body>[^()]*?)\s*\)$", re.DOTALL),
    re.compile(r"^\{\s*(?P<body>[^{}]*?)\s*\}$", re.DOTALL),
)
_ANSWER_LINE = re.compile(
    r"^[\W_]*(?:final\s+)?answer\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?\s*(?P<body>.*?)[\s*_.]*$",
    re.IGNORECASE | re.MULTILINE,
)
_LISTY_ITEM = re.compile(r"^[\w.+\-{}\\$]+$")
_VARIABLE = re.compile(r"^(?:[xXvV]\s*_?\s*)?\{?\s*([+-]?[0-9]+)\s*\}?$")
_INTEGER = re.compile(r"[+-]?[0-9]+")


def strip_reasoning(text: str) -> tuple[str, bool]:
    """The reply without its reasoning blocks (pieces joined by newlines), and whether any was cut."""
    kept: list[str] = []
    pos, inside, removed = 0, False, False
    for tag in _TAG.finditer(text):
        closing = bool(tag.group(1))
        if inside:
            if closing:
                inside, pos = False, tag.end()
        elif closing:  # stray closing tag: the reply began inside a block opened by the prompt
            kept, pos, removed = [], tag.end(), True
        else:
            kept.append(text[pos : tag.start()])
            inside, removed = True, True
    if not inside:
        kept.append(text[pos:])
    return "\n".join(kept), removed


def _boxes(text: str) -> list[tuple[int, str]]:
    """``(start, content)`` of every closed ``\\boxed{..}`` that holds no other box, in order."""
    stack: list[list[Any]] = []  # [is_box, start, content_start, holds_box]
    found: list[tuple[int, str]] = []
    for token in _BRACE_TOKEN.finditer(text):
        s = token.group()
        if s == "{" or "boxed" in s:
            stack.append([s != "{", token.start(), token.end(), False])
        elif s == "}" and stack:
            is_box, start, content_start, holds_box = stack.pop()
            if not is_box:
                continue
            if not holds_box:
                found.append((start, text[content_start : token.start()]))
            for entry in reversed(stack):
                if entry[0]:
                    entry[3] = True
                    break
    found.sort()
    return found


def _clean(content: str) -> str:
    return content.strip().strip("$").strip()


def _items(body: str) -> tuple[str, ...] | None:
    """Normalised list items of a list body; ``None`` when it is empty."""
    if not body.strip():
        return None
    parts = body.split(",")
    if len(parts) == 1:
        parts = body.split()
    items = []
    for part in parts:
        token = part.strip().strip("$").strip()
        match = _VARIABLE.match(token)
        items.append(match.group(1) if match else token)
    return tuple(items)


def _unbraced(item: str) -> str:
    """An item without one pair of braces around it: ``{x_{13}}`` is ``x_{13}``."""
    item = item.strip()
    return item[1:-1] if item.startswith("{") and item.endswith("}") else item


def _lenient_body(content: str) -> str:
    content = _clean(content)
    for wrapper in _LENIENT_WRAPPERS:
        match = wrapper.match(content)
        if match:
            return match.group("body")
    return content


def _int_set(items: tuple[str, ...] | None) -> frozenset[int] | None:
    if items is None or not all(_INTEGER.fullmatch(i) for i in items):
        return None
    return frozenset(int(i) for i in items)


def extract_answer(text: str) -> Extraction:
    """The final answer of ``text`` under the module's grammar (last strict box, else last lenient)."""
    visible, removed = strip_reasoning(text)
    boxes = _boxes(visible)
    strict: list[tuple[int, str, tuple[str, ...] | None]] = []
    for start, content in boxes:
        match = _STRICT.match(_clean(content))
        if match:
            strict.append((start, content, _items(match.group("body"))))
    for match in _PAPER_BOX.finditer(visible):  # the paper prompt's own form, \boxed[{13}, {14}, {16}]
        items = _items(",".join(_unbraced(part) for part in match.group("body").split(",")))
        if items is not None:
            strict.append((match.start(), "[" + match.group("body") + "]", items))
    mode: Mode
    found: list[tuple[str, tuple[str, ...] | None]]
    if strict:
        strict.sort(key=lambda entry: entry[0])
        mode, found = "strict", [(content, items) for _, content, items in strict]
    else:
        lenient: list[tuple[int, str, tuple[str, ...] | None]] = []
        for start, content in boxes:
            items = _items(_lenient_body(content))
            if items is not None:
                lenient.append((start, content, items))
        for line in _ANSWER_LINE.finditer(visible):
            body = line.group("body")
            if "boxed" in body:
                continue
            inner = _lenient_body(body)
            wrapped = inner != _clean(body)
            items = _items(inner)
            if items is not None and (wrapped or all(_LISTY_ITEM.match(t.strip()) for t in inner.split(","))):
                lenient.append((line.start(), body, items))
        lenient.sort(key=lambda entry: entry[0])
        mode, found = "lenient", [(content, items) for _, content, items in lenient]
    if not found:
        return Extraction(None, None, Failure.NO_ANSWER, (), removed)
    candidates = tuple(content for content, _ in found)
    answer, items = found[-1]
    sets = {s for s in (_int_set(i) for _, i in found) if s}
    failure = Failure.MULTIPLE_CONFLICTING if len(sets) > 1 else None
    return Extraction(answer, mode, failure, candidates, removed, items)


def boxed_answer(indices: Sequence[int], offset: int = 0) -> str:
    """The canonical strict answer ``\\boxed{[i1, i2, ...]}`` naming ``indices`` (payload indices, in the
    order given) in a prompt's numbering: each index plus ``offset`` (the prompt's answer offset)."""
    return "\\boxed{[" + ", ".join(str(int(i) + offset) for i in indices) + "]}"


def submitted_answer(indices: Any) -> str:
    """The reply a ``submit(indices)`` tool call stands for: :func:`boxed_answer` of the indices, or,
    where they are not a list of integers (a model may pass anything), their text, which grades as
    the malformed answer it is rather than failing the tool call."""
    items = indices if isinstance(indices, (list, tuple)) else None
    if items is None or not all(isinstance(i, Integral) and not isinstance(i, bool) for i in items):
        return str(indices)
    return boxed_answer(items)


def score_answer(text: str, target: Sequence[int], p: int, n: int, *, stopped_by: str | None = None) -> Score:
    """Grade a reply against the next term ``target`` (payload indices); answers carry offset ``n``.

    ``stopped_by`` is the stop string the server says ended the reply (``None``: it ended otherwise,
    or the server does not say); the reply is graded with it put back at the end.
    """
    ex = extract_answer(text + stopped_by if stopped_by else text)
    if ex.failure is not None:
        return Score(False, ex.failure, None, ex.answer, ex.mode)
    if ex.items is None:
        return Score(False, Failure.NO_ANSWER, None, ex.answer, ex.mode)
    if any(c in item for item in ex.items for c in "[]"):  # validate_answer's list syntax cannot hold them
        return Score(False, Failure.NOT_INTEGER, None, ex.answer, ex.mode)
    verdict = validate_answer("[" + ", ".join(ex.items) + "]", target, p, offset=n)
    failure = verdict.failure
    return Score(verdict.correct, failure, verdict.indices, ex.answer, ex.mode)


__all__ = [
    "FAILURE_CLASSES",
    "Extraction",
    "Score",
    "Verdict",
    "boxed_answer",
    "extract_answer",
    "parse_index_list",
    "score_answer",
    "strip_reasoning",
    "validate_answer",
]
