"""The resumable query log of an evaluation: one JSON line per query, resumed by key.

Results are appended to a JSON Lines log as each completes, one ``os.write`` a line; a run killed
at any point loses only the queries in flight, and a partial last line (a kill mid-write) is cut off
when the log is next opened. Resuming skips the keys already answered (``status == "ok"``; a key is
a query's content hash, :mod:`gf2env.agents.llm.planning`), never by position; failed queries
(``status == "error"``) are asked again. A run holds the log (:meth:`QueryLog.locked`): a second
run on it is refused; a key logged twice all the same counts once (:func:`unique_entries`).

A line's ``model`` is the model asked; ``answered_by`` is the model the server's reply named instead,
when it named another (``null``: the one asked, or none named); such a reply still counts.

A reply longer than :data:`RESPONSE_KEEP_CHARS` (256 Ki characters) is scored whole, then kept only
as its tail, with ``response_truncated_chars`` (0 when whole) saying how much was cut; so are the
replies of a tool episode's turns. The entry's ``score`` is the whole reply's (a box in the cut
head, e.g. a conflicting one, still counts).

:func:`log_entry` is the line of one answered query (the scorer's verdict included);
:func:`log_rows` turns a log alone into the tidy results rows of :mod:`gf2env.report.results` (one
row a query), so the summary, plots and effective-prefix fit are the estimators' own;
:func:`entry_compute` is what a query cost, in the results' compute columns.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gf2env.agents.llm.grading import Verdict
from gf2env.agents.llm.planning import Planned
from gf2env.agents.llm.queries import Backend, Completion, SamplingParams
from gf2env.errors import GF2ConfigError, RecordFormatError
from gf2env.task.combinatorics import rank_support

#: Characters of a reply the log keeps (256 Ki): a longer reply is scored whole, then only its last
#: this many characters are kept (the scorer reads the last answer, so the tail is what matters),
#: and ``response_truncated_chars`` says how many were cut from its start.
RESPONSE_KEEP_CHARS = 256 * 1024


def kept_reply(text: str) -> tuple[str, int]:
    """The tail of ``text`` the log keeps, and the number of characters cut from its start."""
    cut = max(0, len(text) - RESPONSE_KEEP_CHARS)
    return text[cut:], cut


class QueryLog:
    """The append-only JSON Lines log of one evaluation."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair()

    def _repair(self) -> None:
        """Cut a partial last line (a run killed mid-write) so that every line is whole JSON."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(self.path, "r+b") as fh:
                fh.truncate(data.rfind(b"\n") + 1)

    def lines(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        for number, line in enumerate(self.path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except (json.JSONDecodeError, RecursionError) as err:
                why = "nested too deeply" if isinstance(err, RecursionError) else str(err)
                damaged = f"{self.path}:{number} is not JSON ({why}); the log is damaged."
                raise RecordFormatError(damaged) from None
        return out

    def done(self) -> set[str]:
        """Keys of the queries answered already."""
        return {line["key"] for line in self.lines() if line.get("status") == "ok"}

    def answered(self) -> dict[str, dict[str, Any]]:
        """The answered entries (``status == "ok"``) by key."""
        return {line["key"]: line for line in self.lines() if line.get("status") == "ok"}

    @contextmanager
    def locked(self, option: str = "--out") -> Iterator[QueryLog]:
        """Hold the log for one run: an exclusive ``flock`` on ``<log>.lock`` beside it, released when
        the block ends (or the process does); while held, another run on it is refused with
        GF2ConfigError (two runs would ask every query twice), which names ``option``, the setting
        that picks another folder."""
        lock = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise GF2ConfigError(
                    f"{self.path.parent} is in use by another run: its query log {self.path.name} is "
                    f"locked ({lock}). Wait for that run to end, or pass another {option}."
                ) from None
            yield self
        finally:
            os.close(fd)  # closing the file releases the lock

    def append(self, entry: dict[str, Any]) -> None:
        data = (json.dumps(entry, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)


def log_entry(
    planned: Planned,
    completion: Completion,
    params: SamplingParams,
    backend: Backend,
    verdict: Verdict,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON line of one answered (or failed) query (``extra``: e.g. a tool episode's turns, kept
    cut like the reply). ``verdict`` is the grader's (:func:`gf2env.agents.llm.grading.grade`): the log
    records it and grades nothing itself."""
    rec = planned.record
    if extra is not None and "turns" in extra:
        extra = {**extra, "turns": [_kept_turn(t) for t in extra["turns"]]}  # graded whole: now cut
    first_run = {"first_run_correct": verdict.first_run_correct} if verdict.tools else {}
    response, cut = kept_reply(completion.text)
    return {
        "key": planned.query.key,
        "status": "error" if completion.error else "ok",
        **backend.describe(),
        "server": completion.server,
        "answered_by": completion.answered_by,
        "prompt_id": planned.query.prompt.prompt_id,
        "api": planned.query.api,
        "system": planned.query.prompt.system,
        "prompt": planned.query.prompt.text,
        "response": response, "response_truncated_chars": cut,
        "score": verdict.score.to_dict(),
        "correct": bool(verdict.score.correct) and not completion.error,
        "target": list(rec.target),
        "p": rec.p, "d": rec.d, "K": rec.K, "n": rec.n, "g": rec.g,
        "source": planned.source, "sampling": planned.sampling, "trial": planned.trial,
        "sample": planned.sample, "seed": planned.query.seed,
        "params": params.to_dict(),
        "prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
        "finish_reason": completion.finish_reason, "stop_reason": completion.stop_reason,
        "latency_s": round(completion.latency_s, 4), "attempts": completion.attempts,
        "error": completion.error, "errors": completion.errors,
        **(extra or {}),
        **first_run,
        "time": time.time(),
    }  # fmt: skip


