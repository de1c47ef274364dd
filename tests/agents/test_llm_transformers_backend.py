"""The local transformers backend on a real pretrained model (SmolLM2-135M-Instruct): chat and
completion, token counts, seeded sampling, and ``gf2 eval`` naming the model by its catalog name."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("transformers")

from gf2env.agents.llm.queries import Completion, Query, SamplingParams  # noqa: E402
from gf2env.agents.llm.transformers_backend import TransformersBackend, cut_at_stop  # noqa: E402
from gf2env.records.record import generate_record  # noqa: E402
from gf2env.task.oracle import TaskConfig  # noqa: E402
from gf2env.text.prompt import render_prompt  # noqa: E402


@pytest.fixture(scope="module")
def backend(smollm2):
    return TransformersBackend(smollm2)


def answers(backend, queries, params) -> dict[str, Completion]:
    out: dict[str, Completion] = {}
    asyncio.run(backend.run(queries, params, lambda c: out.setdefault(c.key, c)))
    return out


def test_the_model_answers_a_real_prompt_in_both_forms(backend):
    rec = generate_record(TaskConfig(n=4, K=4), 1, 0, seed=0)
    prompt = render_prompt("compact-v1", rec.prefix, rec.address, rec.payload, rec.labels, n=4, p=12, d=4)
    params = SamplingParams(temperature=1.0, max_tokens=12)
    out = answers(backend, [Query("c", prompt, 1, "chat"), Query("p", prompt, 1, "completions")], params)
    chat, plain = out["c"], out["p"]
    tokenizer = backend.tokenizer
    assert plain.prompt_tokens == len(tokenizer(prompt.completion())["input_ids"])
    messages = Query("c", prompt, 1, "chat").chat_messages()
    templated = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)
    assert chat.prompt_tokens == len(templated["input_ids"]) > plain.prompt_tokens
    assert all(
        c.completion_tokens <= 12 and c.error is None and isinstance(c.text, str) for c in out.values()
    )


def test_sampling_is_a_function_of_the_query_seed(backend):
    rec = generate_record(TaskConfig(n=2, K=3), 0, 0, seed=1)
    prompt = render_prompt("plain-v1", rec.prefix, rec.address, rec.payload, rec.labels, n=2, p=12, d=4)
    params = SamplingParams(temperature=1.0, max_tokens=24)
    first = answers(backend, [Query("a", prompt, 7), Query("b", prompt, 8)], params)
    again = answers(backend, [Query("a", prompt, 7)], params)
    assert first["a"].text == again["a"].text and first["a"].text != first["b"].text
    greedy = SamplingParams(temperature=0.0, max_tokens=8)
    assert (
        answers(backend, [Query("g", prompt, 1)], greedy)["g"].text
        == answers(backend, [Query("g", prompt, 2)], greedy)["g"].text
    )


@pytest.mark.slow
def test_gf2_eval_with_the_transformers_backend(tmp_path, smollm2):
    import json
    import subprocess
    import sys

    # The catalog name resolves to the fetched folder (gf2 models fetch); the log keeps the name.
    cmd = [sys.executable, "-m", "gf2env", "eval", "--agent", "transformers",
           "--model", "smollm2-135m-instruct",
           "--depths", "0,1", "--trials", "2", "--p", "6", "--d", "3", "--K", "4", "--max-tokens", "8",
           "--prompt", "compact-v1", "--out", str(tmp_path / "out"), "--quiet",
           "--label", "smollm2"]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    lines = [json.loads(x) for x in (tmp_path / "out" / "queries.jsonl").read_text().splitlines()]
    assert len(lines) == 4
    assert all(x["backend"] == "transformers" and x["completion_tokens"] <= 8 for x in lines)
    assert "smollm2" in run.stdout and (tmp_path / "out" / "summary.csv").exists()


def test_gf2_eval_runs_estimators_like_compare(tmp_path):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "gf2env", "eval", "--agent", "A,C", "--depths", "0,1",
           "--trials", "5", "--out", str(tmp_path), "--quiet", "--no-plots"]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "results.csv").read_text().count("\n") == 1 + 2 * 2 * 5


def test_a_stop_string_ends_generation_where_it_first_appears(backend):
    rec = generate_record(TaskConfig(n=2, K=3), 0, 0, seed=1)
    prompt = render_prompt("plain-v1", rec.prefix, rec.address, rec.payload, rec.labels, n=2, p=12, d=4)
    queries = [Query("a", prompt, 7), Query("b", prompt, 7)]
    for batch_size in (1, 2):  # a batch samples its own stream: compare like with like
        backend.batch_size = batch_size
        try:
            free = answers(backend, queries, SamplingParams(temperature=1.0, max_tokens=24))["a"]
            stop = free.text[4:6]  # two characters the free sample holds: the stopped one ends before them
            at = free.text.index(stop)
            params = SamplingParams(temperature=1.0, max_tokens=24, stop=(stop, "never-there"))
            out = answers(backend, queries, params)["a"]
        finally:
            backend.batch_size = 1
        assert out.text == free.text[:at] and out.finish_reason == "stop", (batch_size, out, free)
        if batch_size == 1:  # generation stopped, not just the text cut (a batch runs to its longest row)
            assert out.completion_tokens < free.completion_tokens


def test_max_model_len_cuts_max_tokens_to_what_the_prompt_leaves(backend):
    rec = generate_record(TaskConfig(n=2, K=3), 0, 0, seed=1)
    prompt = render_prompt("compact-v1", rec.prefix, rec.address, rec.payload, rec.labels, n=2, p=12, d=4)
    free = answers(backend, [Query("a", prompt, 7)], SamplingParams(temperature=1.0, max_tokens=24))["a"]
    length = free.prompt_tokens
    for limit, room in ((length + 3, 3), (length, 0), (length - 9, 0)):
        params = SamplingParams(temperature=1.0, max_tokens=24, max_model_len=limit)
        for batch_size in (1, 2):
            backend.batch_size = batch_size
            try:
                out = answers(backend, [Query("a", prompt, 7), Query("b", prompt, 8)], params)["a"]
            finally:
                backend.batch_size = 1
            assert out.completion_tokens <= room and out.error is None, (limit, batch_size, out)
            assert out.finish_reason == "length" or (room and out.finish_reason == "stop"), out


def test_stop_strings_cut_where_the_first_begins_and_name_it():
    text = "\\boxed{[1, 2, 3]} more<|im_end|>"
    assert cut_at_stop(text, ["<|im_end|>", "]}"]) == ("\\boxed{[1, 2, 3", "]}")
    assert cut_at_stop("xab", ["a", "ab"]) == ("x", "ab")  # two start at once: the longer one ends it
    assert cut_at_stop("no stop here", ["]}"]) == ("no stop here", None)
