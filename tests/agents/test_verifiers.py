"""verifiers 0.4 as its users run it: the ``gf2-recon`` taskset through verifiers' own loader, its tool
in gf2env's sandbox, and ``vf-eval`` against vLLM on CPU serving SmolLM2, equal to ``gf2 eval`` on the
same records.

verifiers lives in its own virtualenv (``make .venv-verifiers/.ready``: it pins openai<3), found at
``$GF2_VERIFIERS_PYTHON`` or ``<repo>/.venv-verifiers/bin/python``; these tests run it as a subprocess
(``tests/agents/verifiers_probe.py``, ``vf-eval``) and check its answers against gf2env's own parts here.
Where the venv is absent they are skipped, unless ``GF2_REQUIRE_EXTRAS`` is set (``make test``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gf2env.config.settings import TaskSettings
from gf2env.records.record import generate_record
from gf2env.records.rows import prompt_row
from gf2env.text.answers import score_answer
from tests.extras import REQUIRE_EXTRAS_ENV
from tests.servers import REPO, SERVER_ENV, vllm_or_skip

VF_PYTHON_ENV = "GF2_VERIFIERS_PYTHON"
PROBE = Path(__file__).with_name("verifiers_probe.py")
SMALL = {"p": 6, "d": 3, "K": 8, "depths": [0, 1], "trials": 2, "prompt": "compact-v2"}


@pytest.fixture(scope="module")
def vf_python() -> Path:
    """The verifiers virtualenv's python (skip, or fail under GF2_REQUIRE_EXTRAS, where it is absent)."""
    path = Path(os.environ.get(VF_PYTHON_ENV) or REPO / ".venv-verifiers" / "bin" / "python")
    probe = (
        subprocess.run([str(path), "-c", "import verifiers"], capture_output=True) if path.is_file() else None
    )
    if probe is None or probe.returncode:
        why = f"no verifiers venv at {path} (make .venv-verifiers/.ready builds it, or set {VF_PYTHON_ENV})"
        if os.environ.get(REQUIRE_EXTRAS_ENV):
            pytest.fail(f"{why}; {REQUIRE_EXTRAS_ENV} is set, so this is a failure, not a skip.")
        pytest.skip(why)
    return path


def vf_env(python: Path) -> dict[str, str]:
    """The repo on PYTHONPATH, and the venv's bin first on PATH (``uv``, which runs verifiers' harnesses)."""
    return {**os.environ, "PYTHONPATH": str(REPO), "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}"}


