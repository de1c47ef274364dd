"""Tool mode: the model writes Python, the sandbox runs it on the record, the output comes back.

One idea: a tool episode (what the model is told, when a reply runs, when it ends, how it is counted).
How the model is told things is a :class:`ToolProtocol`: gf2env's own (``--tool-protocol gf2env``,
below) or the paper's (``--tool-protocol paper``, :class:`PaperToolProtocol` and
:mod:`gf2env.agents.llm.paper_tools`: its instructions in the user message, its first-block rule, its
globals and limits, its feedback; a reply without code ends the episode). Both share the episode's
budget, its final-answer rule and its counts.

A tool episode for one query under gf2env's protocol (instructions ``tools-v2``):

1. The model gets the step's prompt, with the tool instructions added to the system message: the
   globals the sandbox provides with an example of their use, and the answer's form with an
   example that cannot be an answer (:func:`gf2env.text.prompt.answer_placeholder`).
2. If its reply holds a fenced code block (```python, ```py or a bare ```), the last such block
   outside any reasoning block, dedented as a whole, runs in :class:`gf2env.agents.sandbox.Sandbox` on the
   record's public view (:func:`gf2env.agents.sandbox.record_view`: the prefix, the samples as ints and bit
   strings, n, p, d, g, K and ``answer_offset``; never the answer). Its stdout, stderr and exit
   status go back to the model as the next user turn, and the model may revise, up to
   ``max_revisions`` times (the paper's budget is 10), so an episode has at most
   ``max_revisions + 1`` code runs.
3. A reply without code that holds no answer (a bare list, prose) is not final while turns remain:
   the next user turn says that only a box is graded and asks for one. A reply cut off by
   ``max_tokens`` (finish reason ``length``) inside a code fence that was never closed runs nothing
   (its code is incomplete); like any cut-off reply without code or answer, it gets a turn saying it
   was cut off. Every reply counts against the same budget of ``max_revisions + 1`` replies.
4. The episode ends at the first reply without code that holds an answer, or when the budget is
   spent.

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

import asyncio
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gf2env.agents.llm.paper_tools import (
    PAPER_TOOL_PROTOCOL_ID,
    STOP_DROPPED_IN_TOOL_TURNS,
    first_code_block,
    paper_feedback,
    paper_result,
    paper_tool_message,
)
from gf2env.agents.llm.queries import Backend, Completion, Query, SamplingParams
from gf2env.agents.llm.query_log import unique_entries
from gf2env.errors import GF2ConfigError
from gf2env.task.rules import Failure
from gf2env.text.answers import extract_answer, strip_reasoning
from gf2env.text.prompt import Prompt, answer_placeholder

TOOL_PROMPT_ID = "tools-v2"
TOOL_USE_CLASSES = ("no_tool", "single_tool", "multi_tool")
OUTCOMES = ("answer", "no_answer", "truncated", "error")
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
        "- `n`, `p`, `d`, `g`, `K` (ints): address bits, payload bits, degree, known terms, samples\n"
        "- `prefix`: the known terms in order, each a list of its 0-based payload indices\n"
        "- `samples`: one dict a row: `payload` (its p payload bits as a '0'/'1' string), `address` "
        "(its n address bits), `bits` (address then payload), `x` (`bits` as an int, first address bit "
        "most significant), `y` (the label, 0 or 1)\n"
        f"- `record`: all of these in one dict, and `record['answer_offset']` = {answer_offset}\n"
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
        from gf2env.agents.sandbox import record_view

        return {**record_view(record), "answer_offset": prompt.answer_offset}

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
    """The paper's tool protocol (:mod:`gf2env.agents.llm.paper_tools`): the instructions after the question
    in the user message, the first block runs (a fence never closed too), ``RECORD`` and ``PROMPT``
    without the target, the paper's limits, its feedback, and a reply without code is final. The stop
    strings of :data:`~gf2env.agents.llm.paper_tools.STOP_DROPPED_IN_TOOL_TURNS` are dropped in its turns."""

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


def run_jobs(
    jobs: Sequence[tuple[ToolEpisode, str]],
    run_code: Callable[[Sequence[tuple[str, dict[str, Any]]]], list[Any]],
) -> list[Any]:
    """Sandbox results of ``(episode, code)`` jobs, in order: an episode with a workspace runs there
    (the workspaces in parallel threads), the others through ``run_code`` together."""
    from concurrent.futures import ThreadPoolExecutor

    results: list[Any] = [None] * len(jobs)
    shared = [i for i, (episode, _) in enumerate(jobs) if episode.workspace is None]
    own = [i for i, (episode, _) in enumerate(jobs) if episode.workspace is not None]
    with ThreadPoolExecutor(max_workers=max(1, len(own))) as threads:
        futures = {i: threads.submit(jobs[i][0].workspace.run, jobs[i][1], jobs[i][0].view) for i in own}
        if shared:
            for i, result in zip(
                shared, run_code([(jobs[i][1], jobs[i][0].view) for i in shared]), strict=True
            ):
                results[i] = result
        for i, future in futures.items():
            results[i] = future.result()
    return results


def turn_seed(seed: int, turn: int) -> int:
    """The sampling seed of a turn: the query's at turn 0, then a fixed function of (seed, turn)."""
    return (seed + 1_000_003 * turn) & 0x7FFFFFFF


