"""The paper's tool protocol and run presets: its messages byte for byte, its sandbox rules, its table,
and the exact request bodies a paper preset sends (real servers on 127.0.0.1, the real sandbox)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("httpx")

from gf2env.agents.harness.compare import load_config  # noqa: E402
from gf2env.agents.llm.openai_server import request_body  # noqa: E402
from gf2env.agents.llm.queries import Query, SamplingParams  # noqa: E402
from gf2env.agents.llm.tools.paper import (  # noqa: E402
    first_code_block,
    paper_feedback,
    paper_result,
    paper_tool_message,
)
from gf2env.agents.llm.tools.usage import PAPER_TOOL_USAGE_COLUMNS, paper_tool_usage  # noqa: E402
from gf2env.agents.sandbox import (  # noqa: E402
    PAPER_LIMITS,
    Sandbox,
    SandboxConfigError,
    detect_isolation,
    paper_record_view,
)
from gf2env.agents.sandbox.view import check_view  # noqa: E402
from gf2env.errors import GF2ConfigError  # noqa: E402
from gf2env.records.record import Record, generate_record  # noqa: E402
from gf2env.task.oracle import TaskConfig  # noqa: E402
from gf2env.text.prompt import render_prompt  # noqa: E402
from gf2env.train.tool_solvers import PAPER_DILIGENT_SOLVER  # noqa: E402
from tests.fault_server import FaultServer  # noqa: E402
from tests.paths import REFERENCE as REFERENCE_DIR  # noqa: E402

EXAMPLES = REFERENCE_DIR / "paper-protocol-examples.json"
ROOT = Path(__file__).resolve().parents[2]
PAPER_STOPS = ["<|im_end|>", "<|endoftext|>", "]}"]
needs_bwrap = pytest.mark.skipif(
    not detect_isolation().get("bwrap"), reason="bubblewrap cannot run here (apt-get install -y bubblewrap)"
)


def examples() -> dict:
    if not EXAMPLES.exists():
        pytest.skip(f"the paper's protocol examples are not at {EXAMPLES}")
    return json.loads(EXAMPLES.read_text())


def record(g: int = 3, seed: int = 0) -> Record:
    return generate_record(TaskConfig(p=12, d=4, n=g + 1, K=32), g, 0, seed=seed)


def paper_question(rec: Record) -> str:
    return render_prompt(
        "paper", rec.prefix, rec.address, rec.payload, rec.labels, n=rec.n, p=rec.p, d=rec.d
    ).text


# ------------------------------------------------------------------------------- byte-exact messages


def test_the_tool_message_is_the_papers_byte_for_byte():
    for example in examples()["tool_examples"]:
        rec = Record.from_json(example["record"])
        assert paper_question(rec) == example["question"]  # the question is the paper prompt
        assert paper_tool_message(example["question"], revise=True) == example["prompt"]


def test_the_feedback_is_the_papers_byte_for_byte():
    cases = examples()["feedback_examples"]
    assert len(cases) == 3
    for case in cases:
        assert paper_feedback(case["sandbox_result"], case["revise"]) == case["feedback"]


def test_without_revisions_the_iteration_item_and_the_revise_choice_are_left_out():
    with_revise, without = paper_tool_message("Q\n", True), paper_tool_message("Q\n", False)
    assert "**Iteration:**" in with_revise and "**Iteration:**" not in without
    assert with_revise.startswith(without)
    result = {"stdout": "x\n", "stderr": "", "returncode": 0, "elapsed_ms": 1.0, "error": None}
    assert paper_feedback(result, False) == "Execution result:\nstdout:\nx\n\nreturncode=0, elapsed=1.0ms"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("Here:\n```python\nprint(1)\n```\nand\n```python\nprint(2)\n```", "print(1)\n"),  # the first
        ("```\nprint(3)\n```", "print(3)\n"),  # a bare fence
        ("Cut off:\n```python\nx = 1\nprint(x", "x = 1\nprint(x"),  # a fence never closed runs
        ("<think>```python\nprint('draft')\n```</think>\\boxed{[1, 2, 3]}", None),  # reasoning never runs
        ("The answer is \\boxed{[13, 14, 16]}", None),
        ("  ```python\n  print(1)\n  ```", "  print(1)\n  "),  # as written: no dedent
    ],
)
def test_the_first_block_runs(text, code):
    assert first_code_block(text) == code


# ------------------------------------------------------------------------------------ sandbox rules


def test_record_holds_the_papers_fields_without_the_target():
    rec = record(g=5)
    view = paper_record_view(rec, "the question")
    assert set(view) == {"RECORD", "PROMPT"} and view["PROMPT"] == "the question"
    assert set(view["RECORD"]) == {"n", "p", "g", "d_max", "prefix", "samples"}
    sample = view["RECORD"]["samples"][0]
    assert set(sample) == {"x", "x_int", "bits", "y"}
    assert len(sample["bits"]) == rec.n + rec.p and sample["x_int"] == int(sample["bits"], 2)
    assert sample["x"] == hex(sample["x_int"])
    with pytest.raises(SandboxConfigError, match="target"):
        check_view({**view, "RECORD": {**view["RECORD"], "target": [0, 1, 2]}})


def test_record_samples_are_the_papers_hex_strings():
    for example in examples()["examples"]:
        view = paper_record_view(Record.from_json(example["record"]), "")
        assert [s["x"] for s in view["RECORD"]["samples"]] == [s["x"] for s in example["record"]["samples"]]


@needs_bwrap
def test_the_papers_limits_in_the_sandbox():
    rec = record(g=3)
    question = paper_question(rec)
    view = paper_record_view(rec, question)
    sandbox = Sandbox(PAPER_LIMITS)
    ok = sandbox.run('import collections, re\nprint(RECORD["g"], PROMPT == ' + repr(question) + ")", view)
    assert ok.ok and ok.stdout == "3 True\n"
    numpy = sandbox.run("import numpy", view)
    assert numpy.exit_code == 1 and "import of 'numpy' is not allowed" in numpy.stderr
    for banned in ("eval('1')", "open('/etc/hostname')", "exec('x = 1')"):
        run = sandbox.run(banned, view)
        assert run.exit_code == 1 and "NameError" in run.stderr, banned
    assert "target" not in sandbox.run("print(sorted(RECORD))", view).stdout
    slow = sandbox.run("while True:\n    pass", view)
    result = paper_result(slow)
    assert result["error"] == "timeout" and result["returncode"] is None
    assert 500 <= result["elapsed_ms"] < 2000
    assert paper_feedback(result, True).startswith("Execution result:\nerror: timeout\nreturncode=None, ")
    solved = sandbox.run(PAPER_DILIGENT_SOLVER, view)
    assert solved.ok and solved.stdout == "\\boxed{" + str(sorted(i + rec.n for i in rec.target)) + "}\n"


@needs_bwrap
def test_the_protocols_rules_hold_through_other_modules_builtins():
    """The import allow-list and the denied builtins cannot be reached through a module's (or a
    function's) ``__builtins__``; library code that needs a denied builtin still works."""
    view = paper_record_view(record(g=3), "")
    with Sandbox(PAPER_LIMITS, workers=1) as sandbox:
        for attempt in (
            "import re\nre.__builtins__['__import__']('numpy')",
            "import re\nre.compile.__builtins__['__import__']('os')",
            "import re\nprint(re.__builtins__['open']('/etc/hostname').read())",
            "import re\nprint(re.__builtins__['eval']('1 + 1'))",
            "import json\njson.loads.__globals__['__builtins__']['exec']('x = 1')",
            "import functools as f\nprint(f.partial(f.__builtins__['compile'], 'x', 'f', 'exec')())",
        ):
            run = sandbox.run(attempt, view)
            assert run.exit_code == 1 and ("not allowed" in run.stderr), (attempt, run.stderr)
        code = "import collections as c, json\nP = c.namedtuple('P', 'x y')\nprint(P(1, 2), json.dumps([1]))"
        library = sandbox.run(code, view)
        assert library.ok and library.stdout == "P(x=1, y=2) [1]\n", library


