"""Episode mode end to end: an LLM walks each instance through its depths, its code's files kept in one
workspace an episode; what a step reuses is measured and summed up.

The "model" is the fault server's scripted ``tool-builder`` (a real HTTP server on 127.0.0.1): with
an empty workspace it writes ``tools.py`` and calls it; once the workspace lists ``tools.py`` it
imports it. The sandbox, workspaces, log and harness are ours, unmocked.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("httpx")

from gf2env.agents.base import Cell  # noqa: E402
from gf2env.agents.harness.evaluate import evaluate  # noqa: E402
from gf2env.agents.llm.agent import LLMAgent, LLMSpec  # noqa: E402
from gf2env.agents.llm.query_log import QueryLog  # noqa: E402
from gf2env.agents.llm.tools.protocol import tool_protocol  # noqa: E402
from gf2env.agents.llm.tools.reuse import (  # noqa: E402
    code_lines,
    episode_table,
    reuse_table,
    step_reuse,
    used_from_workspace,
    workspace_note,
)
from gf2env.agents.llm.tools.workspaces import chain_episodes, run_episodes  # noqa: E402
from gf2env.agents.sandbox import Sandbox, WorkspaceInventory, detect_isolation  # noqa: E402
from gf2env.errors import GF2ConfigError  # noqa: E402
from gf2env.records.columns import columns_from_records, generate_episode  # noqa: E402
from gf2env.records.record import Record, generate_record  # noqa: E402
from gf2env.report.results import read_results_csv  # noqa: E402
from gf2env.task.oracle import TaskConfig  # noqa: E402

needs_bwrap = pytest.mark.skipif(
    not detect_isolation().get("bwrap"), reason="bubblewrap cannot run here (apt-get install -y bubblewrap)"
)


def walk(episode: int, p: int = 6, d: int = 3, K: int = 16, n: int = 4) -> list[Record]:
    """The steps of one episode (as the environment walks it in reveal mode)."""
    return generate_episode(TaskConfig(p=p, d=d, K=K, n=n), episode, seed=5)


def episode_cells(episodes: list[list[Record]]) -> list[Cell]:
    cells = []
    for g in range(len(episodes[0])):
        records = [steps[g] for steps in episodes]
        batch = columns_from_records(records)[0].step_batch()
        trials = np.arange(len(records))
        cells.append(Cell("episodes", "adversarial", records[0].n, 0, trials, batch, records))
    return cells


def spec(server, mode: str = "tool-builder", **kwargs) -> LLMSpec:
    return LLMSpec(
        model="builder", backend="vllm", base_urls=(f"{server.url}/{mode}",), tools=True,
        workspace="episode", max_revisions=2, **kwargs,
    )  # fmt: skip


# ------------------------------------------------------------------------------------ the measures


def test_what_a_step_uses_of_the_workspace():
    files = {"tools.py": 120, "pkg/solve.py": 30, "notes.json": 9}
    assert used_from_workspace("import tools\nprint(tools.parity([1]))", files) == ["tools", "tools.parity"]
    assert used_from_workspace("import tools as t\nt.solve()", files) == ["tools", "tools.solve"]
    assert used_from_workspace("from pkg.solve import run\nrun()", files) == ["pkg.solve.run"]
    assert used_from_workspace("import json\njson.load(open('notes.json'))", files) == ["notes.json"]
    assert used_from_workspace("open('/scratch/notes.json')", files) == ["notes.json"]
    assert used_from_workspace("import numpy\nprint('tools')", files) == []  # not a file, not imported
    assert used_from_workspace("import tools", {}) == []  # nothing there: a failed import is no reuse
    assert used_from_workspace("def broken(:\n  import tools", files) == []  # does not parse
    assert code_lines("# c\n\nx = 1\n   y = 2  \n") == ["x = 1", "y = 2"]


def test_step_reuse_counts_new_lines_against_the_episode():
    empty = WorkspaceInventory()
    built = WorkspaceInventory(files={"tools.py": 40}, definitions={"tools": ["solve"]})
    seen: set[str] = set()
    first = step_reuse(["x = 1\nprint(x)", "print(x)"], empty, built, seen)
    assert first == {
        "reused": False, "reused_names": [], "code_lines": 3, "new_lines": 2, "tools_before": [],
        "tools_after": ["tools.solve"], "workspace_complete": True,
    }  # fmt: skip
    second = step_reuse(["import tools\ntools.solve()\nprint(x)"], built, built, seen)
    assert second["reused"] and second["reused_names"] == ["tools", "tools.solve"]
    assert (second["code_lines"], second["new_lines"]) == (3, 2)  # print(x) ran at the step before


def test_the_workspace_note_lists_files_and_definitions():
    assert workspace_note(WorkspaceInventory()).endswith("The workspace is empty.")
    held = WorkspaceInventory(files={"tools.py": 40, "a.txt": 3}, definitions={"tools": ["solve", "Table"]})
    note = workspace_note(held)
    assert "- `tools.py` (40 bytes): defines solve, Table" in note and "- `a.txt` (3 bytes)" in note
    assert "could not be read" in workspace_note(WorkspaceInventory(complete=False))
    many = WorkspaceInventory(files={f"f{i:03}.txt": 1 for i in range(30)})
    assert "and 6 more files" in workspace_note(many)


# ------------------------------------------------------------------------------------- the spec


def test_episode_mode_needs_gf2envs_tool_mode_and_is_in_the_key(server):
    with pytest.raises(GF2ConfigError, match="needs tool mode"):
        LLMSpec(model="m", backend="vllm", base_urls=("http://x",), workspace="episode")
    with pytest.raises(GF2ConfigError, match="needs tool mode"):
        replace(spec(server), tool_protocol="paper")
    with pytest.raises(GF2ConfigError, match="workspace='shared' is not one of"):
        replace(spec(server), workspace="shared")
    assert spec(server).mode["workspace"] == "workspace-v1"
    assert "workspace" not in replace(spec(server), workspace="fresh").mode  # earlier keys stay valid


def test_records_that_are_not_steps_of_one_instance_are_refused(server, tmp_path):
    config = TaskConfig(p=6, d=3, K=16, n=4)
    lone = [[generate_record(config, g, t, seed=0) for g in range(4)] for t in range(2)]  # a grid's records
    agent = LLMAgent(spec(server), QueryLog(tmp_path / "q.jsonl"))
    with pytest.raises(GF2ConfigError, match="--episodes"):
        evaluate([agent], episode_cells(lone), progress=False)
    with pytest.raises(GF2ConfigError, match="prepare"):
        agent.answer(episode_cells([walk(1)])[0])


# ------------------------------------------------------------------------------- end to end


@needs_bwrap
def test_a_tool_built_at_the_first_step_is_imported_at_the_later_ones(server, tmp_path):
    episodes = [walk(seed) for seed in (11, 12, 13)]
    log = QueryLog(tmp_path / "q.jsonl")
    evaluation = evaluate([LLMAgent(spec(server), log)], episode_cells(episodes), progress=False)
    assert len(evaluation.rows) == 12 and all(row["correct"] for row in evaluation.rows)
    lines = log.lines()
    assert {line["episode_id"] for line in lines} == {line["episode_id"] for line in lines[:3]}
    for line in lines:
        first = line["episode_step"] == 0
        assert line["workspace"] == "episode" and line["tool_calls"] == 1
        assert line["reused"] is not first and line["tools_before"] == ([] if first else ["tools.solve"])
        assert line["tools_after"] == ["tools.solve"] and line["new_lines"] == (5 if first else 0)
        assert line["turns"][0]["sandbox"]["stop_reason"] == "exited"
    rows = reuse_table(lines)
    assert [(r["g"], r["reuse_rate"], r["gamma"]) for r in rows] == [(0, 0.0, 1.0)] + [
        (g, 1.0, 1.0) for g in (1, 2, 3)
    ]
    assert episode_table(lines) == [
        {"agent": "builder", "episodes": 3, "with_tool": 3, "first_tool_g": 0.0, "gamma_before": 1.0,
         "steps_before": 3, "gamma_after": 1.0, "steps_after": 9}
    ]  # fmt: skip


@needs_bwrap
def test_a_partial_episode_is_asked_again_from_its_first_step(server, tmp_path):
    episodes = [walk(seed) for seed in (21, 22)]
    path = tmp_path / "q.jsonl"
    evaluate([LLMAgent(spec(server), QueryLog(path))], episode_cells(episodes), progress=False)
    lines = path.read_text().splitlines()
    assert len(lines) == 8
    drop = next(i for i, line in enumerate(lines) if '"episode_step":2' in line)
    path.write_text("\n".join(lines[:drop] + lines[drop + 1 :]) + "\n")  # a step lost (a killed run)
    again = LLMAgent(spec(server), QueryLog(path))
    evaluation = evaluate([again], episode_cells(episodes), progress=False)
    assert len(evaluation.rows) == 8
    assert (again.stats.asked, again.stats.skipped) == (4, 4)  # the broken episode, whole; the other kept


@needs_bwrap
def test_no_episode_sees_another_episodes_files(server, tmp_path):
    """Episodes one at a time on one worker: each first step finds an empty workspace, although the
    episode before it left ``tools.py`` and a hostile file behind on that worker."""
    chains = chain_episodes(
        [p for cell in episode_cells([walk(s) for s in (31, 32, 33)]) for p in LLMAgent(
            spec(server), QueryLog(tmp_path / "q.jsonl"))._plan_steps(cell)]
    )  # fmt: skip
    sandbox = Sandbox(workers=1)
    seen: list[dict] = []
    from gf2env.agents.llm.openai_server import OpenAICompatibleBackend

    backend = OpenAICompatibleBackend((f"{server.url}/tool-builder",), "builder", 4, 30.0, 0)
    protocol = tool_protocol("gf2env")
    poison = textwrap.dedent(
        """
        import os
        open("json.py", "w").write("raise SystemExit('shadowed')\\n")
        os.mkfifo("pipe")
        """
    )

    def on_step(episode, fields):
        seen.append(fields)
        if fields["episode_step"] == 3:  # the episode's last step plants more before the workspace closes
            assert episode.workspace.run(poison).ok

    with sandbox:
        run_episodes(backend, chains, spec(server).sampling, sandbox, protocol, 2, on_step, parallel=1)
        assert sandbox.workers_started == 1
    assert [f["tools_before"] for f in seen if f["episode_step"] == 0] == [[], [], []]
    assert all(f["reused"] for f in seen if f["episode_step"] > 0)


def gf2(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gf2env", *args], capture_output=True, text=True, timeout=600
    )


@needs_bwrap
def test_gf2_eval_runs_episode_mode_on_a_grid_and_on_a_file_of_episodes(server, tmp_path):
    ask = ["eval", "--agent", "vllm", "--base-url", f"{server.url}/tool-builder", "--model", "builder",
           "--tools", "--max-revisions", "2", "--quiet"]  # fmt: skip
    setting = ["--p", "6", "--d", "3", "--K", "16", "--depths", "0,1,2", "--trials", "2"]
    done = gf2(*ask, "--workspace", "episode", "--episodes", *setting, "--out", str(tmp_path / "grid"))
    assert done.returncode == 0, done.stderr
    assert "by mode and depth" in done.stdout and "tools built in episodes" in done.stdout
    assert "builder (episode)" in done.stdout  # its own row of the tool-use breakdown
    assert "the paper's table" not in done.stdout  # episode steps are not the paper's protocol
    table = (tmp_path / "grid" / "reuse.csv").read_text().splitlines()
    assert table[0].startswith("agent,mode,g,queries,gamma,gamma_lo,gamma_hi,reuse_rate,tool_share")
    assert [line.split(",")[7] for line in table[1:]] == ["0.0", "1.0", "1.0"]  # reuse rate by depth
    rows = read_results_csv(tmp_path / "grid" / "results.csv")
    assert len(rows) == 6 and all(row["correct"] for row in rows)
    lines = QueryLog(tmp_path / "grid" / "queries.jsonl").lines()
    assert sorted((line["episode_step"], line["reused"]) for line in lines) == [
        (0, False), (0, False), (1, True), (1, True), (2, True), (2, True)
    ]  # fmt: skip

    made = gf2("generate", "--episodes", "--p", "6", "--d", "3", "--K", "16", "--depths", "0,1,2",
               "--trials", "2", "--out", str(tmp_path / "episodes.json"))  # fmt: skip
    assert made.returncode == 0, made.stderr
    again = gf2(*ask, "--workspace", "episode", "--records", str(tmp_path / "episodes.json"),
                "--out", str(tmp_path / "file"))  # fmt: skip
    assert again.returncode == 0, again.stderr
    steps = QueryLog(tmp_path / "file" / "queries.jsonl").lines()
    assert len({line["episode_id"] for line in steps}) == 2
    assert sum(line["reused"] for line in steps) == 4

    lone = gf2(*ask, "--workspace", "episode", *setting, "--out", str(tmp_path / "lone"))
    assert lone.returncode == 2 and "--episodes" in lone.stderr  # a grid's depths are not one instance


@needs_bwrap
def test_the_tables_tell_two_agents_of_one_model_apart(server, tmp_path):
    log = QueryLog(tmp_path / "q.jsonl")
    base = spec(server)
    hot = replace(base, name="hot", sampling=replace(base.sampling, temperature=1.0))
    cold = replace(base, name="cold")
    evaluate([LLMAgent(hot, log), LLMAgent(cold, log)], episode_cells([walk(41)]), progress=False)
    lines = log.lines()
    assert {line["agent"] for line in lines} == {"hot", "cold"} and {line["model"] for line in lines} == {
        "builder"
    }
    assert sorted((r["agent"], r["g"]) for r in reuse_table(lines)) == sorted(
        (name, g) for name in ("hot", "cold") for g in range(4)
    )
    assert [(r["agent"], r["episodes"]) for r in episode_table(lines)] == [("cold", 1), ("hot", 1)]
