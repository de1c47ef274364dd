"""The OpenEnv server over real HTTP/WebSocket on 127.0.0.1: each server a real subprocess
(``python -m gf2env.integrations.openenv``), health-checked, stopped by its PID.

(a) A seeded episode through the server is the in-process ``gym.make`` episode (observations, rewards,
terminated/truncated, info), for the array and the text env, v0 and v1; several concurrent sessions
each play their own. (b) Bad actions and reset fields get OpenEnv's typed error frame, the client
raises the env's own exception, and the session goes on unharmed. (c) A client killed mid-episode
frees its session: a new client plays a whole episode on a one-session server.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import gf2env  # noqa: F401  (registers the ids)
from gf2env.errors import EnvServerError, GF2ConfigError, InvalidActionError
from gf2env.task.combinatorics import rank_support
from tests.extras import require_extra
from tests.paths import REPO
from tests.servers import Server, free_port, launch

KWARGS = {"p": 8, "d": 3, "n": 6, "K": 16}  # C(8, 2) = 28 candidates, 6 steps an episode
ARGS = [f"{k}={v}" for k, v in KWARGS.items()]
ARRAY_IDS = ("GF2Recon-v0", "GF2Recon-v1")
TEXT_IDS = ("GF2ReconText-v0", "GF2ReconText-v1")
# seed, start depth: a seeded episode, the stream's next one (no seed), one from depth 2
EPISODES: list[dict[str, Any]] = [{"seed": 5}, {}, {"seed": 7, "start_depth": 2}]


@pytest.fixture(scope="module")
def oe() -> ModuleType:
    require_extra("openenv.core", "openenv")
    import gf2env.integrations.openenv as oe

    return oe


def start_server(env_id: str, *extra: str) -> Server:
    port = free_port()
    argv = [sys.executable, "-m", "gf2env.integrations.openenv", "--env", env_id, "--port", str(port), *extra]
    return launch(
        f"openenv-{env_id}", argv, f"http://127.0.0.1:{port}", env_id, "/health", timeout=120, env={}
    )


@pytest.fixture(scope="module")
def servers(oe: ModuleType):
    """One server per env id, started together (each import of OpenEnv takes seconds)."""
    ids = ARRAY_IDS + TEXT_IDS
    with ThreadPoolExecutor(len(ids)) as pool:
        started = dict(zip(ids, pool.map(lambda i: start_server(i, *ARGS), ids), strict=True))
    yield started
    for server in started.values():
        server.stop()


def client_for(oe: ModuleType, env_id: str, base_url: str) -> Any:
    cls = oe.GF2ReconTextClient if env_id in TEXT_IDS else oe.GF2ReconClient
    return cls(base_url=base_url)


# ----------------------------------------------------------------- in-process reference episodes
def reset_local(env: gym.Env, episode: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    options = {"start_depth": episode["start_depth"]} if "start_depth" in episode else None
    return env.reset(seed=episode.get("seed"), options=options)


def play_local(env: gym.Env, episode: dict[str, Any], text: bool) -> tuple[list[Any], list[tuple]]:
    """The in-process episode: the actions chosen (right, right as indices, wrong, in turn) and each
    step's (obs, reward, terminated, truncated, info), the reset first (reward None)."""
    obs, info = reset_local(env, episode)
    steps: list[tuple] = [(obs, None, False, False, info)]
    actions: list[Any] = []
    instance = env.unwrapped.instance
    terminated = False
    while not terminated:
        g = env.unwrapped.depth
        target = instance.term(g)
        wrong = tuple(sorted({*target[:-1], next(i for i in range(8) if i not in target)}))
        turn = len(actions) % 3
        if text:
            offset = steps[-1][4]["answer_offset"]
            right = "\\boxed{[" + ", ".join(str(i + offset) for i in target) + "]}"
            wrong_text = "I think \\boxed{[" + ", ".join(str(i + offset) for i in wrong) + "]}"
            actions.append([right, wrong_text, "no idea"][turn])
        else:
            actions.append([rank_support(target, 8), list(target), rank_support(wrong, 8)][turn])
        obs, reward, terminated, truncated, info = env.step(actions[-1])
        steps.append((obs, float(reward), terminated, truncated, info))
    return actions, steps


