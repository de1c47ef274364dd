"""Tool mode: the model writes Python, the sandbox runs it on the record, the output comes back.

A tool episode for one query (instructions ``tools-v1``):

1. The model gets the step's prompt, with the tool instructions added to the system message.
2. If its reply holds a fenced code block (```python, ```py or a bare ```), the last such block
   outside any reasoning block, dedented as a whole, runs in :class:`agents.sandbox.Sandbox` on the
   record's public view (:func:`agents.sandbox.record_view`: the prefix, the samples as ints and bit
   strings, n, p, d, g, K and ``answer_offset``; never the answer). Its stdout, stderr and exit
   status go back to the model as the next user turn, and the model may revise, up to
   ``max_revisions`` times (the paper's budget is 10), so an episode has at most
   ``max_revisions + 1`` code runs.
3. The episode ends at the first reply without code, or when the budget is spent.

**The final answer** (graded by :func:`gf2env.text.answers.score_answer`, the text scorer):

- the episode ended with a reply without code, and that reply holds an answer → that reply;
- otherwise the stdout of the last run that printed an answer (a boxed term, or any answer the
  scorer's lenient grammar takes) → that stdout;
- otherwise the last reply (which then scores ``no_answer`` or whatever it holds).

Every episode reports its turns (reply, code, sandbox result), the number of tool calls, the
sandbox time, the runs that did not exit cleanly, where the answer came from, and the paper's
tool-usage class: ``no_tool`` (0 runs), ``single_tool`` (1) or ``multi_tool`` (2 or more).
"""

from __future__ import annotations

import asyncio
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.llm.queries import Backend, Completion, Query, SamplingParams
from gf2env.errors import GF2ConfigError
from gf2env.rules import Failure
from gf2env.text.answers import extract_answer, strip_reasoning

TOOL_PROMPT_ID = "tools-v1"
TOOL_USE_CLASSES = ("no_tool", "single_tool", "multi_tool")
FEEDBACK_CHARS = 4000  # of stdout / stderr shown back to the model (the full capture is logged)

_CODE_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)


def tool_instructions(answer_offset: int) -> str:
    """What the model is told about the tool (appended to the system message)."""
    return (
        "You can run Python 3 to solve this. Put code in one fenced block (```python ... ```); it runs "
        "in a sandbox with numpy and the standard library (no network, no files of the host) and its "
        "printed output is sent back to you. The record is already loaded: `n`, `p`, `d`, `g`, `K`, "
        "`prefix` (the known terms, each a list of 0-based payload indices, in order) and `samples` "
        "(a list of dicts: `x` the sample as an int of n+p bits, first address bit most significant; "
        "`bits` the same as a string of '0'/'1'; `address` its n address bits and `payload` its p "
        "payload bits as strings; `y` the label), also all in the dict `record`. Payload index j is "
        f"the prompt's variable {answer_offset} + j (`record['answer_offset']` = {answer_offset}). "
        "Print the answer as \\boxed{[i1, i2, i3]} in the prompt's indices. When you have the answer, "
        "reply with it and no code; otherwise send corrected code."
    )


def extract_code(text: str) -> str | None:
    """The last fenced code block outside reasoning blocks, dedented as a whole, or ``None``.

    Models indent a block that sits in a list item or under prose; its common leading whitespace is
    removed (:func:`textwrap.dedent`) so that it does not fail with ``IndentationError``.
    """
    visible, _ = strip_reasoning(text)
    blocks = _CODE_BLOCK.findall(visible)
    return textwrap.dedent(blocks[-1]) if blocks else None


def has_answer(text: str) -> bool:
    """Whether the scorer finds an answer (right or wrong, conflicting included) in ``text``."""
    return extract_answer(text).failure is not Failure.NO_ANSWER


def _clip(text: str, limit: int = FEEDBACK_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters]"


def feedback_message(result: Any, runs_left: int) -> str:
    """The user turn that reports a sandbox run back to the model."""
    status = f"exit code {result.exit_code}" if result.exit_code is not None else "killed"
    parts = [f"Your code ran ({status}, {result.stop_reason}, {result.wall_s:.2f} s)."]
    out = _clip(result.stdout)
    parts.append(f"stdout:\n```\n{out}\n```" if out else "stdout: (empty)")
    if result.stdout_truncated:
        parts.append(f"(stdout was cut at {len(result.stdout)} characters)")
    if result.stderr:
        parts.append(f"stderr:\n```\n{_clip(result.stderr)}\n```")
    parts.append(
        f"Reply with the answer as \\boxed{{[i1, i2, i3]}} and no code, or send corrected code "
        f"({runs_left} more run{'s' if runs_left != 1 else ''} allowed)."
    )
    return "\n".join(parts)


@dataclass
class ToolEpisode:
    """One query's tool conversation, and how it ended."""

    query: Query
    view: dict[str, Any]
    messages: list[dict[str, str]]
    turns: list[dict[str, Any]] = field(default_factory=list)
    final_text: str = ""
    answer_source: str = "reply"
    error: str | None = None
    errors: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    server: str | None = None
    done: bool = False

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

    def finish(self) -> None:
        """Choose the final answer by the module's precedence."""
        self.done = True
        last = self.turns[-1]
        if last["code"] is None and has_answer(last["response"]):
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
        )  # fmt: skip

    def summary(self) -> dict[str, Any]:
        """What the log records about the episode besides the final text."""
        return {
            "tool_prompt_id": TOOL_PROMPT_ID,
            "tool_calls": self.tool_calls,
            "tool_use": self.tool_use,
            "sandbox_s": round(self.sandbox_s, 4),
            "sandbox_errors": self.sandbox_errors,
            "answer_source": self.answer_source,
            "turns": self.turns,
        }