def tool_usage(lines: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """gf2env's tool-use breakdown from a query log (the paper's table is :func:`paper_tool_usage`):
    per (model, g), how many answered queries made no, one or several tool calls, and the accuracy
    of each class (``None`` where the class is empty; episode mode's steps are the model's row
    ``"<model> (episode)"``);
    then the share of queries whose outcome is ``truncated`` (no answer, the last reply cut off by
    ``max_tokens``) and the number of cut-off replies over all their turns (``0`` for logs from
    before ``tools-v2``, which did not record them)."""
    groups: dict[tuple[str, int], dict[str, list[bool]]] = {}
    truncated: dict[tuple[str, int], list[int]] = {}
    for line in unique_entries(lines):  # a query logged twice counts once
        if line.get("status") != "ok" or "tool_use" not in line:
            continue
        episode = line.get("workspace") == "episode"  # episode mode: a row of its own
        key = (f"{line['model']} (episode)" if episode else line["model"], int(line["g"]))
        cell = groups.setdefault(key, {c: [] for c in TOOL_USE_CLASSES})
        cell[line["tool_use"]].append(bool(line["correct"]))
        counts = truncated.setdefault(key, [0, 0])
        counts[0] += line.get("outcome") == "truncated"
        counts[1] += int(line.get("cut_off_replies", 0))
    rows = []
    for (model, g), cell in sorted(groups.items()):
        total = sum(len(v) for v in cell.values())
        row: dict[str, Any] = {"model": model, "g": g, "queries": total}
        for name, results in cell.items():
            row[f"{name}_share"] = len(results) / total
            row[f"{name}_accuracy"] = sum(results) / len(results) if results else None
        row["truncated_share"] = truncated[model, g][0] / total
        row["cut_off_replies"] = truncated[model, g][1]
        rows.append(row)
    return rows


def format_tool_usage(rows: Sequence[dict[str, Any]]) -> str:
    """:func:`tool_usage` as a text table (shares and accuracies in percent)."""
    head = f"{'model':<24} {'g':>4} {'queries':>7}" + "".join(f" {c:>19}" for c in TOOL_USE_CLASSES)
    head += f" {'truncated':>9} {'cut-off':>7}"
    out = [head, " " * 37 + "   share / accuracy" * len(TOOL_USE_CLASSES) + f" {'share':>9} {'replies':>7}"]
    for r in rows:
        cells = ""
        for c in TOOL_USE_CLASSES:
            acc = r[f"{c}_accuracy"]
            accuracy = f"{100 * acc:>6.1f}%" if acc is not None else "     -"
            cells += f" {100 * r[f'{c}_share']:>8.1f}% / " + accuracy
        cells += f" {100 * r['truncated_share']:>8.1f}% {r['cut_off_replies']:>7}"
        out.append(f"{r['model']:<24} {r['g']:>4} {r['queries']:>7}{cells}")
    return "\n".join(out)


PAPER_TOOL_USAGE_COLUMNS = (
    "model_class", "model", "g", "p",
    "no_tool_rate", "no_tool_n", "single_tool_rate", "single_tool_n", "multi_tool_rate", "multi_tool_n",
)  # fmt: skip


def paper_tool_usage(lines: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The paper's tool-usage table from a query log holding a tool run and a no-tool run of a model:
    per (model class, model, g, p), the accuracy under three budgets and the queries behind each.

    - ``no_tool``: the no-tool run's queries (answered lines without tool episodes);
    - ``single_tool``: the tool run scored on its FIRST sandbox run's output only (an episode whose
      model ran no code scores wrong: the paper's "no code = no credit");
    - ``multi_tool``: the same episodes scored after the whole revise loop (the logged verdict).

    Only models with a tool run have a row; a rate is ``None`` where its budget has no queries
    (e.g. no no-tool run was logged). Episode mode's steps (a workspace kept across depths) are not
    the paper's protocol and are left out."""
    cells: dict[tuple[str, str, int, int], dict[str, list[bool]]] = {}
    plain: dict[tuple[str, str, int, int], list[bool]] = {}
    for line in unique_entries(lines):  # a query logged twice counts once
        if line.get("status") != "ok" or line.get("workspace") == "episode":  # not the paper's protocol
            continue
        model_class = str(line.get("model_class", line.get("backend", "")))
        key = (model_class, line["model"], int(line["g"]), int(line["p"]))
        if "tool_use" in line:
            cell = cells.setdefault(key, {"single_tool": [], "multi_tool": []})
            cell["single_tool"].append(bool(line.get("first_run_correct")))
            cell["multi_tool"].append(bool(line["correct"]))
        else:
            plain.setdefault(key, []).append(bool(line["correct"]))
    rows = []
    for key, cell in sorted(cells.items()):
        model_class, model, g, p = key
        row: dict[str, Any] = {"model_class": model_class, "model": model, "g": g, "p": p}
        for name, results in (("no_tool", plain.get(key, [])), *cell.items()):
            row[f"{name}_rate"] = sum(results) / len(results) if results else None
            row[f"{name}_n"] = len(results)
        rows.append({c: row[c] for c in PAPER_TOOL_USAGE_COLUMNS})
    return rows


def write_paper_tool_usage(path: Any, rows: Sequence[dict[str, Any]]) -> None:
    """:func:`paper_tool_usage`'s rows as CSV with the paper's columns (an empty cell: no queries)."""
    import csv

    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=PAPER_TOOL_USAGE_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})