def probe(python: Path, command: str, job: dict[str, Any]) -> dict[str, Any]:
    run = subprocess.run(
        [str(python), str(PROBE), command], input=json.dumps(job), capture_output=True, text=True,
        timeout=300, env=vf_env(python), cwd=REPO,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def cli_flags(prefix: str, settings: dict[str, Any]) -> list[str]:
    """``--prefix.key value`` pairs as verifiers' CLI reads them (lists as compact JSON)."""
    flags = []
    for key, value in settings.items():
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        flags += [f"--{prefix}.{key.replace('_', '-')}", text]
    return flags


def records(
    p: int, d: int, K: int, depths: list[int], trials: int, seed: int = 0, **_: Any
) -> dict[str, Any]:
    """The records ``gf2 eval`` draws for these settings, by the task id the taskset gives them."""
    settings = TaskSettings(p=p, d=d, K=K)
    return {
        f"p{p}-d{d}-K{K}-adversarial-seed{seed}-g{g}-t{t}": generate_record(settings.at_depth(g), g, t, seed)
        for g in depths
        for t in range(trials)
    }


def test_without_verifiers_the_module_names_the_extra():
    """The main venv has no verifiers (it pins openai<3): importing the door says what to install."""
    import importlib.util

    if importlib.util.find_spec("verifiers") is not None:
        pytest.skip("verifiers is importable here")
    from gf2env.errors import MissingExtraError

    for module in ("gf2env.agents.integrations.verifiers", "gf2_recon"):
        sys.modules.pop(module, None)
        with pytest.raises(MissingExtraError, match=r"pip install -e '\.\[verifiers\]'"):
            importlib.import_module(module)


def test_the_taskset_loads_by_its_id_and_its_reward_is_gf2envs_scorer(vf_python):
    recs = records(**SMALL)
    rows = {name: prompt_row(rec, SMALL["prompt"]) for name, rec in recs.items()}
    replies = {}
    for name, rec in recs.items():
        row = rows[name]
        right = [i + row["answer_offset"] for i in rec.target]
        wrong = [(i + 1) % rec.p + row["answer_offset"] for i in rec.target]
        replies[name] = [
            f"So the term is \\boxed{{{right}}}",  # correct
            f"\\boxed{{{wrong}}}",  # a well-formed wrong term
            f"\\boxed{{{right}}} or maybe \\boxed{{{wrong}}}",  # a hedge: multiple_conflicting
            "I cannot tell.",  # no answer
            f"<think>\\boxed{{{right}}}</think> \\boxed{{{wrong}}}",  # reasoning does not count
        ]
    out = probe(vf_python, "score", {"taskset": SMALL, "replies": replies})
    assert (
        out["taskset"] == "gf2env.agents.integrations.verifiers.GF2Taskset"
        and out["taskset_class"] == "GF2Taskset"
    )
    assert out["env"] == "SingleAgentEnv" and out["harness"] == ["gf2-recon", "GF2Harness"]
    assert [t["id"] for t in out["tasks"]] == list(recs)  # depths outermost, then trials
    failures = []
    for task in out["tasks"]:
        rec, row = recs[task["id"]], rows[task["id"]]
        # the very records and prompt rows of gf2 generate / gf2 eval
        assert json.loads(task["record"]) == json.loads(row["record"]) and task["target"] == row["target"]
        assert task["prompt"] == row["prompt"] and task["answer_offset"] == row["answer_offset"]
        assert task["toolsets"] == 0
        for reply, got in zip(replies[task["id"]], task["scores"], strict=True):
            want = score_answer(reply, rec.target, rec.p, row["answer_offset"])
            assert got["reward"] == float(want.correct) and got["weight"] == 1.0
            assert (
                got["metrics"][f"failure_{want.failure.value}"] == 1.0 and sum(got["metrics"].values()) == 1.0
            )
            failures.append(want.failure.value)
    assert {"none", "wrong_term", "multiple_conflicting", "no_answer"} <= set(failures)


def test_bad_settings_are_refused_with_gf2envs_messages(vf_python):
    run = subprocess.run(
        [str(vf_python), str(PROBE), "score"], input=json.dumps({"taskset": {"d": 99}, "replies": {}}),
        capture_output=True, text=True, timeout=300, env=vf_env(vf_python), cwd=REPO,
    )  # fmt: skip
    assert run.returncode != 0 and "d=99" in run.stderr, run.stderr[-2000:]


def test_the_tool_runs_the_models_code_in_the_sandbox(vf_python):
    from gf2env.agents.sandbox import detect_isolation

    if not detect_isolation().get("bwrap"):
        if os.environ.get("GF2_REQUIRE_BWRAP"):
            pytest.fail("GF2_REQUIRE_BWRAP is set but bubblewrap cannot run here")
        pytest.skip("bubblewrap cannot run here (apt-get install -y bubblewrap)")
    code = [
        "import os\nprint(p, g, prefix, record['answer_offset'], len(samples), os.getuid())",
        "print('target' in record, sorted(record))",  # the record's public view, never its target
        "import socket; socket.socket()",
        "print(open('/etc/hostname').read())",
    ]
    taskset = {**SMALL, "depths": [1], "trials": 1}
    out = probe(vf_python, "tool", {"taskset": taskset, "code": code})
    (rec,) = records(**taskset).values()
    assert out["tools"] == ["run_python"] and out["schema"][0]["required"] == ["code"]
    assert {"bwrap-namespaces", "no-network", "read-only-fs", "seccomp"} <= set(out["layers"])
    (first,), (second,), (net,), (host,) = out["results"]
    assert first.startswith("exit code 0 (exited") and f"6 1 {[list(rec.prefix[0])]} 0 8 65534" in first
    assert second.startswith("exit code 0") and "False ['K', 'answer_offset', 'd', 'g', 'n'" in second
    assert "exit code 1" in net and "PermissionError" in net
    assert "exit code 1" in host and "FileNotFoundError" in host
    assert "run_python(code)" in out["prompt"][-1]["content"] and out["data"]["target"] == list(rec.target)


# --- vf-eval against vLLM, and gf2 eval on the same records ---

E2E = {
    "p": 6,
    "d": 3,
    "K": 8,
    "depths": [0, 1],
    "trials": 3,
    "seed": 1,
}  # paper prompt; SmolLM2 gets one right
SAMPLING = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 48}


