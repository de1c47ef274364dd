"""GF2ReconText-v1 with tool turns (``tools=SandboxTools(...)``), in the real sandbox: a tool built at
one depth is called at the next, the workspace lives exactly as long as the env's episode, a hostile
step poisons nothing later, and the final-answer precedence holds through the env.

The "model" is hand-written replies passed as the env's actions; the env, the sandbox, the workspace
and the scorer are ours, unmocked."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest

import gf2env  # noqa: F401  (registers the envs)
from gf2env.agents.llm.tools.session import SandboxTools, SandboxToolSession
from gf2env.agents.sandbox import DEFAULT_LIMITS, Sandbox
from gf2env.errors import GF2ConfigError
from tests.agents.sandbox_judge import CORPUS, HAVE_BWRAP, MODE_PARAMS, make_sandbox
from tests.agents.test_sandbox_workspace import servers

SETTING = {"p": 6, "d": 3, "K": 16, "step_mode": "reveal"}
BUILD = (
    "```python\nopen('tools.py', 'w').write('def parity(bits):\\n    return sum(bits) % 2\\n')\n"
    "print('built')\n```"
)
CALL = "Using my tool:\n```python\nimport tools\nprint('parity', tools.parity([1, 1, 1]))\n```"
LOOK = "```python\nimport os, json\nprint(sorted(os.listdir('.')), json.dumps(1))\n```"
EMPTY = "The workspace is empty."


class Recording:
    """The ToolTurns the env gets: SandboxTools's sessions, each kept to look at after the env is done."""

    def __init__(self, tools: SandboxTools) -> None:
        self.tools = tools
        self.opened: list[SandboxToolSession] = []

    def open(self) -> SandboxToolSession:
        self.opened.append(self.tools.open())
        return self.opened[-1]


def answer(env: Any, info: dict[str, Any]) -> str:
    """The correct boxed answer of the current step (the test knows the target; the code never does)."""
    inner = env.unwrapped
    indices = ", ".join(str(i + info["answer_offset"]) for i in inner.instance.term(inner.depth))
    return f"The next term is \\boxed{{[{indices}]}}"


def system(info: dict[str, Any]) -> str:
    return info["messages"][0]["content"]


OPEN: list[Any] = []  # the test's envs, closed after it even when it fails (their workers go back)


@pytest.fixture(autouse=True)
def close_envs() -> Iterator[None]:
    yield
    while OPEN:
        OPEN.pop().close()


def make_env(sandbox: Sandbox, n: int = 4, **tools: Any) -> tuple[Any, Recording]:
    recording = Recording(SandboxTools(sandbox, **tools))
    OPEN.append(gym.make("GF2ReconText-v1", tools=recording, n=n, **SETTING))
    return OPEN[-1], recording


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_a_tool_built_at_one_depth_is_called_at_the_next(mode: str) -> None:
    with make_sandbox(DEFAULT_LIMITS, mode, workers=1) as sandbox:
        env, _ = make_env(sandbox)
        obs, info = env.reset(seed=0)
        assert obs == info["messages"][-1]["content"] and EMPTY in system(info)
        obs, reward, terminated, _, info = env.step(BUILD)  # runs code: the step goes on
        assert (reward, terminated, info["depth"]) == (0.0, False, 0) and "built" in obs
        assert info["tool_turn"]["exit_code"] == 0 and info["tool_turn"]["turns_left"] == 10
        assert info["messages"][-1] == {"role": "user", "content": obs} and len(info["messages"]) == 4
        obs, reward, terminated, _, info = env.step(answer(env, info))  # the final reply is graded
        assert reward == 1.0 and info["score"]["correct"] and env.unwrapped.depth == 1
        assert info["tool"]["tool_calls"] == 1 and info["tool"]["answer_source"] == "reply"
        assert info["reuse"]["reused"] is False and info["reuse"]["tools_after"] == ["tools.parity"]
        # depth 1: told what the workspace holds; the observation is the step's first user message
        assert "`tools.py` (" in system(info) and "defines parity" in system(info)
        assert info["messages"][-1] == {"role": "user", "content": obs} and len(info["messages"]) == 2
        obs, *_ = env.step("```python\nprint('answer hidden:', 'target' not in record, g)\n```")
        assert "answer hidden: True 1" in obs  # the workspace's code sees the public view only
        obs, reward, terminated, _, info = env.step(CALL)
        assert "parity 1" in obs and reward == 0.0 and info["depth"] == env.unwrapped.depth == 1
        *_, info = env.step(answer(env, info))
        assert info["reuse"]["reused"] is True and info["reuse"]["reused_names"] == ["tools", "tools.parity"]
        assert info["reuse"]["new_lines"] == 3 and info["tool"]["sandbox_s"] > 0
        history = env.get_wrapper_attr("history")
        assert [turn["depth"] for turn in history] == [0, 1] and history[1]["reuse"]["reused"]
        env.close()


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_the_workspace_lives_as_long_as_the_episode(mode: str) -> None:
    with make_sandbox(DEFAULT_LIMITS, mode, workers=1) as sandbox:
        env, recording = make_env(sandbox, n=2)
        _, info = env.reset(seed=1)
        env.step(BUILD)
        _, _, terminated, _, info = env.step(answer(env, info))
        assert not terminated and "defines parity" in system(info)
        *_, terminated, _, info = env.step(answer(env, info))
        assert terminated and info["messages"] == []
        first = recording.opened[0]
        assert first.closed and first.workspace is not None and first.workspace.closed  # at the end
        _, info = env.reset(seed=2)  # a new episode: an empty workspace
        assert EMPTY in system(info)
        obs, *_ = env.step(LOOK)
        assert "[] 1" in obs
        env.step(BUILD)
        _, info = env.reset(seed=3)  # a reset mid-episode ends it too
        assert recording.opened[1].workspace.closed and EMPTY in system(info)  # type: ignore[union-attr]
        obs, *_ = env.step(LOOK)
        assert "[] 1" in obs
        env.close()  # gives the worker back
        assert recording.opened[2].closed and recording.opened[2].workspace.closed  # type: ignore[union-attr]
        assert sandbox.workers_started == 1 and sandbox.workers_retired == 0  # one worker, reused clean
        with sandbox.workspace() as later:
            assert later.run("print(1)").stdout == "1\n" and sandbox.workers_started == 1