def format_paper_tool_usage(rows: Sequence[dict[str, Any]]) -> str:
    """:func:`paper_tool_usage` as a text table (rates in percent, with their query counts)."""
    budgets = ("no_tool", "single_tool", "multi_tool")
    out = [f"{'model_class':<16} {'model':<24} {'g':>4} {'p':>3}" + "".join(f" {b:>18}" for b in budgets)]
    for r in rows:
        cells = ""
        for b in budgets:
            rate = r[f"{b}_rate"]
            shown = f"{100 * rate:.1f}%" if rate is not None else "-"
            cells += f" {shown:>10} (n={r[f'{b}_n']:>3})"
        out.append(f"{r['model_class']:<16} {r['model']:<24} {r['g']:>4} {r['p']:>3}{cells}")
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
    :meth:`gf2env.agents.sandbox.SandboxPool.map`); an episode with a ``workspace`` runs its code there.
    ``on_done`` gets each episode as soon as it ends.
    Each turn of an episode is one reply; see the module docs for when an episode ends.
    """
    if max_revisions < 0:
        raise GF2ConfigError(f"max_revisions={max_revisions} is negative; pass 0 or more (paper: 10).")
    active = [e for e in episodes if not e.done]
    protocols = {e.protocol.id for e in active}
    if len(protocols) > 1:
        raise GF2ConfigError(
            f"run_tool_episodes got episodes of several tool protocols {sorted(protocols)}; "
            "run each protocol's episodes in its own call."
        )
    if active:
        params = active[0].protocol.sampling(params)
    for turn in range(max_revisions + 1):
        if not active:
            return
        by_key = {e.query.key: e for e in active}
        asks = [
            Query(e.query.key, e.query.prompt, turn_seed(e.query.seed, turn), "chat", tuple(e.messages))
            for e in active
        ]
        replies = _ask_all(backend, asks, params)
        left = max_revisions - turn
        jobs: list[tuple[ToolEpisode, str]] = []
        still: list[ToolEpisode] = []
        for key, episode in by_key.items():
            code = episode.take_reply(replies[key], left, params.max_tokens)
            if code is not None:
                jobs.append((episode, code))
            elif episode.done:
                on_done(episode)
            else:
                still.append(episode)
        results = run_jobs(jobs, run_code) if jobs else []
        for (episode, _), result in zip(jobs, results, strict=True):
            episode.take_result(result, left)
            if episode.done:
                on_done(episode)
            else:
                still.append(episode)
        active = still


__all__ = [
    "CUT_OFF_FINISH",
    "FEEDBACK_CHARS",
    "OUTCOMES",
    "TOOL_PROMPT_ID",
    "TOOL_PROTOCOLS",
    "TOOL_USE_CLASSES",
    "PAPER_TOOL_USAGE_COLUMNS",
    "PaperToolProtocol",
    "ToolEpisode",
    "ToolProtocol",
    "answer_form",
    "cut_off",
    "extract_code",
    "feedback_message",
    "format_paper_tool_usage",
    "format_tool_usage",
    "has_answer",
    "paper_tool_usage",
    "retry_message",
    "run_report",
    "run_jobs",
    "run_tool_episodes",
    "start_episode",
    "tool_instructions",
    "tool_protocol",
    "tool_usage",
    "turn_seed",
    "write_paper_tool_usage",
]