def start_episode(query: Query, view: dict[str, Any]) -> ToolEpisode:
    """The first turn of a tool episode: the prompt with the tool instructions in the system message."""
    system = f"{query.prompt.system}\n\n{tool_instructions(query.prompt.answer_offset)}"
    messages = [{"role": "system", "content": system}, {"role": "user", "content": query.prompt.text}]
    return ToolEpisode(query, view, messages)


def turn_seed(seed: int, turn: int) -> int:
    """The sampling seed of a turn: the query's at turn 0, then a fixed function of (seed, turn)."""
    return (seed + 1_000_003 * turn) & 0x7FFFFFFF


def tool_usage(lines: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The paper's tool-usage table from a query log: per (model, g), how many answered queries made
    no, one or several tool calls, and the accuracy of each class (``None`` where the class is empty)."""
    groups: dict[tuple[str, int], dict[str, list[bool]]] = {}
    for line in lines:
        if line.get("status") != "ok" or "tool_use" not in line:
            continue
        cell = groups.setdefault((line["model"], int(line["g"])), {c: [] for c in TOOL_USE_CLASSES})
        cell[line["tool_use"]].append(bool(line["correct"]))
    rows = []
    for (model, g), cell in sorted(groups.items()):
        total = sum(len(v) for v in cell.values())
        row: dict[str, Any] = {"model": model, "g": g, "queries": total}
        for name, results in cell.items():
            row[f"{name}_share"] = len(results) / total
            row[f"{name}_accuracy"] = sum(results) / len(results) if results else None
        rows.append(row)
    return rows


def format_tool_usage(rows: Sequence[dict[str, Any]]) -> str:
    """:func:`tool_usage` as a text table (shares and accuracies in percent)."""
    head = f"{'model':<24} {'g':>4} {'queries':>7}" + "".join(f" {c:>19}" for c in TOOL_USE_CLASSES)
    out = [head, " " * 37 + "   share / accuracy" * len(TOOL_USE_CLASSES)]
    for r in rows:
        cells = ""
        for c in TOOL_USE_CLASSES:
            acc = r[f"{c}_accuracy"]
            accuracy = f"{100 * acc:>6.1f}%" if acc is not None else "     -"
            cells += f" {100 * r[f'{c}_share']:>8.1f}% / " + accuracy
        out.append(f"{r['model']:<24} {r['g']:>4} {r['queries']:>7}{cells}")
    return "\n".join(out)


def _ask_all(backend: Backend, queries: Sequence[Query], params: SamplingParams) -> dict[str, Completion]:
    replies: dict[str, Completion] = {}

    def keep(completion: Completion) -> None:
        replies.setdefault(completion.key, completion)

    asyncio.run(backend.run(queries, params, keep))
    return replies


def run_tool_episodes(
    backend: Backend,
    episodes: Sequence[ToolEpisode],
    params: SamplingParams,
    run_code: Callable[[Sequence[tuple[str, dict[str, Any]]]], list[Any]],
    max_revisions: int,
    on_done: Callable[[ToolEpisode], None],
) -> None:
    """Play every episode to its end, all active episodes a turn at a time (batched on the backend).

    ``run_code`` runs ``(code, view)`` jobs and returns sandbox results in order (e.g.
    :meth:`agents.sandbox.SandboxPool.map`). ``on_done`` gets each episode as soon as it ends.
    """
    if max_revisions < 0:
        raise GF2ConfigError(f"max_revisions={max_revisions} is negative; pass 0 or more (paper: 10).")
    active = [e for e in episodes if not e.done]
    for turn in range(max_revisions + 1):
        if not active:
            return
        by_key = {e.query.key: e for e in active}
        asks = [
            Query(e.query.key, e.query.prompt, turn_seed(e.query.seed, turn), "chat", tuple(e.messages))
            for e in active
        ]
        replies = _ask_all(backend, asks, params)
        jobs: list[tuple[ToolEpisode, str]] = []
        for key, episode in by_key.items():
            reply = replies[key]
            episode.prompt_tokens += reply.prompt_tokens or 0
            episode.completion_tokens += reply.completion_tokens or 0
            episode.latency_s += reply.latency_s
            episode.server = reply.server
            episode.errors.extend(reply.errors)
            if reply.error:
                episode.error, episode.done = reply.error, True
                on_done(episode)
                continue
            code = extract_code(reply.text)
            episode.turns.append(
                {"response": reply.text, "code": code, "sandbox": None, "finish_reason": reply.finish_reason}
            )
            episode.messages.append({"role": "assistant", "content": reply.text})
            if code is None:
                episode.finish()
                on_done(episode)
            else:
                jobs.append((episode, code))
        results = run_code([(code, episode.view) for episode, code in jobs]) if jobs else []
        still = []
        for (episode, _), result in zip(jobs, results, strict=True):
            episode.turns[-1]["sandbox"] = result.to_dict()
            if turn == max_revisions:
                episode.finish()
                on_done(episode)
            else:
                message = feedback_message(result, max_revisions - turn)
                episode.messages.append({"role": "user", "content": message})
                still.append(episode)
        active = still


__all__ = [
    "FEEDBACK_CHARS",
    "TOOL_PROMPT_ID",
    "TOOL_USE_CLASSES",
    "ToolEpisode",
    "extract_code",
    "feedback_message",
    "format_tool_usage",
    "has_answer",
    "run_tool_episodes",
    "start_episode",
    "tool_instructions",
    "tool_usage",
    "turn_seed",
]
