"""Run by ``tests/agents/test_verifiers.py`` with the verifiers virtualenv's python (not a test file).

``score``: reads ``{"taskset": {...}, "replies": [...]}`` on stdin, loads ``gf2-recon`` through verifiers'
own loader, and scores each reply on every task with the task's own ``score`` (its rewards and metrics).
``tool``: reads ``{"taskset": {...}, "code": "..."}``, serves the first task's toolset as verifiers
registers it (an MCP server) and calls ``run_python`` through it. Prints one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import verifiers.v1 as vf
from verifiers.v1.state import state_cls
from verifiers.v1.trace import TraceTask
from verifiers.v1.utils.loaders import harness_class, taskset_class


def _env(taskset: dict[str, Any]) -> vf.Env:
    config = vf.resolve_env_config({"taskset": {"id": "gf2-recon", **taskset}})
    return vf.load_environment(config)


def _trace(task: vf.Task, reply: str) -> vf.Trace:
    trace = vf.Trace(
        task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        state=state_cls(type(task))(),
        agent=vf.AgentInfo(config=vf.AgentConfig(), name="probe", trainable=False),
    )
    prompt = list(task.data.prompt)
    for i, message in enumerate(prompt):
        trace.nodes.append(vf.MessageNode(parent=i - 1 if i else None, message=message))
    trace.nodes.append(
        vf.MessageNode(parent=len(prompt) - 1, message=vf.AssistantMessage(content=reply), sampled=True)
    )
    return trace


async def score(job: dict[str, Any]) -> dict[str, Any]:
    env = _env(job["taskset"])
    harness = env.config.agent_harnesses()["agent"]
    out: dict[str, Any] = {
        "env": type(env).__name__,
        "taskset": f"{type(env.taskset).__module__}.{type(env.taskset).__name__}",
        "taskset_class": taskset_class("gf2-recon").__name__,
        "harness": [harness.id, harness_class(harness.id).__name__],
        "tasks": [],
    }
    for task in env.taskset:
        rows = []
        for reply in job["replies"][task.data.id]:
            trace = _trace(task, reply)
            await task.score(trace)
            reward = trace.rewards["correct"]
            rows.append({"reward": reward.score, "weight": reward.weight, "metrics": trace.metrics})
        data = task.data.model_dump(mode="json", exclude_none=True)
        out["tasks"].append({**data, "scores": rows, "toolsets": len(task.toolsets(task.config))})
    return out


async def tool(job: dict[str, Any]) -> dict[str, Any]:
    from mcp.server.mcpserver import MCPServer

    env = _env({**job["taskset"], "tools": True})
    task = next(iter(env.taskset))
    (toolset,) = task.toolsets(task.config)
    await toolset.setup()
    await toolset.setup_task(task.data)  # what verifiers' tool server is handed
    server = MCPServer("gf2")
    toolset.register(server)
    tools = await server.list_tools()
    results = []
    for code in job["code"]:
        result = await server.call_tool("run_python", {"code": code})
        results.append([getattr(part, "text", "") for part in result.content])
    return {
        "tools": [t.name for t in tools],
        "schema": [t.input_schema for t in tools],
        "layers": list(toolset.sandbox.layers),
        "results": results,
        "prompt": [m.model_dump() for m in task.data.prompt],
        "data": task.data.model_dump(mode="json", exclude_none=True),
    }


if __name__ == "__main__":
    command, job = sys.argv[1], json.load(sys.stdin)
    print(json.dumps(asyncio.run({"score": score, "tool": tool}[command](job))))