def test_sandbox_limits_refuse_bad_rule_lists():
    from gf2env.agents.sandbox import SandboxLimits

    with pytest.raises(SandboxConfigError, match="imports"):
        SandboxLimits(imports="re")  # type: ignore[arg-type]
    with pytest.raises(SandboxConfigError, match="denied_builtins"):
        SandboxLimits(denied_builtins=("not a name",))


# --------------------------------------------------------------------------------- sampling options


def test_top_k_is_sent_only_when_set_and_checked():
    rec = record(g=0)
    prompt = render_prompt("paper", rec.prefix, rec.address, rec.payload, rec.labels, n=rec.n, p=12, d=4)
    query = Query("k", prompt, 7)
    assert "top_k" not in request_body(query, SamplingParams(), "m")
    assert request_body(query, SamplingParams(top_k=20), "m")["top_k"] == 20
    assert "top_k" not in SamplingParams().to_dict() and SamplingParams(top_k=5).to_dict()["top_k"] == 5
    with pytest.raises(GF2ConfigError, match="top_k=0"):
        SamplingParams(top_k=0)


# ------------------------------------------------------------------------------ the tool-usage table


def test_paper_tool_usage_pairs_the_tool_run_with_the_no_tool_run():
    def line(correct, tool_use=None, first=None, g=3):
        out = {"status": "ok", "model": "m", "model_class": "instruct", "g": g, "p": 12, "correct": correct}
        if tool_use:
            out.update(tool_use=tool_use, first_run_correct=first)
        return out

    lines = [line(True), line(False), line(False),  # no tools: 1 of 3
             line(True, "single_tool", True), line(True, "multi_tool", False),
             line(False, "no_tool", None), line(True, "multi_tool", False, g=7)]  # fmt: skip
    rows = paper_tool_usage(lines)
    assert [tuple(r) for r in rows] == [PAPER_TOOL_USAGE_COLUMNS] * 2
    g3, g7 = rows
    assert (g3["no_tool_rate"], g3["no_tool_n"]) == (pytest.approx(1 / 3), 3)
    assert (g3["single_tool_rate"], g3["single_tool_n"]) == (pytest.approx(1 / 3), 3)
    assert (g3["multi_tool_rate"], g3["multi_tool_n"]) == (pytest.approx(2 / 3), 3)
    assert (g7["no_tool_rate"], g7["no_tool_n"], g7["multi_tool_rate"]) == (None, 0, 1.0)