def _kept_turn(turn: dict[str, Any]) -> dict[str, Any]:
    """A tool turn as the log keeps it: its reply cut like a query's (see :func:`kept_reply`)."""
    if not isinstance(turn.get("response"), str):
        return turn
    response, cut = kept_reply(turn["response"])
    return {**turn, "response": response, "response_truncated_chars": cut}


def entry_action(entry: dict[str, Any]) -> int:
    """The candidate rank a log entry answered, or ``-1`` when its answer is not a well-formed term."""
    indices = entry["score"]["indices"]
    if entry["score"]["failure"] not in ("none", "wrong_term") or indices is None:
        return -1
    return rank_support(indices, entry["p"])


def unique_entries(lines: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line a query key, in the order keys first appear: its last answered line, else its last
    line (a key logged twice, e.g. by two runs on one log, counts once; a line without a key, made
    by hand, stands alone)."""
    best: dict[Any, dict[str, Any]] = {}
    for i, line in enumerate(lines):
        key = line.get("key", ("line", i))
        held = best.get(key)
        if held is None or line.get("status") == "ok" or held.get("status") != "ok":
            best[key] = line
    return list(best.values())


def entry_compute(entry: dict[str, Any]) -> dict[str, float | None]:
    """What one answered query cost, as the compute columns of ``gf2env.report.results`` (``None``:
    unknown): its tokens, model latency and (tool mode: a line with ``turns``) sandbox runs and time;
    ``wall_ms`` is model + sandbox time. A query without tools ran no code: 0 runs, 0 ms."""

    def ms(seconds: Any) -> float | None:
        return None if seconds is None else 1000.0 * float(seconds)

    def number(value: Any) -> float | None:
        return None if value is None else float(value)

    tools = "turns" in entry
    model_ms = ms(entry.get("latency_s"))
    sandbox_ms = ms(entry.get("sandbox_s")) if tools else 0.0
    runs = number(entry.get("tool_calls")) if tools else 0.0
    return {
        "wall_ms": None if model_ms is None or sandbox_ms is None else model_ms + sandbox_ms,
        "model_ms": model_ms,
        "prompt_tokens": number(entry.get("prompt_tokens")),
        "completion_tokens": number(entry.get("completion_tokens")),
        "sandbox_runs": runs,
        "sandbox_ms": sandbox_ms,
    }


def mean_compute(entries: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """The mean of :func:`entry_compute` over ``entries`` (a record's samples), column by column, over
    the entries that know it (``None``: none does)."""
    each = [entry_compute(e) for e in entries]
    out: dict[str, float | None] = {}
    for column in each[0] if each else ():
        known = [value for c in each if (value := c[column]) is not None]
        out[column] = sum(known) / len(known) if known else None
    return out


def log_rows(lines: Sequence[dict[str, Any]], agent: str | None = None) -> list[dict[str, Any]]:
    """Tidy results rows (``gf2env.report.results.RESULT_COLUMNS``) of the answered queries of a log,
    one a query however often it was logged (:func:`unique_entries`), with what it cost
    (:func:`entry_compute`)."""
    from math import comb

    rows = []
    for line in unique_entries(lines):
        if line.get("status") != "ok":
            continue
        p, d = line["p"], line["d"]
        action = entry_action(line)
        rows.append(
            {
                "agent": agent or line["model"], "source": line["source"], "sampling": line["sampling"],
                "p": p, "d": d, "K": line["K"], "n": line["n"], "g": line["g"], "trial": line["trial"],
                "seed": line["seed"], "gamma": float(line["correct"]), "correct": int(line["correct"]),
                "action": action, "target": rank_support(line["target"], p), "num_candidates": comb(p, d - 1),
                **entry_compute(line),
            }
        )  # fmt: skip
    return rows


__all__ = [
    "RESPONSE_KEEP_CHARS",
    "QueryLog",
    "entry_action",
    "entry_compute",
    "kept_reply",
    "log_entry",
    "log_rows",
    "mean_compute",
    "unique_entries",
]