def assert_same_step(oe: ModuleType, result: Any, local: tuple, text: bool) -> None:
    obs, reward, terminated, truncated, info = local
    got = result.observation
    assert result.reward == reward and got.reward == reward
    assert (got.terminated, got.truncated) == (terminated, truncated)
    assert result.done == got.done == (terminated or truncated)
    assert got.info == oe.models.jsonable(info)
    if text:
        assert got.prompt == obs
        return
    arrays = got.arrays()
    assert arrays.keys() == obs.keys()
    for key, value in obs.items():
        assert arrays[key].dtype == np.asarray(value).dtype, key
        np.testing.assert_array_equal(arrays[key], value, err_msg=key)


def action_model(oe: ModuleType, action: Any, text: bool) -> Any:
    return oe.GF2ReconTextAction(response=action) if text else oe.GF2ReconAction(action=action)


# ----------------------------------------------------------------- (a) the same episodes
@pytest.mark.parametrize("env_id", ARRAY_IDS + TEXT_IDS)
def test_served_episodes_equal_in_process(oe, servers, env_id):
    text = env_id in TEXT_IDS
    local = gym.make(env_id, **KWARGS)
    rewards: list[float] = []
    with client_for(oe, env_id, servers[env_id].base_url).sync() as remote:
        for episode in EPISODES:
            actions, steps = play_local(local, episode, text)
            assert_same_step(oe, remote.reset(**episode), steps[0], text)
            for action, step in zip(actions, steps[1:], strict=True):
                assert_same_step(oe, remote.step(action_model(oe, action, text)), step, text)
            rewards += [s[1] for s in steps[1:]]
            state = remote.state()
            assert (state.env_id, state.seed, state.step_count, state.done) == (
                env_id,
                episode.get("seed"),
                len(actions),
                True,
            )
            assert state.env_kwargs == KWARGS
    assert 1.0 in rewards and 0.0 in rewards  # both kinds of step were played


def test_concurrent_sessions_each_play_their_own_episode(oe, servers):
    """Three sessions on one server, their steps interleaved, each equal to its in-process episode."""
    env_id = "GF2Recon-v1"
    seeds = [11, 12, 13]
    plans = [play_local(gym.make(env_id, **KWARGS), {"seed": s}, text=False) for s in seeds]

    async def play(seed: int, actions: list[Any], steps: list[tuple]) -> None:
        async with oe.GF2ReconClient(base_url=servers[env_id].base_url) as env:
            assert_same_step(oe, await env.reset(seed=seed), steps[0], False)
            for action, step in zip(actions, steps[1:], strict=True):
                await asyncio.sleep(0)  # let the other sessions in between steps
                assert_same_step(oe, await env.step(oe.GF2ReconAction(action=action)), step, False)

    async def main() -> None:
        await asyncio.gather(*(play(s, *plan) for s, plan in zip(seeds, plans, strict=True)))

    asyncio.run(main())


# ----------------------------------------------------------------- (b) bad actions
ARRAY_BAD = [
    ({"action": "3"}, InvalidActionError, "valid integer"),  # wrong type
    ({"action": 3.0}, InvalidActionError, "valid integer"),
    ({"action": True}, InvalidActionError, "valid integer"),
    ({"action": None}, InvalidActionError, "action"),
    ({"action": [[0, 1]]}, InvalidActionError, "valid integer"),  # wrong shape
    ({"action": [0, 1, 2]}, InvalidActionError, "2"),  # d - 1 = 2 indices
    ({"action": [0, 8]}, InvalidActionError, "8"),  # index out of range
    ({"action": [1, 1]}, InvalidActionError, "1"),  # not distinct
    ({"action": 28}, InvalidActionError, "outside Discrete(28)"),  # rank out of range
    ({"action": -1}, InvalidActionError, "outside Discrete(28)"),
    ({"action": 3, "support": [0, 1]}, InvalidActionError, "support: Extra inputs are not permitted"),
    ({}, InvalidActionError, "action: Field required"),
]
TEXT_BAD = [
    ({"response": 3}, InvalidActionError, "valid string"),
    ({"response": None}, InvalidActionError, "valid string"),
    ({"response": ["\\boxed{[9, 10]}"]}, InvalidActionError, "valid string"),
    ({"text": "\\boxed{[9, 10]}"}, InvalidActionError, "text: Extra inputs are not permitted"),
]
RESET_BAD = [
    ({"seed": -1}, "seed=-1"),
    ({"seed": "5"}, "seed='5'"),
    ({"seed": 1, "options": {}}, "['options'] are unknown"),
    ({"seed": 1, "start_depth": 6}, "start_depth=6 is outside"),
]