def corpus_code(name: str) -> str:
    return (CORPUS / name).read_text().replace("@HOST_PID@", str(os.getpid()))


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_a_hostile_episode_does_not_poison_the_next(mode: str) -> None:
    poison = (
        "open('tools.py', 'w').write('def parity(bits):\\n    return \"POISONED\"\\n')\n"
        "open('json.py', 'w').write('raise SystemExit(\"shadowed\")\\n')\n"
        "import os\nos.mkfifo('pipe')\nprint('planted')\n"
    )
    hostile = ["fork_storm.py", "file_too_big.py"] + (["kill_parent.py"] if mode == "bwrap" else [])
    with make_sandbox(DEFAULT_LIMITS, mode, workers=1) as sandbox:
        env, _ = make_env(sandbox)
        env.reset(seed=4)
        obs, *_ = env.step(f"```python\n{poison}```")
        assert "planted" in obs
        seen = {}
        for name in hostile:
            obs, reward, terminated, _, info = env.step(f"```python\n{corpus_code(name)}```")
            seen[name] = info["tool_turn"]["stop_reason"]
            assert reward == 0.0 and not terminated and info["depth"] == 0
        expected = {"fork_storm.py": "exited", "file_too_big.py": "error", "kill_parent.py": "exited"}
        assert seen == {name: expected[name] for name in hostile}
        assert ("refused 5" if mode == "bwrap" else "File too large") in obs
        _, info = env.reset(seed=5)
        assert EMPTY in system(info)
        obs, *_ = env.step(LOOK)
        assert "[] 1" in obs and "shadowed" not in obs
        obs, *_ = env.step(CALL)
        assert "No module named 'tools'" in obs and "POISONED" not in obs
        env.close()


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_fresh_mode_keeps_no_files_and_says_nothing_of_them(mode: str) -> None:
    with make_sandbox(DEFAULT_LIMITS, mode, workers=1) as sandbox:
        env, recording = make_env(sandbox, workspace="fresh")
        _, info = env.reset(seed=6)
        assert "stay there" not in system(info) and recording.opened[0].workspace is None
        obs, *_ = env.step(BUILD)
        assert "built" in obs
        obs, *_ = env.step(CALL)  # the next run of the same step: the file is gone
        assert "No module named 'tools'" in obs
        *_, info = env.step(answer(env, info))
        assert info["reuse"]["reused"] is False and info["tool"]["workspace"] == "fresh"
        obs, *_ = env.step(LOOK)
        assert "[] 1" in obs
        env.close()


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_the_final_answer_can_come_from_the_sandbox(mode: str) -> None:
    with make_sandbox(DEFAULT_LIMITS, mode, workers=1) as sandbox:
        env, _ = make_env(sandbox, max_revisions=1)
        _, info = env.reset(seed=7)
        box = answer(env, info).split("is ")[1]
        obs, reward, _, _, info = env.step(f"```python\nprint({box!r})\n```")
        assert reward == 0.0 and info["tool_turn"]["turns_left"] == 1 and box in obs
        _, reward, _, _, info = env.step("I have printed it.")  # no answer, the budget spent: the stdout
        assert reward == 1.0 and info["tool"]["answer_source"] == "sandbox" and env.unwrapped.depth == 1
        assert env.get_wrapper_attr("history")[0]["graded"] == f"{box}\n"
        obs, reward, _, _, info = env.step("Let me think.")  # no code, no answer, turns left: asked again
        assert reward == 0.0 and env.unwrapped.depth == 1 and "no code and no answer" in obs
        *_, info = env.step("Still thinking.")  # the budget is spent: the last reply, no answer
        assert info["score"]["failure"] == "no_answer" and info["tool"]["outcome"] == "no_answer"
        env.close()


