"""A real fault-injecting OpenAI-compatible HTTP server on 127.0.0.1, for the tests (not a test file).

The server speaks the chat and completions APIs; the first path segment picks its behaviour
(``ok``, ``fail500``, ``slow``, ``garbage``, ``bad400``), and faults hit only a query's first
attempt unless the mode ends in ``-always`` (``-odd``: every attempt of a query with an odd seed,
and never the others). Hostile servers: ``drip`` sends its body one byte every 50 ms (each read is
quick, the whole takes seconds); ``notutf8`` a body that is not UTF-8; ``fakegzip`` a plain body
labelled ``Content-Encoding: gzip``; ``huge`` a reply of 2 MB before its answer; ``flood`` a body
of 20 MB (``Content-Length`` said), ``flood-unsized`` one without a length (ended by closing the
connection), both written from one 64 KiB chunk (the server holds no 20 MB); ``strtokens`` a
string in ``usage.prompt_tokens``; ``hugetokens`` says 10**30 prompt tokens, ``overcount`` one
completion token more than the request's ``max_tokens``; ``deepjson`` sends a body that is JSON nested
100,000 levels deep; ``hugecount`` counts every prompt 10**30 tokens at ``/tokenize`` (which every
other mode answers 404, like ``transformers serve``). Replies name no model (no ``model`` field)
except in ``named`` (the model the request asked for, as vLLM names it) and ``impostor``
(``impostor-70b``, whatever was asked). ``retry429`` (``Retry-After: 1``), ``retry503date`` (an
HTTP-date 2 s ahead) and ``retry429long`` (``Retry-After: 3600``) refuse first; the time of every
attempt is kept in ``times``. ``solver`` plays a model in tool mode: its first reply
is ``gf2env.train.tool_solvers.DILIGENT_SOLVER`` in a fenced block, and once it has seen the code's
output it replies with the last boxed answer of that output (after an error, it sends the solver).
``solver-buggy`` starts with code that fails; ``solver-cut`` starts with a reply cut off by
``max_tokens`` inside its code block (finish reason ``length``); ``solver-bare`` answers with the
bare list until it is asked for the box; ``truncating`` is always cut off inside its code block.
``tool-builder`` plays a model that builds a tool in episode mode: when its tool instructions list
no ``tools.py`` in the workspace it writes the solver there as ``tools.solve`` and calls it, and when
they do, it imports and calls it; then it boxes what the code printed.
``paper-solver`` plays a model under the paper's tool protocol: to a tool-mode message it replies
with ``gf2env.train.tool_solvers.PAPER_DILIGENT_SOLVER`` in a fenced block (``paper-solver-unclosed``: a
fence never closed, cut off by ``max_tokens``), to the "Execution result:" the box its code printed;
to a prompt without tools it answers like ``ok``.
Stop strings in a request end every reply as vLLM ends it: cut before the first one, finish reason
``stop`` and that string as ``stop_reason`` (``null`` otherwise).
``tests/conftest.py`` serves it as the ``server`` fixture.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gf2env.train.tool_solvers import DILIGENT_SOLVER, PAPER_DILIGENT_SOLVER

SOLVER = DILIGENT_SOLVER
FLOOD_BYTES = 20 * 1024 * 1024  # the body of the flood modes


_BOX = re.compile(r"\\boxed\{(\[[0-9, ]+\])\}")
_CUT = f"Let me decode it.\n```python\n{SOLVER[: len(SOLVER) // 2]}"  # stopped by max_tokens mid-block


def solver_reply(messages: list[dict], mode: str) -> tuple[str, str]:
    """The scripted tool-mode model: code first, then the answer its code printed; with the finish reason."""
    solver = f"<think>I will decode it with code.</think>\n```python\n{SOLVER}```"
    if mode == "truncating" or (mode == "solver-cut" and len(messages) <= 2):
        return _CUT, "length"
    if len(messages) <= 2:
        return (
            "Let me try.\n```python\nprint(undefined_name)\n```" if mode == "solver-buggy" else solver
        ), "stop"
    printed = _BOX.findall(messages[-1]["content"])  # what the code printed
    if mode == "solver-bare" and messages[-1]["content"].startswith("Your reply has no code"):
        printed = _BOX.findall(messages[-3]["content"])  # asked for the box: box what the code printed
        return f"Sorry: \\boxed{{{printed[-1]}}}", "stop"
    if printed and mode == "solver-bare":
        return f"The code found it: {printed[-1]}", "stop"
    return (f"The code found it: \\boxed{{{printed[-1]}}}" if printed else solver), "stop"


TOOL_MODULE = f"SOLVER = {SOLVER!r}\n\n\ndef solve(env):\n    exec(SOLVER, env)\n"
BUILD_TOOL = (
    "import importlib, pathlib\n"
    f"pathlib.Path('tools.py').write_text({TOOL_MODULE!r})\n"
    "importlib.invalidate_caches()\n"
    "import tools\n"
    "tools.solve(globals())\n"
)
USE_TOOL = "import tools\ntools.solve(globals())\n"


def tool_builder_reply(messages: list[dict]) -> tuple[str, str]:
    """The scripted tool builder (see the module docs)."""
    if len(messages) <= 2:
        code = USE_TOOL if "- `tools.py`" in messages[0]["content"] else BUILD_TOOL
        return f"```python\n{code}```", "stop"
    printed = _BOX.findall(messages[-1]["content"])
    return (f"\\boxed{{{printed[-1]}}}" if printed else f"```python\n{BUILD_TOOL}```"), "stop"


def paper_solver_reply(messages: list[dict], mode: str) -> tuple[str, str] | None:
    """The scripted model of the paper's tool protocol, or ``None`` for a conversation without tools."""
    if "TOOL MODE" not in messages[0]["content"]:
        return None
    last = messages[-1]["content"]
    if last.startswith("Execution result:"):
        printed = _BOX.findall(last)
        return (f"Final answer: \\boxed{{{printed[-1]}}}" if printed else "I could not solve it."), "stop"
    if mode == "paper-solver-unclosed":
        return f"Here is my code.\n```python\n{PAPER_DILIGENT_SOLVER}", "length"
    return f"Here is my code.\n```python\n{PAPER_DILIGENT_SOLVER}```\nIt prints the answer.", "stop"


class FaultServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.attempts: Counter = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.bodies: list[dict] = []
        self.times: dict[tuple[str, int], list[float]] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: FaultServer

    def log_message(self, *args) -> None:  # keep the test output clean
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        mode = self.path.strip("/").split("/")[0]
        if self.path.endswith("/tokenize"):  # like transformers serve: no token counting
            if mode == "hugecount":  # counts every prompt 10**30 tokens
                return self._send(200, json.dumps({"count": 10**30, "max_model_len": 4096}).encode())
            return self._send(404, b'{"detail": "Not Found"}')
        with self.server.lock:
            self.server.bodies.append(body)
            key = (mode, body["seed"])
            self.server.attempts[key] += 1
            self.server.times.setdefault(key, []).append(time.monotonic())
            first = self.server.attempts[key] == 1
            self.server.in_flight += 1
            self.server.max_in_flight = max(self.server.max_in_flight, self.server.in_flight)
        # in_flight is released in _send, before the client can see the answer
        if True:
            fault = mode.endswith("-always") or first
            if mode.endswith("-odd"):  # every attempt of the queries with an odd seed, none of the others
                fault = body["seed"] % 2 == 1
            base = mode.removesuffix("-always").removesuffix("-odd")
            time.sleep(0.05)
            if base == "fail500" and fault:
                return self._send(500, b'{"error": "boom"}')
            if base == "slow" and fault:
                time.sleep(1.5)
            if base == "garbage" and fault:
                return self._send(200, b"<html>not json")
            if base == "notutf8" and fault:
                reply = '{"choices": [{"message": {"content": "caf\u00e9"}, "finish_reason": "stop"}]}'
                return self._send(200, reply.encode("latin-1"))
            if base == "fakegzip" and fault:
                return self._send(200, b'{"choices": []}', {"Content-Encoding": "gzip"})
            if base == "retry429" and fault:
                return self._send(429, b'{"error": "busy"}', {"Retry-After": "1"})
            if base == "retry429long" and fault:
                return self._send(429, b'{"error": "busy"}', {"Retry-After": "3600"})
            if base == "retry503date" and fault:
                when = formatdate(time.time() + 2, usegmt=True)
                return self._send(503, b'{"error": "busy"}', {"Retry-After": when})
            if base in ("flood", "flood-unsized") and fault:
                return self._flood(FLOOD_BYTES, sized=base == "flood")
            if base == "deepjson" and fault:
                return self._send(200, b"[" * 100_000 + b"]" * 100_000)
            if base == "bad400":
                return self._send(400, b'{"error": "bad request"}')
            text, finish = f"answer \\boxed{{[{body['seed'] % 7}, 8, 9]}}", "stop"
            if base in ("solver", "solver-buggy", "solver-cut", "solver-bare", "truncating"):
                text, finish = solver_reply(body["messages"], base)
            if base == "tool-builder":
                text, finish = tool_builder_reply(body["messages"])
            if base.startswith("paper-solver") and "messages" in body:
                text, finish = paper_solver_reply(body["messages"], base) or (text, finish)
            if base == "huge":  # 2 MB of thinking before the answer
                text = "Let me think. " + "x" * 2_000_000 + text
            hits = sorted((text.index(s), s) for s in body.get("stop") or () if s in text)
            stop_reason = None
            if hits:
                text, finish, stop_reason = text[: hits[0][0]], "stop", hits[0][1]
            choice = (
                {"message": {"role": "assistant", "content": text}} if "messages" in body else {"text": text}
            )
            usage: dict = {"prompt_tokens": 11, "completion_tokens": 7}
            if base == "strtokens" and fault:
                usage["prompt_tokens"] = "11"
            if base == "hugetokens" and fault:
                usage["prompt_tokens"] = 10**30
            if base == "overcount" and fault:
                usage["completion_tokens"] = body["max_tokens"] + 1
            reply = {
                "choices": [{**choice, "finish_reason": finish, "stop_reason": stop_reason}],
                "usage": usage,
            }
            if base in ("named", "impostor"):
                reply["model"] = body["model"] if base == "named" else "impostor-70b"
            self._send(200, json.dumps(reply).encode(), drip=base == "drip" and fault)

    def _flood(self, size: int, sized: bool) -> None:
        """A 200 reply whose body is ``size`` bytes that start like a completion and never end it."""
        with self.server.lock:
            self.server.in_flight -= 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if sized:
            self.send_header("Content-Length", str(size))
        self.end_headers()
        head = b'{"choices": [{"message": {"role": "assistant", "content": "'
        chunk = b"x" * 65536
        try:
            self.wfile.write(head)
            full, rest = divmod(size - len(head), len(chunk))
            for _ in range(full):
                self.wfile.write(chunk)
            self.wfile.write(chunk[:rest])
        except OSError:  # the client gave up reading: what its cap is for
            pass

    def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None, drip=False) -> None:
        with self.server.lock:
            self.server.in_flight -= 1
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if not drip:
            self.wfile.write(payload)
            return
        try:
            for i in range(len(payload)):  # one byte every 50 ms: no read waits long, the whole does
                self.wfile.write(payload[i : i + 1])
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:  # the client gave up: what a deadline is for
            pass
