"""The OpenAI-compatible backend against a real fault-injecting HTTP server on 127.0.0.1
(``tests/fault_server.py``, the ``server`` fixture of ``tests/conftest.py``)."""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections import Counter
from email.utils import formatdate

import pytest

from gf2env.agents.llm.openai_server import OpenAICompatibleBackend, request_body, retry_after_seconds
from gf2env.agents.llm.queries import Completion, Query, SamplingParams
from gf2env.task.rules import Failure
from gf2env.text.answers import score_answer
from gf2env.text.prompt import Prompt

pytest.importorskip("httpx")


def queries(count: int, api: str = "chat") -> list[Query]:
    prompt = Prompt(prompt_id="plain-v1", text="find the term", answer_offset=0)
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


def test_a_stop_string_that_ended_the_reply_is_reported_and_scored_put_back(server):
    backend = OpenAICompatibleBackend([f"{server.url}/ok"], model="tiny", backoff=0.01)
    out: dict[str, Completion] = {}
    params = SamplingParams(max_tokens=32, stop=("]}", "<|im_end|>"))  # the paper's stop strings
    asyncio.run(backend.run(queries(2), params, lambda c: out.setdefault(c.key, c)))
    cut = out["q0"]  # seed 100: the server's answer is \boxed{[2, 8, 9]}, cut at ]}
    assert (cut.text, cut.finish_reason, cut.stop_reason) == ("answer \\boxed{[2, 8, 9", "stop", "]}")
    assert server.bodies[-1]["stop"] == ["]}", "<|im_end|>"]
    assert score_answer(cut.text, (2, 8, 9), 12, 0, stopped_by=cut.stop_reason).correct
    assert score_answer(cut.text, (2, 8, 9), 12, 0).failure is Failure.NO_ANSWER  # nothing is guessed
    plain = run(backend, queries(1))["q0"]  # no stop string in the request: none reported
    assert plain.stop_reason is None and plain.text.endswith("]}")


@pytest.mark.parametrize(
    "mode", ["fail500", "slow", "garbage", "notutf8", "fakegzip", "strtokens", "hugetokens", "overcount",
             "deepjson"]
)  # fmt: skip
def test_transient_faults_are_retried(server, mode):
    backend = OpenAICompatibleBackend([f"{server.url}/{mode}"], model="tiny", timeout=0.5, backoff=0.01)
    out = run(backend, queries(4))
    for c in out.values():
        assert c.error is None and c.attempts == 2 and len(c.errors) == 1, c


@pytest.mark.parametrize(
    ("mode", "attempts"),
    [
        ("fail500-always", 3),
        ("garbage-always", 3),
        ("bad400", 1),
        ("notutf8-always", 3),
        ("fakegzip-always", 3),
        ("strtokens-always", 3),
        ("hugetokens-always", 3),
        ("overcount-always", 3),
        ("deepjson-always", 3),
    ],
)
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


def test_a_server_dripping_its_body_meets_the_deadline_of_a_request_and_is_retried(server):
    # Each byte comes within 50 ms (a per-read timeout never fires); the whole body takes ~10 s.
    backend = OpenAICompatibleBackend([f"{server.url}/drip"], model="tiny", timeout=0.5, backoff=0.01)
    start = time.monotonic()
    out = run(backend, queries(2))
    assert time.monotonic() - start < 4
    for c in out.values():
        assert c.error is None and c.attempts == 2 and "deadline" in c.errors[0], c


@pytest.mark.parametrize(("mode", "least"), [("retry429", 0.95), ("retry503date", 0.5)])
def test_retry_after_of_a_busy_server_is_honoured(server, mode, least):
    # Retry-After: 1 (seconds) or an HTTP-date 2 s ahead (whole seconds: 1 to 2 s from the refusal).
    backend = OpenAICompatibleBackend([f"{server.url}/{mode}"], model="tiny", backoff=0.01)
    out = run(backend, queries(2))
    assert all(c.error is None and c.attempts == 2 for c in out.values())
    for times in server.times.values():
        assert least <= times[1] - times[0] < 3, times


