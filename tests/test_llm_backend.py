"""The OpenAI-compatible backend against a real fault-injecting HTTP server on 127.0.0.1.

The server speaks the chat and completions APIs; the first path segment picks its behaviour
(``ok``, ``fail500``, ``slow``, ``garbage``, ``bad400``), and faults hit only a query's first
attempt unless the mode ends in ``-always``. ``solver`` plays a model in tool mode: its first reply
is ``agents.tool_solvers.DILIGENT_SOLVER`` in a fenced block, and once it has seen the code's
output it replies with the last boxed answer of that output (after an error, it sends the solver).
``solver-buggy`` starts with code that fails.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agents.llm import Completion, OpenAICompatibleBackend, Query, SamplingParams, request_body
from agents.tool_solvers import DILIGENT_SOLVER
from gf2env.prompt import Prompt

pytest.importorskip("httpx")

SOLVER = DILIGENT_SOLVER


def solver_reply(messages: list[dict], buggy: bool) -> str:
    """The scripted tool-mode model: code first, then the answer its code printed."""
    solver = f"<think>I will decode it with code.</think>\n```python\n{SOLVER}```"
    if len(messages) <= 2:
        return "Let me try.\n```python\nprint(undefined_name)\n```" if buggy else solver
    boxes = re.findall(r"\\boxed\{\[[0-9, ]+\]\}", messages[-1]["content"])  # what the code printed
    return f"The code found it: {boxes[-1]}" if boxes else solver


class FaultServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.attempts: Counter = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.bodies: list[dict] = []

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
        with self.server.lock:
            self.server.bodies.append(body)
            key = (mode, body["seed"])
            self.server.attempts[key] += 1
            first = self.server.attempts[key] == 1
            self.server.in_flight += 1
            self.server.max_in_flight = max(self.server.max_in_flight, self.server.in_flight)
        # in_flight is released in _send, before the client can see the answer
        if True:
            fault = mode.endswith("-always") or first
            base = mode.removesuffix("-always")
            time.sleep(0.05)
            if base == "fail500" and fault:
                return self._send(500, b'{"error": "boom"}')
            if base == "slow" and fault:
                time.sleep(1.5)
            if base == "garbage" and fault:
                return self._send(200, b"<html>not json")
            if base == "bad400":
                return self._send(400, b'{"error": "bad request"}')
            text = f"answer \\boxed{{[{body['seed'] % 7}, 8, 9]}}"
            if base in ("solver", "solver-buggy"):
                text = solver_reply(body["messages"], buggy=base == "solver-buggy")
            choice = (
                {"message": {"role": "assistant", "content": text}} if "messages" in body else {"text": text}
            )
            usage = {"prompt_tokens": 11, "completion_tokens": 7}
            self._send(
                200, json.dumps({"choices": [{**choice, "finish_reason": "stop"}], "usage": usage}).encode()
            )

    def _send(self, status: int, payload: bytes) -> None:
        with self.server.lock:
            self.server.in_flight -= 1
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def server():
    srv = FaultServer()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def queries(count: int, api: str = "chat") -> list[Query]:
    prompt = Prompt(prompt_id="paper-v1", text="find the term", answer_offset=0)
    return [Query(key=f"q{i}", prompt=prompt, seed=100 + i, api=api) for i in range(count)]


def run(backend: OpenAICompatibleBackend, qs: list[Query]) -> dict[str, Completion]:
    out: dict[str, Completion] = {}
    asyncio.run(
        backend.run(qs, SamplingParams(temperature=0.7, max_tokens=32), lambda c: out.setdefault(c.key, c))
    )
    assert len(out) == len(qs)
    return out


def test_chat_and_completions_requests_carry_seed_and_sampling(server):
    backend = OpenAICompatibleBackend([f"{server.url}/ok"], model="tiny", backoff=0.01)
    chat = run(backend, queries(3))
    plain = run(backend, queries(2, api="completions"))
    assert all(c.error is None and c.attempts == 1 for c in [*chat.values(), *plain.values()])
    assert chat["q1"].text == "answer \\boxed{[3, 8, 9]}" and chat["q1"].prompt_tokens == 11
    assert plain["q0"].completion_tokens == 7 and plain["q0"].finish_reason == "stop"
    body = server.bodies[0]
    assert body["model"] == "tiny" and body["temperature"] == 0.7 and body["max_tokens"] == 32
    assert {b["seed"] for b in server.bodies} == {100, 101, 102}
    assert "prompt" in server.bodies[-1] and server.bodies[-1]["prompt"].endswith("Solution:\n")


@pytest.mark.parametrize("mode", ["fail500", "slow", "garbage"])
def test_transient_faults_are_retried(server, mode):
    backend = OpenAICompatibleBackend([f"{server.url}/{mode}"], model="tiny", timeout=0.5, backoff=0.01)
    out = run(backend, queries(4))
    for c in out.values():
        assert c.error is None and c.attempts == 2 and len(c.errors) == 1, c


@pytest.mark.parametrize(("mode", "attempts"), [("fail500-always", 3), ("garbage-always", 3), ("bad400", 1)])
def test_persistent_faults_are_recorded_not_raised(server, mode, attempts):
    backend = OpenAICompatibleBackend([f"{server.url}/{mode}"], model="tiny", max_retries=2, backoff=0.01)
    out = run(backend, queries(3))
    for c in out.values():
        assert c.error and c.text == "" and c.attempts == attempts


def test_connection_refused_is_recorded_and_a_retry_moves_to_the_next_replica(server):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        alone = run(OpenAICompatibleBackend([dead], model="tiny", max_retries=1, backoff=0.01), queries(2))
        assert all("ConnectError" in c.error for c in alone.values())
        both = run(
            OpenAICompatibleBackend([dead, f"{server.url}/ok"], model="tiny", backoff=0.01), queries(4)
        )
    assert all(c.error is None for c in both.values())
    assert sorted(c.attempts for c in both.values()) == [1, 1, 2, 2]  # half started on the dead one


def test_round_robin_and_bounded_concurrency(server):
    urls = [f"{server.url}/ok", f"{server.url}/okb/"]  # two replicas (two paths of one server)
    backend = OpenAICompatibleBackend(urls, model="tiny", concurrency=2)
    out = run(backend, queries(12))
    assert Counter(c.server for c in out.values()) == {f"{server.url}/ok/v1": 6, f"{server.url}/okb/v1": 6}
    assert server.max_in_flight <= 4  # 2 a replica


def test_request_body_of_each_api():
    q = queries(1)[0]
    assert request_body(q, SamplingParams(stop=("</answer>",)), "m")["stop"] == ["</answer>"]
    assert request_body(q, SamplingParams(), "m")["messages"][1]["content"] == "find the term"