# ------------------------------------------------------------------------- a paper preset, end to end


def start(srv: FaultServer) -> FaultServer:
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@needs_bwrap
@pytest.mark.parametrize("mode", ["paper-solver", "paper-solver-unclosed"])
def test_a_paper_preset_sends_the_papers_requests(tmp_path, mode):
    preset = ROOT / "configs" / "eval/paper-qwen3-4b-instruct.yaml"
    config = load_config(preset)
    assert [(a.concurrency, a.timeout, len(a.base_urls)) for a in config.agents] == [(64, 3600, 2)] * 2
    servers = [start(FaultServer()), start(FaultServer())]
    try:
        urls = [arg for s in servers for arg in ("--base-url", f"{s.url}/{mode}")]
        cmd = [sys.executable, "-m", "gf2env", "eval", "--config", str(preset), *urls,
               "--depths", "0,3", "--trials", "2", "--out", str(tmp_path), "--quiet", "--no-plots",
               "--no-fit"]  # fmt: skip
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
        bodies = [b for s in servers for b in s.bodies]
        assert all(s.bodies for s in servers)  # both replicas were asked
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()
    assert run.returncode == 0, run.stderr
    lines = [json.loads(x) for x in (tmp_path / "queries.jsonl").read_text().splitlines()]
    plain = [x for x in lines if "tool_use" not in x]
    tools = [x for x in lines if "tool_use" in x]
    assert len(plain) == len(tools) == 4 and {x["model_class"] for x in lines} == {"instruct"}
    common = {"model": "Qwen/Qwen3-4B-Instruct-2507", "temperature": 0.0, "top_p": 1.0,
              "max_tokens": 16384, "n": 1}  # fmt: skip
    for x in plain:  # one user message, no system message, the paper's stop strings
        assert x["system"] == "" and x["prompt_id"] == "paper"
        expected = {**common, "seed": x["seed"], "stop": PAPER_STOPS,
                    "messages": [{"role": "user", "content": x["prompt"]}]}  # fmt: skip
        assert expected in bodies
        assert x["stop_reason"] == "]}" and x["score"]["failure"] != "no_answer"  # the cut box is read
    for x in tools:  # the question and the tool instructions in one message; `]}` dropped
        message = {"role": "user", "content": paper_tool_message(x["prompt"], True)}
        first = {**common, "seed": x["seed"], "stop": PAPER_STOPS[:2], "messages": [message]}
        assert first in bodies
        assert x["correct"] and x["first_run_correct"] and x["tool_prompt_id"] == "paper-tools"
        assert x["turns"][0]["code"] == PAPER_DILIGENT_SOLVER and x["turns"][0]["sandbox"]["ok"]
    second = [b for b in bodies if len(b.get("messages", [])) == 3]
    assert len(second) == 4
    feedback = [b["messages"][2]["content"] for b in second]
    assert all(f.startswith("Execution result:\nstdout:\n\\boxed{[") for f in feedback)
    assert all(
        f.endswith("(b) your final answer in plain text as `\\boxed{[...]}` (no code).") for f in feedback
    )
    with open(tmp_path / "tool_usage.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert [tuple(r) for r in table] == [PAPER_TOOL_USAGE_COLUMNS] * 2
    assert {(r["g"], r["no_tool_n"], r["single_tool_rate"], r["multi_tool_rate"]) for r in table} == {
        ("0", "2", "1.0", "1.0"),
        ("3", "2", "1.0", "1.0"),
    }
    assert "the paper's table" in run.stdout and "wrote" in run.stdout


def test_a_tool_protocol_without_tool_mode_is_refused():
    from gf2env.agents.llm.agent import LLMSpec

    with pytest.raises(GF2ConfigError, match="add tools: true"):
        LLMSpec(model="m", backend="transformers", tool_protocol="paper")
    with pytest.raises(GF2ConfigError, match="tool_protocol='pape' is unknown"):
        LLMSpec(model="m", backend="transformers", tools=True, tool_protocol="pape")


def test_eval_config_refuses_an_agent_flag_too():
    cmd = [sys.executable, "-m", "gf2env", "eval", "--config", "configs/eval/paper-qwen3-4b-instruct.yaml",
           "--agent", "vllm"]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode != 0 and "drop --agent vllm" in run.stderr
    tools = [*cmd[:-2], "--tools", "--temperature", "0.5", "--depths", "0"]
    run = subprocess.run(tools, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode != 0 and "drop --temperature, --tools" in run.stderr


@pytest.mark.parametrize(
    "name", ["qwen3-4b-instruct", "qwen3-4b-thinking", "qwen3-30b-a3b-instruct", "qwen3-30b-a3b-thinking"]
)
def test_every_paper_preset_is_the_papers_run(name):
    config = load_config(ROOT / "configs" / "eval" / f"paper-{name}.yaml")
    plain, tools = config.agents
    for agent in (plain, tools):
        assert (agent.prompt_id, agent.system, agent.samples) == ("paper", "", 1)
        s = agent.sampling
        assert (s.temperature, s.max_tokens, list(s.stop), s.top_k) == (0.0, 16384, PAPER_STOPS, None)
        assert (agent.concurrency, agent.timeout) == (64, 3600)
        assert len(agent.base_urls) == (2 if "4b" in name else 1)
    assert not plain.tools and tools.tools and tools.tool_protocol == "paper" and tools.max_revisions == 10