@pytest.mark.parametrize("env_id", ["GF2Recon-v1", "GF2ReconText-v1"])
def test_bad_actions_get_typed_errors_and_the_session_goes_on(oe, servers, env_id):
    text = env_id in TEXT_IDS
    local = gym.make(env_id, **KWARGS)
    actions, steps = play_local(local, {"seed": 3}, text)
    with client_for(oe, env_id, servers[env_id].base_url).sync() as remote:
        with pytest.raises(EnvServerError, match="reset") as err:  # a step before any reset
            remote.step(action_model(oe, actions[0], text))
        assert err.value.code == "EXECUTION_ERROR"
        for fields, match in RESET_BAD:
            with pytest.raises(GF2ConfigError, match=re.escape(match)):
                remote.reset(**fields)
        assert_same_step(oe, remote.reset(seed=3), steps[0], text)
        for i, (action, step) in enumerate(zip(actions, steps[1:], strict=True)):
            if i == 1:  # mid-episode: every bad action, none of which moves the episode
                for payload, exc, match in TEXT_BAD if text else ARRAY_BAD:
                    with pytest.raises(exc, match=re.escape(match)):
                        remote.step(payload)
                with pytest.raises(InvalidActionError, match="takes a"):  # the other env's action model
                    remote.step(oe.GF2ReconAction(action=0) if text else oe.GF2ReconTextAction(response="0"))
                assert remote.state().step_count == 1
            assert_same_step(oe, remote.step(action_model(oe, action, text)), step, text)
        with pytest.raises(EnvServerError, match="finished") as err:  # a step after the end
            remote.step(action_model(oe, actions[0], text))
        assert err.value.code == "EXECUTION_ERROR"
    assert urllib.request.urlopen(servers[env_id].base_url + "/health", timeout=5).status == 200


