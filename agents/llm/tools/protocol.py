"""Tool mode's protocol: what the model is told, which code of a reply runs, how a run is reported.

The model writes Python, the sandbox runs it on the record, the output comes back. How the model is
told things is a :class:`ToolProtocol`: gf2env's own (``--tool-protocol gf2env``, below) or the
paper's (``--tool-protocol paper``, :class:`PaperToolProtocol` and :mod:`gf2env.agents.llm.tools.paper`:
its instructions in the user message, its first-block rule, its globals and limits, its feedback; a
reply without code ends the episode). Both share the episode of
:mod:`gf2env.agents.llm.tools.episode` (its budget, its final-answer rule and its counts).

A tool episode for one query under gf2env's protocol (instructions ``tools-v2``):

1. The model gets the step's prompt, with the tool instructions added to the system message: the
   globals the sandbox provides (:mod:`gf2env.agents.llm.tools.record_globals`) with an example of
   their use, and the answer's form with an example that cannot be an answer
   (:func:`gf2env.text.prompt.answer_placeholder`).
2. If its reply holds a fenced code block (```python, ```py or a bare ```), the last such block
   outside any reasoning block, dedented as a whole, runs in :class:`gf2env.agents.sandbox.Sandbox` on the
   record's public view (:func:`gf2env.agents.sandbox.record_view`: the prefix, the samples as ints and bit
   strings, n, p, d, g, K and ``answer_offset``; never the answer). Its stdout, stderr and exit
   status go back to the model as the next user turn, and the model may revise, up to
   ``max_revisions`` times (the paper's budget is
   :data:`~gf2env.agents.llm.tools.paper.PAPER_MAX_REVISIONS`), so an episode has at most
   ``max_revisions + 1`` code runs.
3. A reply without code that holds no answer (a bare list, prose) is not final while turns remain:
   the next user turn says that only a box is graded and asks for one. A reply cut off by
   ``max_tokens`` (finish reason ``length``) inside a code fence that was never closed runs nothing
   (its code is incomplete); like any cut-off reply without code or answer, it gets a turn saying it
   was cut off. Every reply counts against the same budget of ``max_revisions + 1`` replies.
4. The episode ends at the first reply without code that holds an answer, or when the budget is
   spent.

A run as a tool call's return value (TRL's tool environment, the verifiers toolset) is
:func:`run_report`.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import replace
from typing import Any

from gf2env.agents.llm.queries import SamplingParams
from gf2env.agents.llm.tools.paper import (
    PAPER_TOOL_PROTOCOL_ID,
    STOP_DROPPED_IN_TOOL_TURNS,
    first_code_block,
    paper_feedback,
    paper_result,
    paper_tool_message,
)
from gf2env.agents.llm.tools.record_globals import globals_list, tool_view
from gf2env.errors import GF2ConfigError
from gf2env.task.rules import Failure
from gf2env.text.answers import extract_answer, strip_reasoning
from gf2env.text.prompt import Prompt, answer_placeholder

TOOL_PROMPT_ID = "tools-v2"

FEEDBACK_CHARS = 4000  # of stdout / stderr shown back to the model (the full capture is logged)
CUT_OFF_FINISH = "length"  # the finish reason of a reply stopped by max_tokens (OpenAI, vLLM, ours)

_CODE_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)
_ANY_BLOCK = re.compile(r"```.*?```", re.DOTALL)


def answer_form(k: int) -> str:
    """How to answer, said the same way in the instructions and every feedback turn."""
    return (
        f"{answer_placeholder(k)} with each i replaced by an index in the prompt's numbering "
        "(a list without the box is not graded)"
    )


def tool_instructions(answer_offset: int, k: int) -> str:
    """What the model is told about the tool (appended to the system message; ``k = d - 1``)."""
    return (
        "You can run Python 3 to solve this. Put code in one fenced block (```python ... ```); it runs "
        "in a sandbox with numpy and the standard library (no network, no files of the host) and what "
        "it prints is sent back to you.\n"
        "The record is already loaded as these globals; read the data from them, do not copy it from "
        "the prompt:\n"
        f"{globals_list(answer_offset)}"
        "For example:\n"
        "```python\n"
        "V = [[int(c) for c in s['payload']] for s in samples]  # V[r][j]: payload bit j of row r\n"
        "y = [s['y'] for s in samples]\n"
        "```\n"
        f"Payload index j is the prompt's index {answer_offset} + j. The answer is the next term's {k} "
        f"indices in one box: {answer_form(k)}. When you have it, reply with the box and no code; "
        "otherwise send code."
    )


def extract_code(text: str) -> str | None:
    """The last fenced code block outside reasoning blocks, dedented as a whole, or ``None``.

    Models indent a block that sits in a list item or under prose; its common leading whitespace is
    removed (:func:`textwrap.dedent`) so that it does not fail with ``IndentationError``.
    """
    visible, _ = strip_reasoning(text)
    blocks = _CODE_BLOCK.findall(visible)
    return textwrap.dedent(blocks[-1]) if blocks else None


def cut_off(text: str, finish_reason: str | None) -> str | None:
    """How a reply was cut off by ``max_tokens``: ``"code"`` inside a code fence that was never
    closed, ``"text"`` elsewhere (reasoning, prose), ``None`` when it was not cut off."""
    if finish_reason != CUT_OFF_FINISH:
        return None
    visible, _ = strip_reasoning(text)
    return "code" if "```" in _ANY_BLOCK.sub("", visible) else "text"


def has_answer(text: str) -> bool:
    """Whether the scorer finds an answer (right or wrong, conflicting included) in ``text``."""
    return extract_answer(text).failure is not Failure.NO_ANSWER


def _clip(text: str, limit: int = FEEDBACK_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters]"


def run_report(result: Any) -> str:
    """A sandbox run as a tool call's return value (tool-calling APIs: TRL's tool environment, the
    verifiers toolset): exit status, stop reason, time, then stdout and stderr, each clipped."""
    out = f"exit code {result.exit_code} ({result.stop_reason}, {result.wall_s:.2f} s)\n"
    out += f"stdout:\n{_clip(result.stdout)}"
    if result.stdout_truncated:
        out += "\n(stdout was cut at the sandbox's output limit)"
    if result.stderr:
        out += f"\nstderr:\n{_clip(result.stderr)}"
    return out


def _turns_left(left: int) -> str:
    return f"{left} more repl{'ies' if left != 1 else 'y'} allowed"


def feedback_message(result: Any, turns_left: int, k: int) -> str:
    """The user turn that reports a sandbox run back to the model."""
    status = f"exit code {result.exit_code}" if result.exit_code is not None else "killed"
    parts = [f"Your code ran ({status}, {result.stop_reason}, {result.wall_s:.2f} s)."]
    out = _clip(result.stdout)
    parts.append(f"stdout:\n```\n{out}\n```" if out else "stdout: (empty)")
    if result.stdout_truncated:
        parts.append(f"(stdout was cut at {len(result.stdout)} characters)")
    if result.stderr:
        parts.append(f"stderr:\n```\n{_clip(result.stderr)}\n```")
    if not has_answer(result.stdout):
        parts.append("Your output holds no boxed answer.")
    parts.append(
        f"Reply with the answer as {answer_form(k)} and no code, or send corrected code "
        f"({_turns_left(turns_left)})."
    )
    return "\n".join(parts)


def retry_message(cut: str | None, turns_left: int, k: int, max_tokens: int) -> str:
    """The user turn after a reply that ran no code and holds no answer (``cut``: :func:`cut_off`)."""
    if cut == "code":
        why = (
            f"Your reply was cut off at the limit of {max_tokens} tokens inside a code block that was never "
            "closed, so no code ran. Send shorter code in one closed block, or"
        )
    elif cut == "text":
        why = (
            f"Your reply was cut off at the limit of {max_tokens} tokens before it gave an answer. Be brief:"
        )
    else:
        why = "Your reply has no code and no answer the grader can read. Send code, or"
    return f"{why} reply with the answer as {answer_form(k)} and no code ({_turns_left(turns_left)})."


class ToolProtocol:
    """How a tool episode talks to the model: the first messages, which code runs, what the sandbox
    may do and see, what the model is told after a run or after a reply without code. This class is
    gf2env's own protocol (``tools-v2``, the module docs); :class:`PaperToolProtocol` is the paper's."""

    name = "gf2env"
    id = TOOL_PROMPT_ID  # hashed into a query's key: a change of protocol text needs a new id
    instructions_at = 0  # the first message holding the tool instructions (the system message)

    @property
    def limits(self) -> Any:
        """The sandbox limits of a run (:class:`gf2env.agents.sandbox.SandboxLimits`)."""
        from gf2env.agents.sandbox import DEFAULT_LIMITS

        return DEFAULT_LIMITS

    def view(self, record: Any, prompt: Prompt) -> dict[str, Any]:
        """What the code sees: the record's public view and the prompt's index offset."""
        return tool_view(record, prompt.answer_offset)

    def answer_length(self, view: dict[str, Any]) -> int:
        """The number of indices an answer holds (``d - 1``)."""
        return int(view["d"]) - 1

    def sampling(self, params: SamplingParams) -> SamplingParams:
        """The sampling of the episode's turns (gf2env's: the run's own)."""
        return params

    def first_messages(self, prompt: Prompt, view: dict[str, Any], revise: bool) -> list[dict[str, str]]:
        """The prompt with the tool instructions in the system message."""
        tools = tool_instructions(prompt.answer_offset, self.answer_length(view))
        system = f"{prompt.system}\n\n{tools}" if prompt.system else tools
        return [{"role": "system", "content": system}, {"role": "user", "content": prompt.text}]

    def code(self, text: str, cut: str | None) -> str | None:
        """The code a reply runs: the last closed block, none from a reply cut off inside code."""
        return None if cut == "code" else extract_code(text)

    def feedback(self, result: Any, turns_left: int, k: int, revise: bool) -> str:
        return feedback_message(result, turns_left, k)

    def after_no_code(
        self, reply: str, stop: str | None, cut: str | None, turns_left: int, k: int, max_tokens: int
    ) -> str | None:
        """The user turn after a reply without code, or ``None`` when the reply ends the episode
        (gf2env's: it holds an answer; otherwise it is asked again for one)."""
        if has_answer(reply + (stop or "")):
            return None
        return retry_message(cut, turns_left, k, max_tokens)


