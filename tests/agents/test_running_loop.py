"""The blocking public APIs that run an event loop work where one already runs (a Jupyter cell):
``run_sync`` itself, and an LLM agent evaluated from inside ``asyncio.run`` on a served model (answer
mode and tool mode) and on a local transformers model."""

from __future__ import annotations

import asyncio
import importlib.util
import threading

import pytest

pytest.importorskip("httpx")

from gf2env.agents.harness.evaluate import evaluate, make_agents  # noqa: E402
from gf2env.agents.harness.grid import Grid, grid_cells  # noqa: E402
from gf2env.agents.llm.agent import LLMAgent, LLMSpec  # noqa: E402
from gf2env.agents.llm.queries import SamplingParams  # noqa: E402
from gf2env.agents.llm.query_log import QueryLog  # noqa: E402
from gf2env.agents.sandbox import detect_isolation  # noqa: E402
from gf2env.event_loop import loop_running, run_sync  # noqa: E402

GRID = Grid(depths=(0, 2), trials=2, p=(6,), d=(3,), K=(4,), seed=1)


async def where_it_ran(value: int) -> tuple[int, str]:
    await asyncio.sleep(0)
    return value, threading.current_thread().name


async def fails() -> None:
    await asyncio.sleep(0)
    raise KeyError("inside")


def test_run_sync_runs_here_without_a_loop_and_on_a_thread_of_its_own_inside_one():
    assert not loop_running()
    here = threading.current_thread().name
    assert run_sync(where_it_ran(1)) == (1, here)

    async def cell() -> tuple[int, str]:
        assert loop_running()
        return run_sync(where_it_ran(2))

    value, thread = asyncio.run(cell())
    assert value == 2 and thread != here
    with pytest.raises(KeyError, match="inside"):
        asyncio.run(raises_in_a_cell())


async def raises_in_a_cell() -> None:
    run_sync(fails())


def evaluate_in_a_running_loop(
    spec: LLMSpec, log: QueryLog, grid: Grid = GRID
) -> tuple[list[dict], LLMAgent]:
    """``evaluate`` of ``spec`` called from a coroutine, as a notebook cell calls it."""
    (agent,) = make_agents([spec], log)
    assert isinstance(agent, LLMAgent)

    async def cell() -> list[dict]:
        return evaluate([agent], grid_cells(grid), seed=grid.seed, progress=False).rows

    return asyncio.run(cell()), agent


def test_a_served_model_is_evaluated_inside_a_running_loop(server, tmp_path):
    spec = LLMSpec(model="tiny", backend="openai", base_urls=(f"{server.url}/ok",), samples=2, retries=0)
    rows, agent = evaluate_in_a_running_loop(spec, QueryLog(tmp_path / "q.jsonl"))
    assert len(rows) == GRID.num_records and agent.stats.asked == agent.stats.ok == 2 * GRID.num_records
    assert len(server.bodies) == 2 * GRID.num_records


@pytest.mark.skipif(not detect_isolation().get("bwrap"), reason="bubblewrap cannot run here")
def test_tool_mode_is_evaluated_inside_a_running_loop(server, tmp_path):
    grid = Grid(depths=(2,), trials=2, p=(8,), d=(3,), K=(24,), seed=0)
    url = f"{server.url}/solver"
    spec = LLMSpec(model="scripted", backend="vllm", base_urls=(url,), tools=True, retries=0)
    rows, agent = evaluate_in_a_running_loop(spec, QueryLog(tmp_path / "q.jsonl"), grid)
    assert [r["gamma"] for r in rows] == [1.0, 1.0]  # the solver's code ran, its answer was read
    assert agent.stats.ok == 2 and len(server.bodies) == 4  # a turn with code, a turn with the answer


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed")
def test_a_local_transformers_model_is_evaluated_inside_a_running_loop(tmp_path):
    from gf2env.train.tiny_lm import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny")
    params = SamplingParams(temperature=1.0, max_tokens=4)
    spec = LLMSpec(model=str(model), backend="transformers", sampling=params)
    rows, agent = evaluate_in_a_running_loop(spec, QueryLog(tmp_path / "q.jsonl"))
    assert len(rows) == GRID.num_records and agent.stats.asked == agent.stats.ok == GRID.num_records