def test_retry_after_is_capped(server):
    backend = OpenAICompatibleBackend([f"{server.url}/retry429long"], model="tiny", backoff=0.01,
                                      max_retry_after=0.4)  # fmt: skip
    start = time.monotonic()
    out = run(backend, queries(2))
    assert all(c.error is None and c.attempts == 2 for c in out.values())
    assert time.monotonic() - start < 3
    assert all(0.35 <= times[1] - times[0] for times in server.times.values())


def test_retry_after_values_a_server_may_send():
    assert retry_after_seconds("2") == 2.0 and retry_after_seconds(" 0.5 ") == 0.5
    assert retry_after_seconds("-5") == 0.0 and retry_after_seconds("Thu, 01 Jan 1970 00:00:00 GMT") == 0.0
    assert 3590 < retry_after_seconds(formatdate(time.time() + 3600, usegmt=True)) <= 3600
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    assert retry_after_seconds("nan") is None and retry_after_seconds("") is None


@pytest.mark.parametrize(
    ("mode", "cap", "said"),
    [
        ("flood", None, "is 20,971,520 bytes (Content-Length), over max_response_bytes=8,388,608"),
        ("flood-unsized", 2**20, "over max_response_bytes=1,048,576 bytes ("),
    ],
    ids=["flood-sized-default-cap", "flood-unsized-1MiB-cap"],
)
def test_a_flood_of_a_reply_is_read_only_to_the_cap_and_fails_that_query(server, mode, cap, said):
    import tracemalloc

    from tests.fault_server import FLOOD_BYTES

    url = f"{server.url}/{mode}-always"  # a 20 MB body, with its length said or not
    capped = {} if cap is None else {"max_response_bytes": cap}  # the default: 8 MiB
    backend = OpenAICompatibleBackend([url], model="tiny", max_retries=1, backoff=0.01, **capped)
    tracemalloc.start()
    try:
        out = run(backend, queries(2))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * (cap or 0) + 3 * 2**20 < FLOOD_BYTES / 2, peak  # two queries at a time
    for c in out.values():  # each attempt failed, naming the size and the setting; retried once
        assert c.text == "" and c.attempts == 2 and len(c.errors) == 2, c
        assert c.error.startswith("TooLargeError: ") and said in c.error, c.error
        read = re.search(r"\(([\d,]+) read, then given up\)", c.error)
        if read:  # an unsized body is given up at the first chunk past the cap (chunk sizes vary)
            assert cap is not None and cap < int(read.group(1).replace(",", "")) < cap + 2**20, c.error
        assert (
            "raise max_response_bytes (llm: max_response_bytes, or gf2 eval --max-response-bytes)" in c.error
        )
    once = OpenAICompatibleBackend([f"{server.url}/{mode}"], model="tiny", backoff=0.01, **capped)
    first = run(once, queries(1))["q0"]  # the flood hits a query's first attempt only: the retry answers
    assert first.error is None and first.attempts == 2 and said in first.errors[0]


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("hugetokens", "BadResponseError: usage.prompt_tokens is 1000000000000000000000000000000, over the "
                       "most a token count may be (1,000,000,000): not a real count"),
        ("overcount", "BadResponseError: usage.completion_tokens is 33, more than the max_tokens=32 asked: "
                      "the server ignored the limit or miscounts"),
        ("deepjson", "BadResponseError: body is JSON nested too deeply to read (200,000 bytes starting "),
    ],
    ids=["hugetokens", "overcount", "deepjson"],
)  # fmt: skip
def test_absurd_token_counts_and_a_body_nested_too_deeply_are_bad_responses_naming_the_value(
    server, mode, said
):
    backend = OpenAICompatibleBackend([f"{server.url}/{mode}-always"], model="tiny", max_retries=1,
                                      backoff=0.01)  # fmt: skip
    out = run(backend, queries(2))
    for c in out.values():  # no count of 10**30 (or 33 of 32) is taken; the query failed, saying why
        assert c.text == "" and c.prompt_tokens is None and c.completion_tokens is None, c
        assert c.attempts == 2 and c.error is not None and c.error.startswith(said), c.error
    once = run(OpenAICompatibleBackend([f"{server.url}/{mode}"], model="tiny", backoff=0.01), queries(1))
    assert once["q0"].error is None and (once["q0"].prompt_tokens, once["q0"].completion_tokens) == (11, 7)
    assert once["q0"].errors[0].startswith(said)