def test_error_frames_on_the_wire(oe, servers):
    """What any OpenEnv client sees: a JSON error frame with OpenEnv's code, the session still open."""
    from websockets.sync.client import connect

    base = servers["GF2Recon-v1"].base_url
    with connect(base.replace("http://", "ws://") + "/ws") as ws:

        def ask(message: dict[str, Any]) -> dict[str, Any]:
            ws.send(json.dumps(message))
            return json.loads(ws.recv(timeout=30))

        assert ask({"type": "reset", "data": {"seed": 1}})["type"] == "observation"
        frame = ask({"type": "step", "data": {"action": "3"}})
        assert frame["type"] == "error" and frame["data"]["code"] == "VALIDATION_ERROR"
        assert frame["data"]["errors"][0]["loc"][0] == "action"
        frame = ask({"type": "step", "data": {"action": 99}})
        assert frame["data"]["code"] == "EXECUTION_ERROR"
        assert frame["data"]["message"].startswith("InvalidActionError: Action 99 is outside Discrete(28)")
        frame = ask({"type": "step", "data": {"action": 0}})
        assert frame["type"] == "observation" and frame["data"]["observation"]["info"]["depth"] == 0
    # OpenEnv's stateless HTTP step validates the action the same way (422), and the server is up.
    request = urllib.request.Request(
        base + "/step",
        data=json.dumps({"action": {"action": "3"}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=10)
    assert err.value.code == 422
    assert urllib.request.urlopen(base + "/health", timeout=5).status == 200
    with urllib.request.urlopen(base + "/schema", timeout=10) as resp:  # the models' JSON Schemas
        schema = json.load(resp)
    assert schema["action"]["properties"]["action"]["anyOf"][0] == {"type": "integer"}
    fields = schema["observation"]["properties"].keys()
    assert {"prefix", "labels", "terminated", "truncated", "info"} <= fields


# ----------------------------------------------------------------- (c) a client that vanishes
CLIENT_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from gf2env.integrations.openenv import GF2ReconAction, GF2ReconClient
    env = GF2ReconClient(base_url=sys.argv[1]).sync()
    env.connect()
    env.reset(seed=1)
    env.step(GF2ReconAction(action=0))
    env.step(GF2ReconAction(action=[0, 1]))
    print("mid-episode", flush=True)
    time.sleep(300)
    """
)


def test_server_survives_a_client_killed_mid_episode(oe):
    env_id = "GF2Recon-v1"
    server = start_server(env_id, "--max-sessions", "1", *ARGS)
    try:
        assert f"serving {env_id} {KWARGS} at {server.base_url}" in server.log_tail()
        child = subprocess.Popen(
            [sys.executable, "-c", CLIENT_SCRIPT, server.base_url],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "mid-episode"
            with oe.GF2ReconClient(base_url=server.base_url).sync() as other:  # one session: full
                with pytest.raises(EnvServerError, match="capacity") as err:
                    other.reset(seed=1)
                assert err.value.code == "CAPACITY_REACHED"
        finally:
            os.kill(child.pid, signal.SIGKILL)  # no close frame: the socket just drops
            child.wait(timeout=30)
        actions, steps = play_local(gym.make(env_id, **KWARGS), {"seed": 2}, text=False)
        deadline = time.monotonic() + 30
        while True:  # the server frees the dead session as soon as it sees the socket gone
            env = oe.GF2ReconClient(base_url=server.base_url).sync()
            try:
                first = env.reset(seed=2)
                break
            except EnvServerError as err:
                env.close()
                assert err.code == "CAPACITY_REACHED" and time.monotonic() < deadline
                time.sleep(0.2)
        with env:
            assert_same_step(oe, first, steps[0], False)
            for action, step in zip(actions, steps[1:], strict=True):
                assert_same_step(oe, env.step(oe.GF2ReconAction(action=action)), step, False)
        assert server.alive()
    finally:
        server.stop()


def test_without_openenv_the_import_names_the_extra():
    hide = "import sys; sys.modules['openenv'] = None; import gf2env.integrations.openenv"
    run = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "MissingExtraError" in run.stderr and "pip install -e '.[openenv]'" in run.stderr


# ----------------------------------------------------------------- the command line
@pytest.mark.parametrize(
    "words, message",
    [
        (["p=abc"], "p='abc'"),
        (["q=3"], "unexpected keyword argument 'q'"),
        (["p=8", "p=9"], "p is given twice"),
        (["p"], "not key=value"),
        (["--max-sessions", "0"], "max_sessions=0"),
    ],
)
def test_command_line_rejects_bad_env_arguments(oe, capsys, words, message):
    from gf2env.integrations.openenv.__main__ import main

    with pytest.raises(SystemExit) as exit_:  # before any server starts
        main(["--env", "GF2Recon-v1", "--port", str(free_port()), *words])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


# ----------------------------------------------------------------- TRL drives a server
TRL_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_chat_template
    from gf2env.integrations.openenv.trl_tools import GF2ReconTextTools

    model_dir, base_url, out = sys.argv[1:4]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.chat_template = qwen3_chat_template  # a template TRL parses tool calls from
    rows = [{"prompt": [{"role": "user", "content": "Find the next term."}], "seed": s} for s in (21, 22)]
    args = GRPOConfig(
        output_dir=out, max_steps=1, per_device_train_batch_size=2, num_generations=2,
        max_completion_length=24, report_to="none", logging_steps=1, use_cpu=True, bf16=False, seed=0,
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        environment_factory=lambda: GF2ReconTextTools(base_url),
    )
    trainer.train()
    states = [env._client.state().model_dump() for env in trainer.environments]
    logged = [row for row in trainer.state.log_history if "rewards/GF2ReconTextTools/mean" in row]
    print("RESULT " + json.dumps({"states": states, "logged": logged}))
    """
)


def test_trl_grpo_trains_against_a_served_text_env(oe, tmp_path):
    """TRL's GRPOTrainer with ``environment_factory``: each rollout's env is a session on the server,
    reset with its row's seed; the env's reward is logged under its class name. The plumbing is the
    point, so the policy is the 1.3 MB tiny model (gf2env.train.tiny_lm), not a pretrained one."""
    require_extra("trl", "train")
    from gf2env.train.tiny_lm import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny")
    server = start_server("GF2ReconText-v1", "prompt_id=compact-v1", "p=6", "d=3", "n=3", "K=8")
    try:
        run = subprocess.run(
            [sys.executable, "-c", TRL_SCRIPT, str(model), server.base_url, str(tmp_path / "out")],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "PYTHONPATH": str(REPO), "TRL_EXPERIMENTAL_SILENCE": "1"},
        )
        assert run.returncode == 0, run.stderr[-4000:]
        result = json.loads(run.stdout.split("RESULT ", 1)[1])
        assert server.alive()
    finally:
        server.stop()
    assert len(result["states"]) == 2  # one instance, one server session, per rollout
    for state in result["states"]:
        assert state["env_id"] == "GF2ReconText-v1" and state["seed"] in (21, 22) and state["episode_id"]
        assert state["env_kwargs"]["prompt_id"] == "compact-v1"
    assert len(result["logged"]) == 1