@pytest.fixture(scope="module")
def vllm_server(smollm2, tmp_path_factory):
    """vLLM on CPU serving SmolLM2, once for this module (about a minute to start; stopped by its PID)."""
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    server = vllm_or_skip(smollm2, max_model_len=4096, timeout=900, log_path=log)
    yield server
    server.stop()


@pytest.mark.slow
def test_vf_eval_against_vllm_equals_gf2_eval_on_the_same_records(vf_python, vllm_server, tmp_path):
    """verifiers' own CLI, its chat harness and its rubric against the real server, and ``gf2 eval``:
    the same prompts, the same greedy replies token for token, the same grades and the same γ."""
    server = vllm_server
    t0 = time.monotonic()
    taskset, sampling = cli_flags("env.taskset", E2E), cli_flags("sampling", SAMPLING)
    cmd = [str(vf_python.parent / "vf-eval"), "gf2-recon", "-m", server.model,
           "--client.base-url", f"{server.base_url}/v1", "--client.api-key-var", "GF2_NO_API_KEY",
           "--env.agent.runtime.type", "subprocess", *taskset, *sampling,
           "--no-push", "--no-rich", "-o", str(tmp_path / "vf"), "--run.name", "gf2"]  # fmt: skip
    run = subprocess.run(
        cmd, capture_output=True, text=True, timeout=900, env=vf_env(vf_python), cwd=tmp_path
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    vf_seconds = time.monotonic() - t0
    episodes = [
        json.loads(line) for line in (tmp_path / "vf" / "gf2" / "traces.jsonl").read_text().splitlines()
    ]
    n = len(E2E["depths"]) * E2E["trials"]
    assert len(episodes) == n and all(e["ok"] and not e["errors"] for e in episodes)

    out = tmp_path / "gf2"
    grid = ["--p", "6", "--d", "3", "--K", "8", "--depths", "0,1", "--trials", "3", "--seed", "1"]
    flags = ["--temperature", "0", "--top-p", "1.0", "--max-tokens", "48"]
    cmd = [sys.executable, "-m", "gf2env", "eval", "--agent", "vllm", "--base-url", server.base_url,
           "--model", server.model, *grid, *flags, "--out", str(out), "--quiet", "--no-plots"]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env={**os.environ, **SERVER_ENV})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    queries = {
        (q["g"], q["trial"]): q for q in map(json.loads, (out / "queries.jsonl").read_text().splitlines())
    }
    assert len(queries) == n

    vf_gamma: dict[int, list[float]] = {}
    gf2_gamma: dict[int, list[float]] = {}
    for episode in episodes:
        (trace,) = episode["traces"]
        data = trace["task"]["data"]
        query = queries[(data["g"], data["trial"])]
        (reply,) = [node["message"]["content"] for node in trace["nodes"] if node["sampled"]]
        (call,) = trace["calls"]
        assert data["prompt"] == [{"role": "user", "content": query["prompt"]}]  # the paper prompt: no system
        assert reply == query["response"]  # greedy: the same reply, token for token
        assert call["usage"] == {
            "prompt_tokens": query["prompt_tokens"],
            "completion_tokens": query["completion_tokens"],
        }
        assert call["finish_reason"] == query["finish_reason"]
        reward = trace["rewards"]["correct"]["score"]
        assert (
            reward == float(query["correct"])
            and trace["metrics"][f"failure_{query['score']['failure']}"] == 1.0
        )
        vf_gamma.setdefault(data["g"], []).append(reward)
        gf2_gamma.setdefault(data["g"], []).append(float(query["correct"]))
    assert vf_gamma == gf2_gamma
    gammas = {g: sum(v) / len(v) for g, v in sorted(vf_gamma.items())}
    print(f"\nγ by depth, vf-eval = gf2 eval: {gammas}; vf-eval took {vf_seconds:.1f} s")