def test_the_paper_protocol_without_a_workspace_and_bad_arguments() -> None:
    with make_sandbox(DEFAULT_LIMITS, "bwrap" if HAVE_BWRAP else "unsafe", workers=1) as sandbox:
        with pytest.raises(GF2ConfigError, match="paper.*no workspace"):
            SandboxTools(sandbox, protocol="paper")
        with pytest.raises(GF2ConfigError, match="workspace='nope'"):
            SandboxTools(sandbox, workspace="nope")
        with pytest.raises(GF2ConfigError, match="max_revisions"):
            SandboxTools(sandbox, max_revisions=-1)
        with pytest.raises(GF2ConfigError, match="has no open"):
            gym.make("GF2ReconText-v1", tools=object(), n=2)
        env, _ = make_env(sandbox, workspace="fresh", protocol="paper")
        obs, info = env.reset(seed=8)
        assert "RECORD" in obs and obs == info["messages"][-1]["content"]
        assert "\u2014" in obs and env.observation_space.contains(obs)  # the paper's own text is not ASCII
        obs, reward, _, _, info = env.step("```python\nprint(RECORD['g'], 'target' in RECORD)\n```")
        assert "0 False" in obs and reward == 0.0
        *_, info = env.step("No box here.")  # the paper's protocol: a reply without code is final
        assert info["score"]["failure"] == "no_answer" and env.unwrapped.depth == 1
        env.close()


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_a_workspace_too_big_to_list_is_said_so_and_still_ends_with_the_episode(mode: str) -> None:
    flood = "for i in range(1500):\n    open(f'{i:040d}', 'w').close()\n"
    with make_sandbox(DEFAULT_LIMITS, mode, workers=1) as sandbox:
        env, _ = make_env(sandbox)
        _, info = env.reset(seed=9)
        env.step(BUILD)
        env.step(f"```python\n{flood}print('flooded')\n```")
        *_, info = env.step(answer(env, info))  # the listing overflows the output cap: incomplete
        assert info["reuse"]["workspace_complete"] is False and info["reuse"]["tools_after"] == []
        assert "listing could not be read" in system(info)
        obs, *_ = env.step(CALL)  # the files are there all the same
        assert "parity 1" in obs
        _, info = env.reset(seed=10)
        assert EMPTY in system(info)
        obs, *_ = env.step("```python\nimport os\nprint(len(os.listdir('.')))\n```")
        assert "stdout:\n```\n0\n" in obs
        env.close()


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_a_worker_lost_mid_episode_is_counted_and_the_next_step_told_the_workspace_is_empty(
    mode: str,
) -> None:
    with make_sandbox(DEFAULT_LIMITS, mode, workers=1) as sandbox:
        env, _ = make_env(sandbox)
        _, info = env.reset(seed=11)
        env.step(BUILD)
        (server,) = servers()
        os.kill(server, signal.SIGKILL)
        while os.path.exists(f"/proc/{server}") and "Z" not in open(f"/proc/{server}/stat").read().split()[2]:
            time.sleep(0.01)
        obs, *_ = env.step(CALL)  # sent to the dead worker, run on a fresh one: the files went with it
        assert "No module named 'tools'" in obs
        *_, info = env.step(answer(env, info))
        assert info["tool"]["workspace_lost"] == 1 and info["reuse"]["tools_after"] == []
        assert EMPTY in system(info)
        env.close()
