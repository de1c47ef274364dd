"""gf2 eval against a real HTTP server: the resumable log (SIGKILL mid-run, partial lines, retried
failures) and the results it feeds to the estimators' summary code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

pytest.importorskip("httpx")


from gf2env.agents.llm.planning import plan_queries, query_key  # noqa: E402
from gf2env.agents.llm.queries import SamplingParams  # noqa: E402
from gf2env.agents.llm.query_log import QueryLog, log_rows  # noqa: E402
from gf2env.records.record import generate_record  # noqa: E402
from gf2env.report.results import read_results_csv  # noqa: E402
from gf2env.task.oracle import TaskConfig  # noqa: E402

GRID = ["--depths", "0,1,2,3", "--trials", "10", "--p", "6", "--d", "3", "--K", "4"]  # 40 queries


def gf2_eval(url: str, out, *extra: str) -> list[str]:
    return [sys.executable, "-m", "gf2env", "eval", "--agent", "vllm", "--model", "tiny", "--base-url", url,
            *GRID, "--out", str(out), "--quiet", "--no-plots", "--retries", "1", *extra]  # fmt: skip


def test_keys_are_content_hashes():
    rec = generate_record(TaskConfig(p=6, d=3, K=4, n=3), 2, 0, seed=0)
    params = SamplingParams()
    key = query_key(rec, "plain-v1", params, "m", "chat", 0)
    assert key == query_key(rec, "plain-v1", params, "m", "chat", 0)
    assert key != query_key(rec, "compact-v1", params, "m", "chat", 0)
    assert key != query_key(rec, "plain-v1", SamplingParams(temperature=1.0), "m", "chat", 0)
    assert key != query_key(rec, "plain-v1", params, "m", "chat", 1)
    planned = plan_queries([(rec, "grid", "adversarial", 0)], "plain-v1", params, "m", samples=3)
    assert len({p.query.seed for p in planned}) == 3 and "target" not in planned[0].query.prompt.text


def test_sigkill_mid_run_then_resume_answers_every_query_once(server, tmp_path):
    out = tmp_path / "run"
    log = out / "queries.jsonl"
    proc = subprocess.Popen(gf2_eval(f"{server.url}/ok", out, "--concurrency", "1"), start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and (not log.exists() or log.read_text().count("\n") < 5):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = log.read_text().count("\n")
    assert 5 <= first < 40, first
    with open(log, "a") as fh:
        fh.write('{"key": "half a line')  # what a kill in the middle of a write leaves
    done = subprocess.run(gf2_eval(f"{server.url}/ok", out), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"{40 - first} queries asked" in done.stdout and f"{first} already done" in done.stdout
    # The server reports 11 prompt and 7 completion tokens a query: counted apart, each with its rate.
    asked = 40 - first
    assert f"prompt tokens {11 * asked} (" in done.stdout
    assert f"completion tokens {7 * asked} (" in done.stdout and f"total {18 * asked} (" in done.stdout
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 40 and all(c == 1 for c in Counter(line["key"] for line in lines).values())
    assert all(line["status"] == "ok" and line["prompt_tokens"] == 11 for line in lines)
    rows = read_results_csv(out / "results.csv")
    assert len(rows) == 40 and {r["agent"] for r in rows} == {"tiny"}
    again = subprocess.run(gf2_eval(f"{server.url}/ok", out), capture_output=True, text=True, timeout=120)
    assert "0 queries asked" in again.stdout and log.read_text().count("\n") == 40


def test_failed_queries_are_logged_then_retried(server, tmp_path):
    out = tmp_path / "run"
    bad = subprocess.run(gf2_eval(f"{server.url}/bad400", out), capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "No agent answered" in bad.stderr
    lines = QueryLog(out / "queries.jsonl").lines()
    assert len(lines) == 40
    assert all(line["status"] == "error" and "HTTP 400" in line["error"] for line in lines)
    good = subprocess.run(gf2_eval(f"{server.url}/ok", out), capture_output=True, text=True, timeout=120)
    assert good.returncode == 0 and "40 queries asked" in good.stdout
    log = QueryLog(out / "queries.jsonl")
    assert len(log.done()) == 40 and len(log_rows(log.lines())) == 40


def test_scoring_in_the_log(server, tmp_path):
    # The server answers \\boxed{[seed % 7, 8, 9]}: under compact-v1 (offset 0, p=10, d=4) always a
    # well-formed term, right exactly when it is the target.
    out = tmp_path / "compact"
    cmd = gf2_eval(f"{server.url}/ok", out, "--prompt", "compact-v1", "--p", "10", "--d", "4")
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = QueryLog(out / "queries.jsonl").lines()
    failures = Counter(line["score"]["failure"] for line in lines)
    assert set(failures) <= {"wrong_term", "none"} and failures["wrong_term"] > 0
    for line in lines:
        assert line["prompt_id"] == "compact-v1" and line["response"].startswith("answer")
        assert line["correct"] == (line["score"]["failure"] == "none")


@pytest.mark.parametrize("mode", ["notutf8", "fakegzip", "strtokens"])
def test_a_hostile_body_is_a_retried_failure_of_its_query_not_of_the_run(server, tmp_path, mode):
    out = tmp_path / "run"
    done = subprocess.run(gf2_eval(f"{server.url}/{mode}", out), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = QueryLog(out / "queries.jsonl").lines()
    assert len(lines) == 40 and all(line["status"] == "ok" and line["attempts"] == 2 for line in lines)
    assert all(line["prompt_tokens"] == 11 and len(line["errors"]) == 1 for line in lines)


def test_a_huge_reply_is_scored_whole_and_kept_to_its_tail_with_the_cut_said():
    from gf2env.agents.llm.grading import grade
    from gf2env.agents.llm.queries import Backend, Completion
    from gf2env.agents.llm.query_log import RESPONSE_KEEP_CHARS

    def log_entry(planned, completion, params, backend, extra=None):  # graded by the agent, then logged
        from gf2env.agents.llm.query_log import log_entry

        return log_entry(planned, completion, params, backend, grade(planned, completion, extra), extra)

    rec = generate_record(TaskConfig(p=6, d=3, K=4, n=3), 2, 0, seed=0)
    planned = plan_queries([(rec, "grid", "adversarial", 0)], "compact-v1", SamplingParams(), "m")[0]
    off = planned.query.prompt.answer_offset
    right = "\\boxed{[" + ", ".join(str(i + off) for i in rec.target) + "]}"
    text = "Let me think. " + "x" * (2 * RESPONSE_KEEP_CHARS) + right
    turns = [{"response": text, "code": None, "sandbox": None, "cut_off": None}]
    entry = log_entry(
        planned, Completion(planned.query.key, text), SamplingParams(), Backend(), {"turns": turns}
    )
    assert entry["correct"] and entry["score"]["failure"] == "none"
    assert entry["response"] == text[-RESPONSE_KEEP_CHARS:] and entry["response"].endswith(right)
    assert entry["response_truncated_chars"] == len(text) - RESPONSE_KEEP_CHARS
    turn = entry["turns"][0]
    assert (
        turn["response"] == entry["response"]
        and turn["response_truncated_chars"] == len(text) - RESPONSE_KEEP_CHARS
    )
    assert turns[0]["response"] == text  # the episode's own turns are left whole
    short = log_entry(planned, Completion(planned.query.key, right), SamplingParams(), Backend())
    assert short["response"] == right and short["response_truncated_chars"] == 0
    assert len(json.dumps(entry)) < 3 * RESPONSE_KEEP_CHARS
    # Scored whole, before the cut: an answer in the cut head still counts (here: a conflicting one).
    two = "\\boxed{[0, 1]} " + text
    both = log_entry(planned, Completion(planned.query.key, two), SamplingParams(), Backend())
    assert both["score"]["failure"] == "multiple_conflicting" and not both["correct"]
    assert both["response"] == entry["response"]


def test_a_second_run_on_the_same_out_is_refused_while_the_first_runs(server, tmp_path):
    out = tmp_path / "run"
    log = out / "queries.jsonl"
    first = subprocess.Popen(gf2_eval(f"{server.url}/slow-always", out), stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and (not log.exists() or not log.read_text()):
            time.sleep(0.05)
        second = subprocess.run(
            gf2_eval(f"{server.url}/ok", out), capture_output=True, text=True, timeout=120
        )
        assert second.returncode == 2, second.stderr
        assert str(out) in second.stderr and "--out" in second.stderr and "Traceback" not in second.stderr
        assert first.wait(timeout=120) == 0
    finally:
        first.kill()
    lines = QueryLog(log).lines()
    assert len(lines) == 40 and len({line["key"] for line in lines}) == 40
    assert sum(server.attempts.values()) == 40  # the refused run asked nothing
    again = subprocess.run(gf2_eval(f"{server.url}/ok", out), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "0 queries asked" in again.stdout  # the lock went with the run


def test_a_query_logged_twice_counts_once(server, tmp_path):
    out = tmp_path / "run"
    done = subprocess.run(gf2_eval(f"{server.url}/ok", out), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = QueryLog(out / "queries.jsonl").lines()
    failed = [{**line, "status": "error", "correct": False} for line in lines[:5]]
    twice = lines + lines[::-1] + failed  # e.g. two runs on one --out before the lock, then failures
    rows = log_rows(twice)
    assert len(rows) == 40 and rows == log_rows(lines)


def test_queries_a_hostile_body_fails_for_good_are_logged_failed_and_the_others_answered(server, tmp_path):
    out = tmp_path / "run"
    done = subprocess.run(
        gf2_eval(f"{server.url}/notutf8-odd", out), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = QueryLog(out / "queries.jsonl").lines()
    assert len(lines) == 40
    bad = [line for line in lines if line["seed"] % 2]
    good = [line for line in lines if not line["seed"] % 2]
    assert bad and good
    assert all(line["status"] == "error" and line["attempts"] == 2 for line in bad)
    assert all("not JSON" in line["error"] for line in bad)
    assert all(line["status"] == "ok" and line["attempts"] == 1 for line in good)
    assert len(read_results_csv(out / "results.csv")) == len(good)
    assert f"{len(bad)} records have no answer" in done.stdout


def test_a_huge_reply_keeps_the_log_small(server, tmp_path):
    from gf2env.agents.llm.query_log import RESPONSE_KEEP_CHARS

    out = tmp_path / "run"
    cmd = gf2_eval(
        f"{server.url}/huge", out, "--trials", "1", "--prompt", "compact-v1", "--p", "10", "--d", "4"
    )
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    log = out / "queries.jsonl"
    lines = QueryLog(log).lines()
    assert len(lines) == 4 and log.stat().st_size < 4 * (RESPONSE_KEEP_CHARS + 20_000)
    for line in lines:
        answer = line["response"][line["response"].index("answer") :]  # the server's answer line
        assert len(line["response"]) == RESPONSE_KEEP_CHARS and line["response"].startswith("x")
        assert line["response_truncated_chars"] == 2_000_014 + len(answer) - RESPONSE_KEEP_CHARS
        assert line["score"]["failure"] in ("none", "wrong_term")


def test_a_flooded_reply_is_logged_as_a_failed_query_naming_its_size_and_the_setting(server, tmp_path):
    out = tmp_path / "run"
    cmd = gf2_eval(f"{server.url}/flood-unsized-odd", out, "--trials", "2", "--p", "10", "--d", "4",
                   "--max-response-bytes", "100000")  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = QueryLog(out / "queries.jsonl").lines()
    bad = [line for line in lines if line["seed"] % 2]  # 20 MB bodies on every attempt
    good = [line for line in lines if not line["seed"] % 2]
    assert bad and good and len(lines) == 8
    for line in bad:
        assert line["status"] == "error" and line["attempts"] == 2 and line["response"] == "", line
        assert (
            "over max_response_bytes=100,000 bytes" in line["error"]
            and "--max-response-bytes" in line["error"]
        )
    assert all(line["status"] == "ok" for line in good)
    assert f"{len(bad)} records have no answer" in done.stdout


def test_llm_rows_carry_what_each_step_cost(server, tmp_path):
    """Results rows (the agent's, a record's mean over its samples) and a log's own rows (one a query)
    carry the tokens and model latency of the log; without tools, no sandbox run and wall = model."""
    out = tmp_path / "run"
    run = subprocess.run(gf2_eval(f"{server.url}/ok", out, "--samples", "2", "--depths", "0,2", "--trials",
                                  "3"), capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    lines = QueryLog(out / "queries.jsonl").lines()
    assert len(lines) == 12
    by_record: dict[tuple[int, int], list[dict]] = {}
    for line in lines:
        by_record.setdefault((line["g"], line["trial"]), []).append(line)
    rows = read_results_csv(out / "results.csv")
    assert len(rows) == 6
    for r in rows:
        samples = by_record[(r["g"], r["trial"])]
        model_ms = sum(1000 * x["latency_s"] for x in samples) / 2
        assert (r["prompt_tokens"], r["completion_tokens"], r["sandbox_runs"], r["sandbox_ms"]) == (
            11,
            7,
            0,
            0,
        )
        assert r["model_ms"] == pytest.approx(model_ms) and r["model_ms"] > 0
        assert r["wall_ms"] == pytest.approx(model_ms)
    from_log = log_rows(lines)
    assert len(from_log) == 12
    for r, line in zip(from_log, lines, strict=True):
        assert (r["prompt_tokens"], r["completion_tokens"], r["sandbox_runs"]) == (11, 7, 0)
        assert r["model_ms"] == r["wall_ms"] == pytest.approx(1000 * line["latency_s"])
    table = run.stdout[run.stdout.index("compute per step") :].splitlines()
    assert table[1].split() == ["agent", "g", "γ", "tokens", "wall", "ms", "model", "ms", "sandbox", "runs",
                                "sandbox", "ms"]  # fmt: skip
    assert table[3].split()[:4] == ["tiny", "0", table[3].split()[2], "18"]


def test_a_log_line_nested_too_deeply_is_a_damaged_log_named_by_its_line(server, tmp_path):
    # A query log is read back on resume; a line of JSON 100,000 levels deep raised RecursionError.
    out = tmp_path / "out"
    out.mkdir()
    (out / "queries.jsonl").write_text('{"key": "a"}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    run = subprocess.run(gf2_eval(f"{server.url}/ok", out), capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip().splitlines()[-1] == (
        f"gf2: error: {out / 'queries.jsonl'}:2 is not JSON (nested too deeply); the log is damaged."
    )