class PaperToolProtocol(ToolProtocol):
    """The paper's tool protocol (:mod:`gf2env.agents.llm.tools.paper`): the instructions after the question
    in the user message, the first block runs (a fence never closed too), ``RECORD`` and ``PROMPT``
    without the target, the paper's limits, its feedback, and a reply without code is final. The stop
    strings of :data:`~gf2env.agents.llm.tools.paper.STOP_DROPPED_IN_TOOL_TURNS` are dropped in its turns."""

    name = "paper"
    id = PAPER_TOOL_PROTOCOL_ID
    instructions_at = -1  # the user message

    @property
    def limits(self) -> Any:
        from gf2env.agents.sandbox import PAPER_LIMITS

        return PAPER_LIMITS

    def view(self, record: Any, prompt: Prompt) -> dict[str, Any]:
        from gf2env.agents.sandbox import paper_record_view

        return paper_record_view(record, prompt.text)

    def answer_length(self, view: dict[str, Any]) -> int:
        return int(view["RECORD"]["d_max"]) - 1

    def sampling(self, params: SamplingParams) -> SamplingParams:
        return replace(params, stop=tuple(s for s in params.stop if s not in STOP_DROPPED_IN_TOOL_TURNS))

    def first_messages(self, prompt: Prompt, view: dict[str, Any], revise: bool) -> list[dict[str, str]]:
        system = [{"role": "system", "content": prompt.system}] if prompt.system else []
        return [*system, {"role": "user", "content": paper_tool_message(prompt.text, revise)}]

    def code(self, text: str, cut: str | None) -> str | None:
        return first_code_block(text)

    def feedback(self, result: Any, turns_left: int, k: int, revise: bool) -> str:
        return paper_feedback(paper_result(result), revise)

    def after_no_code(
        self, reply: str, stop: str | None, cut: str | None, turns_left: int, k: int, max_tokens: int
    ) -> str | None:
        return None


TOOL_PROTOCOLS: dict[str, ToolProtocol] = {"gf2env": ToolProtocol(), "paper": PaperToolProtocol()}


def tool_protocol(name: str) -> ToolProtocol:
    """The protocol ``name`` (one of :data:`TOOL_PROTOCOLS`)."""
    if name not in TOOL_PROTOCOLS:
        raise GF2ConfigError(
            f"tool_protocol={name!r} is unknown; pass one of {sorted(TOOL_PROTOCOLS)} "
            "(gf2env: ours; paper: the paper's instructions, limits and feedback)."
        )
    return TOOL_PROTOCOLS[name]


__all__ = [
    "CUT_OFF_FINISH",
    "FEEDBACK_CHARS",
    "TOOL_PROMPT_ID",
    "TOOL_PROTOCOLS",
    "PaperToolProtocol",
    "ToolProtocol",
    "answer_form",
    "cut_off",
    "extract_code",
    "feedback_message",
    "has_answer",
    "retry_message",
    "run_report",
    "tool_instructions",
    "tool_protocol",
]