# --- the tool env through vf-eval: verifiers starts the tool server, the code runs in the sandbox ---

SOLVER = """
import itertools, os
rows = [([int(c) for c in s['payload']], s['y']) for s in samples]
terms = itertools.combinations(range(p), d - 1)
fits = [c for c in terms if all(y == int(all(v[i] for i in c)) for v, y in rows)]
print(os.getuid(), sorted(record), len(fits))
print('\\\\boxed{' + str([i + record['answer_offset'] for i in fits[0]]) + '}')
"""


class ScriptedModel(ThreadingHTTPServer):
    """A stand-in for the model (the part under test is the tool path, not a model's skill): its first
    turn calls ``run_python`` with :data:`SOLVER`, its second repeats the tool's output as its reply.
    Streams OpenAI chat-completion chunks, as verifiers' chat harness asks for."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ScriptedTurn)
        self.requests: list[dict[str, Any]] = []


class ScriptedTurn(BaseHTTPRequestHandler):
    server: ScriptedModel

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        tool_results = [m for m in body["messages"] if m["role"] == "tool"]
        if tool_results:
            content = tool_results[-1]["content"]
            text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
            delta, finish = {"role": "assistant", "content": text}, "stop"
        else:
            function = {"name": "run_python", "arguments": json.dumps({"code": SOLVER})}
            call = {"index": 0, "id": "call_0", "type": "function", "function": function}
            delta, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        head = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": body["model"]}
        chunks = [
            {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {**head, "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}},
        ]
        payload = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def test_vf_eval_with_tools_runs_the_models_code_in_the_sandbox(vf_python, tmp_path):
    from gf2env.agents.sandbox import detect_isolation

    if not detect_isolation().get("bwrap"):
        if os.environ.get("GF2_REQUIRE_BWRAP"):
            pytest.fail("GF2_REQUIRE_BWRAP is set but bubblewrap cannot run here")
        pytest.skip("bubblewrap cannot run here (apt-get install -y bubblewrap)")
    model = ScriptedModel()
    threading.Thread(target=model.serve_forever, daemon=True).start()
    taskset = {**SMALL, "depths": [0], "trials": 2, "tools": True}
    try:
        flags = cli_flags("env.taskset", taskset)
        cmd = [str(vf_python.parent / "vf-eval"), "gf2-recon", "-m", "scripted",
               "--client.base-url", f"http://127.0.0.1:{model.server_address[1]}/v1",
               "--client.api-key-var", "GF2_NO_API_KEY", "--env.agent.runtime.type", "subprocess", *flags,
               "--no-push", "--no-rich", "-o", str(tmp_path), "--run.name", "tools"]  # fmt: skip
        run = subprocess.run(
            cmd, capture_output=True, text=True, timeout=600, env=vf_env(vf_python), cwd=tmp_path
        )
    finally:
        model.shutdown()
        model.server_close()
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    episodes = [json.loads(line) for line in (tmp_path / "tools" / "traces.jsonl").read_text().splitlines()]
    recs = records(**taskset)
    assert len(episodes) == len(recs) == 2 and len(model.requests) == 4
    assert all(r["tools"][0]["function"]["name"] == "run_python" for r in model.requests)
    for episode in episodes:
        (trace,) = episode["traces"]
        assert episode["ok"] and not episode["errors"], episode["errors"]
        rec = recs[trace["task"]["data"]["id"]]
        (tool,) = [node["message"] for node in trace["nodes"] if node["message"]["role"] == "tool"]
        output = tool["content"] if isinstance(tool["content"], str) else tool["content"][0]["text"]
        assert output.startswith("exit code 0 (exited")
        assert "65534 ['K', 'answer_offset', 'd', 'g', 'n'" in output  # nobody, in the jail, on the view
        reply = [node["message"].get("content") for node in trace["nodes"] if node["sampled"]][-1]
        assert reply == output  # the stand-in's last turn: the sandbox's output, graded by gf2env's scorer
        want = score_answer(reply, rec.target, rec.p, 0)
        assert trace["rewards"]["correct"]["score"] == float(want.correct)
        assert trace["metrics"][f"failure_{want.failure.value}"] == 1.0