def test_a_count_at_the_limits_is_taken():
    from gf2env.agents.llm.openai_server import MAX_TOKEN_COUNT, parse_response

    body = {"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": MAX_TOKEN_COUNT,
                                                                  "completion_tokens": 32}}  # fmt: skip
    got = parse_response(body, "chat", max_tokens=32)
    assert (got.prompt_tokens, got.completion_tokens, got.model) == (MAX_TOKEN_COUNT, 32, None)


@pytest.mark.parametrize(
    ("mode", "answered_by"), [("impostor", "impostor-70b"), ("named", None), ("ok", None)]
)
def test_a_reply_naming_another_model_counts_and_says_which(server, mode, answered_by):
    # impostor: every reply names impostor-70b; named: the model asked (as vLLM names it); ok: no model field.
    backend = OpenAICompatibleBackend([f"{server.url}/{mode}"], model="tiny", backoff=0.01)
    out = run(backend, queries(3))
    for c in out.values():
        assert c.error is None and c.attempts == 1 and c.text.startswith("answer "), c
        assert c.answered_by == answered_by, c


def test_an_unreachable_server_is_named_once_at_its_first_connection_error(server):
    lines: list[str] = []
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        backend = OpenAICompatibleBackend([dead, f"{server.url}/ok"], model="tiny", backoff=0.01,
                                          warn=lines.append)  # fmt: skip
        out = run(backend, queries(6))
        run(backend, queries(4))  # a second batch on the same backend: not said again
    assert all(c.error is None for c in out.values())  # the retries went to the live server
    assert lines == [
        f"gf2: warning: {dead}/v1/chat/completions: connection refused; is a server up there? "
        "(each query is retried up to 4 times, on the next server)"
    ]
    failed = [c for c in out.values() if c.attempts == 2]
    assert len(failed) == 3 and {c.errors[0] for c in failed} == {
        f"ConnectError: {dead}/v1/chat/completions: connection refused"
    }


def test_an_absurd_count_from_tokenize_is_a_bad_response_not_an_empty_answer(server):
    # /tokenize says 10**30 tokens: taken, the prompt would fill any context (an empty answer, cut off).
    backend = OpenAICompatibleBackend([f"{server.url}/hugecount"], model="tiny", max_retries=1, backoff=0.01)
    out: dict[str, Completion] = {}
    params = SamplingParams(max_tokens=32, max_model_len=4096)
    asyncio.run(backend.run(queries(2), params, lambda c: out.setdefault(c.key, c)))
    for c in out.values():
        assert c.prompt_tokens is None and c.finish_reason is None and c.attempts == 2, c
        assert c.error == (
            "BadResponseError: /tokenize: count is 1000000000000000000000000000000, not a token count from 0 "
            "to 1,000,000,000"
        )


def test_a_server_that_never_accepts_is_named_after_the_connect_timeout_not_the_deadline():
    # A full accept queue: the kernel drops further SYNs, so a connect hangs, as to a host that
    # drops packets. Without a connect timeout of its own, each attempt waited the whole deadline.
    lines: list[str] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        for _ in range(4):  # fill the accept queue (never accepted)
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        time.sleep(0.2)
        url = f"http://127.0.0.1:{port}"
        backend = OpenAICompatibleBackend([url], model="tiny", timeout=60.0, max_retries=0, backoff=0.01,
                                          warn=lines.append, connect_timeout=0.5)  # fmt: skip
        start = time.monotonic()
        out = run(backend, queries(1))
        took = time.monotonic() - start
        for filler in fillers:
            filler.close()
    (completion,) = out.values()
    assert took < 10, took  # the connect timeout, not the 60 s deadline
    assert completion.error == f"ConnectTimeout: {url}/v1/chat/completions: no connection within 0.5 s"
    assert lines and "no connection within 0.5 s; is a server up there?" in lines[0]
