"""Tool mode end to end: the model's code runs in the real sandbox, its output comes back as a turn.

The "model" is the fault server's scripted ``solver`` modes (a real HTTP server on 127.0.0.1 that
writes the diligent decoder as a model would); the sandbox, scorer, log and harness are ours, unmocked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("httpx")

from gf2env.agents.llm.tools.episode import start_episode  # noqa: E402
from gf2env.agents.llm.tools.protocol import (  # noqa: E402
    cut_off,
    extract_code,
    feedback_message,
    has_answer,
    retry_message,
    tool_instructions,
)
from gf2env.agents.llm.tools.usage import format_tool_usage, tool_usage  # noqa: E402
from gf2env.agents.sandbox import Sandbox, SandboxPool, detect_isolation, record_view  # noqa: E402
from gf2env.records.files import read_records  # noqa: E402
from gf2env.records.record import generate_record  # noqa: E402
from gf2env.report.results import read_results_csv  # noqa: E402
from gf2env.task.oracle import TaskConfig  # noqa: E402
from gf2env.task.rules import Failure  # noqa: E402
from gf2env.text.answers import score_answer  # noqa: E402
from gf2env.text.prompt import render_prompt  # noqa: E402
from gf2env.train.tool_env import GF2ToolEnvironment, tool_dataset  # noqa: E402
from tests.fault_server import SOLVER  # noqa: E402
from tests.paths import REFERENCE as REFERENCE_DIR

REFERENCE = REFERENCE_DIR / "experiments_llm_large_adversarial.json"

if not detect_isolation().get("bwrap"):
    pytest.skip("bubblewrap cannot run here (apt-get install -y bubblewrap)", allow_module_level=True)


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("Here:\n```python\nprint(1)\n```", "print(1)\n"),
        ("```py\nx = 1\n```\nthen\n```\nprint(2)\n```", "print(2)\n"),  # the last block runs
        ("<think>```python\nprint('draft')\n```</think>no code now", None),  # reasoning never runs
        ("The answer is \\boxed{[13, 14, 16]}", None),
        ("```json\n{}\n```", None),  # not Python
        # a block indented as a whole (a list item, prose): dedented, inner indentation kept
        (
            "1. Run:\n   ```python\n   for i in range(2):\n       print(i)\n   ```",
            "for i in range(2):\n    print(i)\n",
        ),
        ("```python\n    x = 1\n    print(x)\n```", "x = 1\nprint(x)\n"),
        ("```python\n\tprint(1)\n\n\tprint(2)\n```", "print(1)\n\nprint(2)\n"),
    ],
)
def test_extract_code(text, code):
    assert extract_code(text) == code


def test_an_indented_block_runs_in_the_sandbox():
    reply = "Here:\n    ```python\n    total = sum(s['y'] for s in samples)\n    print(total, K)\n    ```"
    rec = generate_record(TaskConfig(p=6, d=3, K=4, n=2), 1, 0, seed=0)
    result = Sandbox().run(extract_code(reply), record_view(rec))
    assert result.ok and "IndentationError" not in result.stderr, result.stderr
    assert result.stdout.split() == [str(int(rec.labels.sum())), "4"]


@pytest.mark.parametrize(
    ("text", "finish", "cut"),
    [
        ("```python\nprint(1)\n```", "stop", None),
        ("Let me write it.\n```python\nfor s in samples:\n    x = s[", "length", "code"),  # the case
        ("```python\nprint(1)\n```\nNow the full one:\n```python\nimport numpy", "length", "code"),
        ("```python\nprint(1)\n```\nAs the run will show, the", "length", "text"),  # the block is whole
        ("<think>Row 1 says ```python\nx = ", "length", "text"),  # cut inside reasoning: no fence outside
        ("The rows fit x_13 and", "length", "text"),
        ("The rows fit x_13 and", None, None),
    ],
)
def test_cut_off(text, finish, cut):
    assert cut_off(text, finish) == cut


def test_the_instructions_example_reads_the_globals_in_the_sandbox():
    rec = generate_record(TaskConfig(p=6, d=3, K=5, n=3), 2, 0, seed=4)
    instructions = tool_instructions(3, 2)
    for name in ("`n`", "`p`", "`d`", "`g`", "`K`", "`prefix`", "`samples`", "`record`", "answer_offset"):
        assert name in instructions
    example = extract_code(instructions)  # the two lines, as a model would paste them
    assert example is not None and len(example.splitlines()) == 2
    code = example + "print(V == EXPECTED_V, y == EXPECTED_Y, prefix == EXPECTED_P)\n"
    code = code.replace("EXPECTED_V", repr(rec.payload.astype(int).tolist()))
    code = code.replace("EXPECTED_Y", repr(rec.labels.astype(int).tolist()))
    code = code.replace("EXPECTED_P", repr([list(map(int, t)) for t in rec.prefix]))
    result = Sandbox().run(code, record_view(rec))
    assert result.ok and result.stdout.split() == ["True", "True", "True"], result.stderr


class _Run:  # a sandbox result's fields that feedback_message reads
    exit_code, stop_reason, wall_s, stdout_truncated, stderr = 0, "exited", 0.1, False, ""

    def __init__(self, stdout: str) -> None:
        self.stdout = stdout


@pytest.mark.parametrize(
    "text",
    [
        tool_instructions(32, 3),
        tool_instructions(0, 1),
        feedback_message(_Run("[0, 1, 2]\n"), 3, 3),
        retry_message("code", 2, 3, 512),
        retry_message("text", 1, 3, 512),
        retry_message(None, 1, 3, 512),
    ],
)
def test_what_the_model_is_told_holds_no_answer_it_could_copy(text):
    # every example of the answer is the placeholder: copied, it scores not_integer, never a term
    score = score_answer(text, (0, 1, 2), 12, 0)
    assert (score.correct, score.failure, score.indices) == (False, Failure.NOT_INTEGER, None)
    assert "\\boxed{[i1" in text and "without the box is not graded" in text


def test_feedback_says_when_the_output_holds_no_box():
    assert "holds no boxed answer" in feedback_message(_Run("[0, 1, 2]\n"), 1, 3)
    assert "holds no boxed answer" not in feedback_message(_Run("\\boxed{[0, 1, 2]}\n"), 1, 3)
    assert "1 more reply allowed" in feedback_message(_Run(""), 1, 3)


def episode_with(turns):
    rec = generate_record(TaskConfig(p=6, d=3, K=4, n=2), 1, 0, seed=0)
    prompt = render_prompt("plain-v1", rec.prefix, rec.address, rec.payload, rec.labels, n=2, p=6, d=3)
    from gf2env.agents.llm.queries import Query

    episode = start_episode(Query("k", prompt, 1), record_view(rec))
    for response, code, stdout in turns:
        sandbox = None if stdout is None else {"stdout": stdout, "wall_s": 0.1, "stop_reason": "exited"}
        episode.turns.append(
            {"response": response, "code": code, "sandbox": sandbox, "finish_reason": "stop", "cut_off": None}
        )
    episode.finish()
    return episode


def test_final_answer_precedence():
    # A reply without code that answers wins, even over what the code printed.
    e = episode_with([("```python\n...```", "...", "\\boxed{[2, 3]}"), ("So \\boxed{[4, 5]}", None, None)])
    assert (e.final_text, e.answer_source, e.tool_use) == ("So \\boxed{[4, 5]}", "reply", "single_tool")
    # The last reply has no answer: the last run that printed one.
    e = episode_with([("```python\na```", "a", "\\boxed{[2, 3]}"), ("```python\nb```", "b", "nothing"),
                      ("I am not sure.", None, None)])  # fmt: skip
    assert (e.final_text, e.answer_source, e.tool_calls, e.tool_use) == (
        "\\boxed{[2, 3]}",
        "sandbox",
        2,
        "multi_tool",
    )
    # No code at all, no answer anywhere: the reply (no_answer).
    e = episode_with([("I give up.", None, None)])
    assert (e.final_text, e.answer_source, e.tool_use, e.outcome) == (
        "I give up.",
        "reply",
        "no_tool",
        "no_answer",
    )
    assert not has_answer(e.final_text)


def test_the_solver_in_the_sandbox_is_always_right_on_the_papers_file():
    if not REFERENCE.exists():
        pytest.skip(f"the paper's reference file is not at {REFERENCE}")
    records = read_records(REFERENCE)
    pool = SandboxPool(Sandbox())
    views = [{**record_view(r), "answer_offset": r.n} for r in records]
    results = pool.map([(SOLVER, v) for v in views])
    scores = [
        score_answer(res.stdout, rec.target, rec.p, rec.n) for res, rec in zip(results, records, strict=True)
    ]
    assert all(res.ok for res in results), [res.stderr for res in results if not res.ok][:1]
    assert sum(s.correct for s in scores) == len(records) == 20  # γ = 1 at g = 63 and 127
    assert all("target" not in v for v in views)


def gf2_tools(url: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "gf2env", "eval", "--agent", "vllm", "--model", "scripted",
           "--base-url", url, "--tools", "--out", str(out), "--quiet", "--no-plots", "--retries", "0",
           *extra]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def log_lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "queries.jsonl").read_text().splitlines()]


def test_gf2_eval_tool_mode_on_the_papers_file(server, tmp_path):
    if not REFERENCE.exists():
        pytest.skip(f"the paper's reference file is not at {REFERENCE}")
    run = gf2_tools(f"{server.url}/solver", tmp_path, "--records", str(REFERENCE))
    assert run.returncode == 0, run.stderr
    lines = log_lines(tmp_path)
    assert len(lines) == 20 and all(x["correct"] for x in lines)
    assert {(x["tool_use"], x["tool_calls"], x["answer_source"], x["sandbox_errors"]) for x in lines} == {
        ("single_tool", 1, "reply", 0)
    }
    turns = lines[0]["turns"]
    assert (
        len(turns) == 2
        and turns[0]["code"] == SOLVER
        and turns[0]["sandbox"]["ok"]
        and turns[1]["code"] is None
    )
    assert lines[0]["tool_prompt_id"] == "tools-v2" and lines[0]["sandbox_s"] > 0
    assert {(x["outcome"], x["cut_off_replies"]) for x in lines} == {("answer", 0)}
    rows = read_results_csv(tmp_path / "results.csv")
    assert len(rows) == 20 and all(r["gamma"] == 1.0 for r in rows)
    assert "tool use by episode class" in run.stdout and "100.0% / " in run.stdout
    usage = tool_usage(lines)
    assert len(usage) == 2  # g = 63 and 127
    assert all(u["single_tool_share"] == 1.0 and u["single_tool_accuracy"] == 1.0 for u in usage)
    again = gf2_tools(f"{server.url}/solver", tmp_path, "--records", str(REFERENCE))
    assert "0 queries asked" in again.stdout and "20 already done" in again.stdout


def test_revisions_after_a_failing_run_and_the_budget(server, tmp_path):
    grid = ["--depths", "2,5", "--trials", "3", "--p", "8", "--d", "3", "--K", "24"]
    run = gf2_tools(f"{server.url}/solver-buggy", tmp_path / "revise", *grid)
    assert run.returncode == 0, run.stderr
    lines = log_lines(tmp_path / "revise")
    assert len(lines) == 6
    for x in lines:  # buggy code, its NameError shown back, then the solver, then the answer
        assert (x["tool_calls"], x["tool_use"], x["sandbox_errors"], len(x["turns"])) == (
            2,
            "multi_tool",
            1,
            3,
        )
        assert "NameError" in x["turns"][0]["sandbox"]["stderr"]
    assert sum(x["correct"] for x in lines) >= 5  # the decoder is right unless the step is ambiguous
    # What each step cost, from the log into the rows: 2 sandbox runs, their time, the model's 3 turns.
    logged = {(x["g"], x["trial"]): x for x in lines}
    for r in read_results_csv(tmp_path / "revise" / "results.csv"):
        x = logged[(r["g"], r["trial"])]
        assert (
            r["sandbox_runs"] == 2
            and r["sandbox_ms"] == pytest.approx(1000 * x["sandbox_s"])
            and r["sandbox_ms"] > 0
        )
        assert r["model_ms"] == pytest.approx(1000 * x["latency_s"])
        assert r["wall_ms"] == pytest.approx(r["model_ms"] + r["sandbox_ms"])
        assert (
            r["prompt_tokens"] == x["prompt_tokens"] > 0 and r["completion_tokens"] == x["completion_tokens"]
        )
    assert "compute per step" in run.stdout and "sandbox runs" in run.stdout
    # No revisions: the model's one code run is the answer.
    run = gf2_tools(f"{server.url}/solver", tmp_path / "once", *grid, "--max-revisions", "0")
    assert run.returncode == 0, run.stderr
    lines = log_lines(tmp_path / "once")
    assert {(x["tool_calls"], x["answer_source"], len(x["turns"])) for x in lines} == {(1, "sandbox", 1)}
    # Tool settings are part of a query's identity: the two runs share no key.
    assert not {x["key"] for x in lines} & {x["key"] for x in log_lines(tmp_path / "revise")}


GRID = ["--depths", "2,5", "--trials", "2", "--p", "8", "--d", "3", "--K", "24"]


@pytest.mark.parametrize(
    ("mode", "revisions", "calls", "turns", "outcome", "cut", "told"),
    [
        # cut off inside its code block: nothing runs, it is told so, then solves
        ("solver-cut", 10, 1, 3, "answer", 1, "cut off at the limit of 1024 tokens inside a code block"),
        # a bare list after the run is not final: it is asked for the box, and boxes it
        ("solver-bare", 10, 1, 3, "answer", 0, "no code and no answer the grader can read"),
        # cut off every time: the budget runs out, the outcome says why there is no answer
        ("truncating", 2, 0, 3, "truncated", 3, "cut off at the limit of 1024 tokens inside a code block"),
        # with no turn left, a cut-off reply ends the episode at once (and is still reported)
        ("truncating", 0, 0, 1, "truncated", 1, None),
    ],
)
def test_cut_off_and_unboxed_replies_get_a_turn_that_says_so(server, tmp_path, mode, revisions, calls,
                                                            turns, outcome, cut, told):  # fmt: skip
    run = gf2_tools(f"{server.url}/{mode}", tmp_path, *GRID, "--max-revisions", str(revisions),
                    "--max-tokens", "1024")  # fmt: skip
    assert run.returncode == 0, run.stderr
    lines = log_lines(tmp_path)
    assert len(lines) == 4
    for x in lines:
        assert (x["tool_calls"], len(x["turns"]), x["outcome"], x["cut_off_replies"]) == (
            calls,
            turns,
            outcome,
            cut,
        )
        assert [t["cut_off"] for t in x["turns"]][:cut] == ["code"] * cut
        assert all(
            t["code"] is None for t in x["turns"] if t["cut_off"] == "code"
        )  # an unclosed block never runs
    if outcome == "answer":
        assert sum(x["correct"] for x in lines) >= 3 and all(x["answer_source"] == "reply" for x in lines)
        assert all(x["score"]["failure"] in ("none", "wrong_term") for x in lines)
    else:
        assert {x["score"]["failure"] for x in lines} == {"no_answer"} and not any(
            x["correct"] for x in lines
        )
    asked = [b["messages"] for b in server.bodies if len(b["messages"]) > 2]  # the turns after the first
    if told is None:
        assert not asked
    else:
        retries = [m[-1]["content"] for m in asked if m[-1]["content"].startswith("Your reply")]
        assert retries and all(told in r and "\\boxed{[i1, i2]}" in r for r in retries)
    usage = {(u["g"], u["truncated_share"], u["cut_off_replies"]) for u in tool_usage(lines)}
    assert usage == {(2, float(outcome == "truncated"), 2 * cut), (5, float(outcome == "truncated"), 2 * cut)}
    assert "truncated" in run.stdout and "cut-off" in run.stdout


def test_tool_usage_table_counts_truncated_outcomes():
    def line(g, tool_use, correct, outcome, cut):
        return {"status": "ok", "model": "m", "g": g, "tool_use": tool_use, "correct": correct,
                "outcome": outcome, "cut_off_replies": cut}  # fmt: skip

    lines = [line(1, "no_tool", False, "truncated", 2), line(1, "single_tool", True, "answer", 1),
             line(1, "single_tool", False, "no_answer", 0), line(1, "multi_tool", False, "truncated", 3),
             {"status": "ok", "model": "m", "g": 3, "tool_use": "no_tool", "correct": True}]  # fmt: skip
    rows = tool_usage(lines)
    assert [(r["g"], r["queries"], r["truncated_share"], r["cut_off_replies"]) for r in rows] == [
        (1, 4, 0.5, 6),
        (3, 1, 0.0, 0),  # a tools-v1 line: no outcome recorded, nothing counted
    ]
    assert rows[0]["single_tool_share"] == 0.5 and rows[0]["single_tool_accuracy"] == 0.5
    table = format_tool_usage(rows).splitlines()
    assert "truncated" in table[0] and table[2].split()[-2:] == ["50.0%", "6"]


def test_trl_style_tool_environment_rewards_only_the_first_submission():
    from transformers.utils import get_json_schema

    env = GF2ToolEnvironment(depths=(3,), seed=0)
    rec = generate_record(TaskConfig(n=8), 5, 0, seed=2)
    row = tool_dataset([rec])[0]
    prompt = env.reset(**row)
    assert prompt.startswith(env.prompt.text) and "run_python" in prompt and "target" not in prompt
    output = env.run_python(SOLVER)
    assert "exit code 0" in output and "\\boxed{" in output
    right = [i + rec.n for i in rec.target]
    wrong = [i + rec.n for i in rec.prefix[0]] if set(rec.prefix[0]) != set(rec.target) else [rec.n + 0, 1, 2]
    assert env.submit(right).startswith("Submitted") and env.get_reward() == 1.0
    assert "Already submitted" in env.submit(wrong) and env.get_reward() == 1.0
    env.reset(**row)
    env.submit(wrong)
    assert env.get_reward() == 0.0
    env.reset()  # a fresh step drawn by the environment itself
    assert env.get_reward() == 0.0 and env.record.g == 3
    env.max_tool_calls = 0
    assert "No runs left" in env.run_python("print(1)")
    for tool in (env.run_python, env.submit):  # what TRL builds the tool schema from
        schema = get_json_schema(tool)["function"]
        assert schema["description"] and schema["parameters"]["required"]


def test_trl_tool_environment_keeps_a_workspace_across_the_turns_of_a_rollout():
    """A function built at turn 1 (a module in the workspace) is called at turn 2; the next rollout
    starts empty; with workspace=False every call starts empty."""
    rec = generate_record(TaskConfig(n=8), 5, 0, seed=2)
    row = tool_dataset([rec])[0]
    module = 'def label_sum(samples):\\n    return sum(s["y"] for s in samples)\\n'
    build = f"open('tools.py', 'w').write('{module}')"
    use = "import tools\nprint('labels', tools.label_sum(samples))"
    env = GF2ToolEnvironment(depths=(3,), seed=0)
    assert "stay for your later run_python calls" in env.reset(**row)
    assert "exit code 0" in env.run_python(build)
    second = env.run_python(use)
    assert f"labels {int(rec.labels.sum())}" in second, second
    env.reset(**row)  # the next rollout
    assert "No module named 'tools'" in env.run_python(use)
    env.get_reward()  # the rollout ends: its workspace is emptied and given back
    assert env.workspace is None
    import inspect  # TRL offers every public method but reset and get_reward to the model as a tool

    public = {n for n, _ in inspect.getmembers(GF2ToolEnvironment, inspect.isfunction) if n[0] != "_"}
    assert public == {"reset", "run_python", "submit", "get_reward"}
    fresh = GF2ToolEnvironment(workspace=False, depths=(3,), seed=0)
    assert "stay for your later" not in fresh.reset(**row)
    fresh.run_python(build)
    assert "No module named 'tools'" in fresh.run_python(use)


def test_the_sandbox_globals_are_described_once_and_the_budget_is_counted_once():
    from gf2env.agents.llm.tools import PAPER_MAX_REVISIONS, PAPER_TOOL_CALLS, PythonTool
    from gf2env.agents.llm.tools.record_globals import RECORD_GLOBALS, SAMPLE_FIELDS, tool_view
    from gf2env.errors import GF2ConfigError

    rec = generate_record(TaskConfig(n=8), 5, 0, seed=2)
    view = tool_view(rec, 7)
    assert set(RECORD_GLOBALS) == {*view, "record"} - {"answer_offset"} and view["answer_offset"] == 7
    assert tuple(view["samples"][0]) == tuple(SAMPLE_FIELDS) and PAPER_TOOL_CALLS == PAPER_MAX_REVISIONS + 1

    class Ran:
        def run(self, code, view):
            from types import SimpleNamespace

            return SimpleNamespace(
                exit_code=0, stdout=code, stderr="", stop_reason="exited", wall_s=0.0, stdout_truncated=False
            )

    tool = PythonTool(Ran(), "spent {max_calls}", max_calls=1)
    with pytest.raises(GF2ConfigError, match="no record"):
        tool.run_python("x")
    tool.start(view)
    assert tool.run_python("print(1)").startswith("exit code 0") and tool.run_python("x") == "spent 1"
    tool.start(view)  # a new record: the budget starts again
    assert tool.calls == 0 and "print(2)" in tool.run_python("print(2)")
