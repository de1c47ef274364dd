"""Run a coroutine to its end from synchronous code, also where an event loop already runs (Jupyter).

``asyncio.run`` refuses to start inside a running loop ("cannot be called from a running event loop"),
which is where a notebook's cells run. :func:`run_sync` is ``asyncio.run`` outside a loop; inside one, it
runs the coroutine on a fresh loop in a worker thread and waits for it, so a blocking public API (e.g.
:meth:`gf2env.agents.llm.agent.LLMAgent.answer`) works the same in a script and in a notebook.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_running() -> bool:
    """Whether an event loop runs in this thread (in Jupyter, a cell's code runs inside one)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``coro``'s result (or its exception), run to the end on a loop of its own.

    Without a running loop in this thread: ``asyncio.run(coro)``. With one: ``asyncio.run`` in a worker
    thread, this thread waiting (the running loop is blocked meanwhile, as any blocking call blocks it).
    A ``KeyboardInterrupt`` while waiting cancels the coroutine, waits for it to unwind, and propagates.
    """
    if not loop_running():
        return asyncio.run(coro)
    outcome: dict[str, Any] = {}
    started = threading.Event()
    where: dict[str, Any] = {}

    async def wrapped() -> T:
        where["loop"], where["task"] = asyncio.get_running_loop(), asyncio.current_task()
        started.set()
        return await coro

    def work() -> None:
        try:
            outcome["value"] = asyncio.run(wrapped())
        except BaseException as err:  # handed to the waiting thread, which raises it
            outcome["error"] = err
        finally:
            started.set()

    thread = threading.Thread(target=work, name="gf2env-run-sync", daemon=True)
    thread.start()
    try:
        thread.join()
    except KeyboardInterrupt:
        started.wait()
        if "task" in where:
            with contextlib.suppress(RuntimeError):  # the loop closed: the coroutine ended meanwhile
                where["loop"].call_soon_threadsafe(where["task"].cancel)
        thread.join()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


__all__ = ["loop_running", "run_sync"]
