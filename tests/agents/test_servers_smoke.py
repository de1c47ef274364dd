"""Real servers on a real pretrained model: vLLM on CPU and ``transformers serve`` with SmolLM2-135M-Instruct
(fetched by ``make models``), spoken to over plain HTTP.

Each test starts its server, sends raw ``/v1/chat/completions`` and
``/v1/completions`` requests with urllib (none of our own client code), and checks that stopping the
server leaves no process of its group behind. vLLM needs ``.venv-vllm`` (``make .venv-vllm/.ready``):
without it the vLLM test skips, or fails where ``GF2_REQUIRE_VLLM`` is set.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import urllib.request
from typing import Any

import pytest

pytest.importorskip("transformers")

from gf2env.agents.llm.tools.episode import TOOL_USE_CLASSES  # noqa: E402
from tests.servers import group_alive, start_transformers_server, vllm_or_skip  # noqa: E402

pytestmark = pytest.mark.slow


def post(url: str, body: dict[str, Any], timeout: float = 120) -> tuple[int, dict[str, Any]]:
    """POST ``body`` as JSON; the status and the decoded JSON answer."""
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, json.load(resp)


def check_usage(answer: dict[str, Any], prompt_tokens: int | None = None) -> None:
    usage = answer["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    if prompt_tokens is not None:
        assert usage["prompt_tokens"] == prompt_tokens


QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
CHAT = {"messages": QUESTION, "temperature": 1.0, "seed": 1, "max_tokens": 16}


def count_tokens(model_dir: str, text: str | None = None) -> int:
    """Prompt tokens of ``text`` (completions API), or of the chat ``QUESTION`` with its template."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if text is None:
        return len(
            tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, return_dict=True)["input_ids"]
        )
    return len(tokenizer(text)["input_ids"])


