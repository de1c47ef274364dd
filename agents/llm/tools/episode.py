"""A tool episode: one step's conversation with the model, its revisions, and how it ended.

A :class:`ToolEpisode` (made by :func:`start_episode`) takes the model's replies one at a time
(:meth:`ToolEpisode.take_reply`) and the sandbox results of the code they run
(:meth:`ToolEpisode.take_result`), under a :class:`~gf2env.agents.llm.tools.protocol.ToolProtocol`
(what the model is told, which code runs: the protocol's module docs). Whoever drives it owns the
budget of ``max_revisions + 1`` replies: the batched runner (:mod:`gf2env.agents.llm.tools.runner`),
the text env's session (:mod:`gf2env.agents.llm.tools.session`).

**The final answer** (graded by :func:`gf2env.text.answers.score_answer`, the text scorer):

- the episode ended with a reply without code, and that reply holds an answer → that reply;
- otherwise the stdout of the last run that printed an answer (a boxed term, or any answer the
  scorer's lenient grammar takes) → that stdout;
- otherwise the last reply (which then scores ``no_answer`` or whatever it holds).

Every episode reports its turns (reply, code, sandbox result, finish reason, ``cut_off``), the
number of tool calls, the sandbox time, the runs that did not exit cleanly, the replies cut off by
``max_tokens``, where the answer came from, its ``outcome`` (:data:`OUTCOMES`: ``answer`` when the
final text holds one, ``truncated`` when it does not and the last reply was cut off, else
``no_answer``; ``error`` when the backend failed) and the paper's tool-usage class: ``no_tool``
(0 runs), ``single_tool`` (1) or ``multi_tool`` (2 or more).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gf2env.agents.llm.queries import Completion, Query
from gf2env.agents.llm.tools.protocol import TOOL_PROTOCOLS, ToolProtocol, cut_off, has_answer

TOOL_USE_CLASSES = ("no_tool", "single_tool", "multi_tool")
OUTCOMES = ("answer", "no_answer", "truncated", "error")


@dataclass
class ToolEpisode:
    """One query's tool conversation, and how it ended."""

    query: Query
    view: dict[str, Any]
    messages: list[dict[str, str]]
    protocol: ToolProtocol = field(default_factory=ToolProtocol)
    revise: bool = True  # revisions are allowed (the paper's instructions and feedback say so)
    turns: list[dict[str, Any]] = field(default_factory=list)
    final_text: str = ""
    answer_source: str = "reply"
    error: str | None = None
    errors: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    server: str | None = None
    answered_by: str | None = None  # the last other model a reply of the episode named (see Completion)
    done: bool = False
    workspace: Any = None  # where the episode's code runs when it has its own (a Workspace), else shared

    @property
    def tool_calls(self) -> int:
        return sum(1 for t in self.turns if t["code"] is not None)

    @property
    def sandbox_s(self) -> float:
        return sum(t["sandbox"]["wall_s"] for t in self.turns if t["sandbox"] is not None)

    @property
    def sandbox_errors(self) -> int:
        runs = [t["sandbox"] for t in self.turns if t["sandbox"] is not None]
        return sum(1 for r in runs if r["stop_reason"] != "exited")

    @property
    def tool_use(self) -> str:
        return TOOL_USE_CLASSES[min(self.tool_calls, 2)]

    @property
    def k(self) -> int:
        """The number of indices an answer holds (``d - 1``)."""
        return self.protocol.answer_length(self.view)

    @property
    def cut_off_replies(self) -> int:
        return sum(1 for t in self.turns if t["cut_off"] is not None)

    @property
    def outcome(self) -> str:
        """One of :data:`OUTCOMES` (see the module docs)."""
        if self.error:
            return "error"
        if has_answer(self.final_text + (self.final_stop or "")):
            return "answer"
        return "truncated" if self.turns and self.turns[-1]["cut_off"] is not None else "no_answer"

    def take_reply(self, reply: Completion, turns_left: int, max_tokens: int) -> str | None:
        """Take the model's next reply (its counts, its turn): the code it runs, or ``None`` when it runs
        none, after which the episode is either over (``done``: an error, a final reply, or no turn left)
        or holds the next user turn. ``turns_left``: the replies allowed after this one; ``max_tokens``:
        the limit a cut-off reply is told of."""
        self.prompt_tokens += reply.prompt_tokens or 0
        self.completion_tokens += reply.completion_tokens or 0
        self.latency_s += reply.latency_s
        self.server = reply.server
        self.answered_by = reply.answered_by or self.answered_by
        self.errors.extend(reply.errors)
        if reply.error:
            self.error, self.done = reply.error, True
            return None
        cut = cut_off(reply.text, reply.finish_reason)
        code = self.protocol.code(reply.text, cut)
        self.turns.append(
            {"response": reply.text, "code": code, "sandbox": None, "finish_reason": reply.finish_reason,
             "stop_reason": reply.stop_reason, "cut_off": cut}
        )  # fmt: skip
        self.messages.append({"role": "assistant", "content": reply.text})
        if code is not None:
            return code
        message = None
        if turns_left > 0:
            message = self.protocol.after_no_code(
                reply.text, reply.stop_reason, cut, turns_left, self.k, max_tokens
            )
        if message is None:
            self.finish()
        else:
            self.messages.append({"role": "user", "content": message})
        return None

    def take_result(self, result: Any, turns_left: int) -> None:
        """Take the sandbox result of the code :meth:`take_reply` returned: the episode ends when no
        turn is left, else the result goes back to the model as the next user turn."""
        self.turns[-1]["sandbox"] = result.to_dict()
        if turns_left == 0:
            self.finish()
        else:
            self.messages.append(
                {"role": "user", "content": self.protocol.feedback(result, turns_left, self.k, self.revise)}
            )

    def finish(self) -> None:
        """Choose the final answer by the module's precedence."""
        self.done = True
        last = self.turns[-1]
        if last["code"] is None and has_answer(last["response"] + (last.get("stop_reason") or "")):
            self.final_text, self.answer_source = last["response"], "reply"
            return
        for turn in reversed(self.turns):
            sandbox = turn["sandbox"]
            if sandbox is not None and has_answer(sandbox["stdout"]):
                self.final_text, self.answer_source = sandbox["stdout"], "sandbox"
                return
        self.final_text, self.answer_source = last["response"], "reply"

    def completion(self) -> Completion:
        """The episode as one :class:`Completion` (text = the final answer's text)."""
        return Completion(
            self.query.key, "" if self.error else self.final_text, self.prompt_tokens, self.completion_tokens,
            self.turns[-1]["finish_reason"] if self.turns else None, self.latency_s, len(self.turns),
            self.server, self.error, self.errors,
            self.final_stop, self.answered_by,
        )  # fmt: skip

    @property
    def final_stop(self) -> str | None:
        """The stop string that ended the reply the final answer is from (``None``: none did, or the
        answer is the sandbox's output); the scorer puts it back (``score_answer(stopped_by=)``)."""
        return self.turns[-1].get("stop_reason") if self.turns and self.answer_source == "reply" else None

    def summary(self) -> dict[str, Any]:
        """What the log records about the episode besides the final text."""
        return {
            "tool_prompt_id": self.protocol.id,
            "tool_calls": self.tool_calls,
            "tool_use": self.tool_use,
            "sandbox_s": round(self.sandbox_s, 4),
            "sandbox_errors": self.sandbox_errors,
            "answer_source": self.answer_source,
            "outcome": self.outcome,
            "cut_off_replies": self.cut_off_replies,
            "turns": self.turns,
        }


def start_episode(
    query: Query,
    view: dict[str, Any],
    protocol: ToolProtocol | None = None,
    revise: bool = True,
    workspace: Any = None,
    note: str | None = None,
) -> ToolEpisode:
    """The first turn of a tool episode under ``protocol`` (default gf2env's); ``revise``: the
    episode allows revisions (``max_revisions > 0``); ``workspace``: where its code runs (an
    :class:`gf2env.agents.sandbox.Workspace` kept across the steps of an episode; default: the shared
    sandbox); ``note``: a paragraph added to the first message that holds the tool instructions (e.g.
    what the workspace holds)."""
    protocol = protocol or TOOL_PROTOCOLS["gf2env"]
    messages = protocol.first_messages(query.prompt, view, revise)
    if note:
        held = messages[protocol.instructions_at]
        held["content"] = f"{held['content']}\n\n{note}"
    return ToolEpisode(query, view, messages, protocol, revise, workspace=workspace)


__all__ = ["OUTCOMES", "TOOL_USE_CLASSES", "ToolEpisode", "start_episode"]