def test_vllm_server_answers_chat_and_completions_then_stops(tmp_path, smollm2):
    with vllm_or_skip(smollm2, log_path=tmp_path / "vllm.log") as server:
        status, chat = post(server.base_url + "/v1/chat/completions", {"model": server.model, "n": 2, **CHAT})
        assert status == 200 and len(chat["choices"]) == 2
        assert all(isinstance(c["message"]["content"], str) for c in chat["choices"])
        check_usage(chat, count_tokens(smollm2))
        assert chat["usage"]["completion_tokens"] <= 2 * 16
        greedy = {**CHAT, "temperature": 0.0, "max_tokens": 12}
        status, answer = post(server.base_url + "/v1/chat/completions", {"model": server.model, **greedy})
        assert "Paris" in answer["choices"][0]["message"]["content"]  # a model that reads

        body = {"model": server.model, "prompt": "abc", "temperature": 1.0, "seed": 1, "max_tokens": 16}
        status, plain = post(server.base_url + "/v1/completions", {**body, "logprobs": 1})
        assert status == 200 and len(plain["choices"]) == 1
        check_usage(plain, count_tokens(smollm2, "abc"))
        assert len(plain["choices"][0]["logprobs"]["tokens"]) == plain["usage"]["completion_tokens"]
        again = post(server.base_url + "/v1/completions", body)[1]
        assert again["choices"][0]["text"] == plain["choices"][0]["text"]  # the seed fixes the sample

        # A seeded prompt longer than vLLM's 2048-token prefill step: with chunked prefill on, the CPU
        # engine dies on it ("CPU Generator does not use offset").
        status, long = post(server.base_url + "/v1/completions", {**body, "prompt": "01 " * 1500, "n": 2})
        assert status == 200 and len(long["choices"]) == 2
        check_usage(long, count_tokens(smollm2, "01 " * 1500))

        # gf2 eval end to end against this server: the paper's prompt, 2 depths x 4 records, twice
        # (the second run resumes and asks nothing).
        out = tmp_path / "eval"
        cmd = [sys.executable, "-m", "gf2env", "eval", "--agent", "vllm", "--base-url", server.base_url,
               "--model", server.model, "--depths", "0,3", "--trials", "4", "--n", "8", "--max-tokens", "32",
               "--temperature", "1.0", "--out", str(out), "--quiet", "--no-plots"]  # fmt: skip
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        print(run.stdout)  # requests/s and tokens/s, for the record
        lines = [json.loads(x) for x in (out / "queries.jsonl").read_text().splitlines()]
        assert len(lines) == 8 and all(x["status"] == "ok" and x["prompt_tokens"] > 1000 for x in lines)
        assert len({x["key"] for x in lines}) == 8
        again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0 and "0 queries asked" in again.stdout

        # Tool mode against the same server, sandboxed: whatever the model writes (code or not), every
        # episode ends with a tool-usage class and turns that alternate model / sandbox.
        tools = [*cmd[: cmd.index("--out")], "--tools", "--max-revisions", "2",
                 "--out", str(tmp_path / "tools"), "--quiet", "--no-plots"]  # fmt: skip
        run = subprocess.run(tools, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        lines = [json.loads(x) for x in (tmp_path / "tools" / "queries.jsonl").read_text().splitlines()]
        assert len(lines) == 8 and all(x["status"] == "ok" for x in lines)
        assert all(x["tool_prompt_id"] == "tools-v2" for x in lines)
        assert all(x["tool_use"] in TOOL_USE_CLASSES and len(x["turns"]) >= 1 for x in lines)
        assert all(c in run.stdout for c in TOOL_USE_CLASSES)  # the tool-usage table

        # The paper's tool protocol against the same server: its messages, stop strings less `]}`,
        # and the paper's tool-usage table written.
        paper = [*cmd[: cmd.index("--out")], "--tools", "--tool-protocol", "paper", "--max-revisions", "1",
                 "--stop", "]}", "--out", str(tmp_path / "paper"), "--quiet", "--no-plots"]  # fmt: skip
        run = subprocess.run(paper, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        lines = [json.loads(x) for x in (tmp_path / "paper" / "queries.jsonl").read_text().splitlines()]
        assert len(lines) == 8 and all(x["status"] == "ok" for x in lines)
        assert all(x["tool_prompt_id"] == "paper-tools" and x["params"]["stop"] == ["]}"] for x in lines)
        assert all(t["stop_reason"] != "]}" for x in lines for t in x["turns"])  # dropped in tool turns
        assert (tmp_path / "paper" / "tool_usage.csv").read_text().startswith("model_class,model,g,p,")

        # --max-model-len: each prompt counted by the server's /tokenize, max tokens cut to what is left;
        # a prompt that fills the context is answered cut off (finish "length"), never refused.
        plain = [json.loads(x) for x in (out / "queries.jsonl").read_text().splitlines()]
        shortest = min(x["prompt_tokens"] for x in plain)  # the same prompts are asked again
        tight = [*cmd[: cmd.index("--out")], "--max-model-len", str(shortest + 5),
                 "--out", str(tmp_path / "tight"), "--quiet", "--no-plots"]  # fmt: skip
        run = subprocess.run(tight, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        lines = [json.loads(x) for x in (tmp_path / "tight" / "queries.jsonl").read_text().splitlines()]
        assert len(lines) == 8 and all(x["status"] == "ok" for x in lines)
        for x in lines:
            assert x["completion_tokens"] <= max(0, shortest + 5 - x["prompt_tokens"]), x
        assert any(x["completion_tokens"] == 0 and x["finish_reason"] == "length" for x in lines)
        pid = server.pid
    assert not group_alive(pid)


@pytest.mark.skipif(
    importlib.util.find_spec("uvicorn") is None or importlib.util.find_spec("fastapi") is None,
    reason="transformers serve needs transformers[serving]",
)
def test_transformers_server_answers_chat_and_completions_then_stops(tmp_path, smollm2):
    with start_transformers_server(smollm2, log_path=tmp_path / "serve.log") as server:
        # It ignores n and logprobs: one choice, whatever is asked.
        status, chat = post(server.base_url + "/v1/chat/completions", {"model": server.model, "n": 2, **CHAT})
        assert status == 200 and len(chat["choices"]) == 1
        assert isinstance(chat["choices"][0]["message"]["content"], str)
        check_usage(chat, count_tokens(smollm2))

        body = {"model": server.model, "prompt": "abc", "temperature": 1.0, "seed": 1, "max_tokens": 16}
        status, plain = post(server.base_url + "/v1/completions", body)
        assert status == 200 and len(plain["choices"]) == 1
        check_usage(plain, count_tokens(smollm2, "abc"))
        again = post(server.base_url + "/v1/completions", body)[1]
        assert again["choices"][0]["text"] == plain["choices"][0]["text"]  # the seed fixes the sample
        pid = server.pid
    assert not group_alive(pid)
