"""The tool-mode runner: many tool episodes played to their end, a turn at a time, batched on a backend.

:func:`run_tool_episodes` asks every active episode's next reply together, runs the code they hold
(:func:`run_jobs`: in an episode's own workspace, else through the caller's sandbox pool) and hands
each finished episode over; a turn's sampling seed is :func:`turn_seed`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gf2env.agents.llm.queries import Backend, Completion, Query, SamplingParams
from gf2env.agents.llm.tools.episode import ToolEpisode
from gf2env.agents.llm.tools.paper import PAPER_MAX_REVISIONS
from gf2env.errors import GF2ConfigError
from gf2env.event_loop import run_sync


def run_jobs(
    jobs: Sequence[tuple[ToolEpisode, str]],
    run_code: Callable[[Sequence[tuple[str, dict[str, Any]]]], list[Any]],
) -> list[Any]:
    """Sandbox results of ``(episode, code)`` jobs, in order: an episode with a workspace runs there
    (the workspaces in parallel threads), the others through ``run_code`` together."""
    from concurrent.futures import ThreadPoolExecutor

    results: list[Any] = [None] * len(jobs)
    shared = [i for i, (episode, _) in enumerate(jobs) if episode.workspace is None]
    own = [i for i, (episode, _) in enumerate(jobs) if episode.workspace is not None]
    with ThreadPoolExecutor(max_workers=max(1, len(own))) as threads:
        futures = {i: threads.submit(jobs[i][0].workspace.run, jobs[i][1], jobs[i][0].view) for i in own}
        if shared:
            for i, result in zip(
                shared, run_code([(jobs[i][1], jobs[i][0].view) for i in shared]), strict=True
            ):
                results[i] = result
        for i, future in futures.items():
            results[i] = future.result()
    return results


def turn_seed(seed: int, turn: int) -> int:
    """The sampling seed of a turn: the query's at turn 0, then a fixed function of (seed, turn)."""
    return (seed + 1_000_003 * turn) & 0x7FFFFFFF


def _ask_all(backend: Backend, queries: Sequence[Query], params: SamplingParams) -> dict[str, Completion]:
    replies: dict[str, Completion] = {}

    def keep(completion: Completion) -> None:
        replies.setdefault(completion.key, completion)

    run_sync(backend.run(queries, params, keep))
    return replies


def run_tool_episodes(
    backend: Backend,
    episodes: Sequence[ToolEpisode],
    params: SamplingParams,
    run_code: Callable[[Sequence[tuple[str, dict[str, Any]]]], list[Any]],
    max_revisions: int,
    on_done: Callable[[ToolEpisode], None],
) -> None:
    """Play every episode to its end, all active episodes a turn at a time (batched on the backend).

    ``run_code`` runs ``(code, view)`` jobs and returns sandbox results in order (e.g.
    :meth:`gf2env.agents.sandbox.SandboxPool.map`); an episode with a ``workspace`` runs its code there.
    ``on_done`` gets each episode as soon as it ends.
    Each turn of an episode is one reply; see the module docs for when an episode ends.
    """
    if max_revisions < 0:
        raise GF2ConfigError(
            f"max_revisions={max_revisions} is negative; pass 0 or more (paper: {PAPER_MAX_REVISIONS})."
        )
    active = [e for e in episodes if not e.done]
    protocols = {e.protocol.id for e in active}
    if len(protocols) > 1:
        raise GF2ConfigError(
            f"run_tool_episodes got episodes of several tool protocols {sorted(protocols)}; "
            "run each protocol's episodes in its own call."
        )
    if active:
        params = active[0].protocol.sampling(params)
    for turn in range(max_revisions + 1):
        if not active:
            return
        by_key = {e.query.key: e for e in active}
        asks = [
            Query(e.query.key, e.query.prompt, turn_seed(e.query.seed, turn), "chat", tuple(e.messages))
            for e in active
        ]
        replies = _ask_all(backend, asks, params)
        left = max_revisions - turn
        jobs: list[tuple[ToolEpisode, str]] = []
        still: list[ToolEpisode] = []
        for key, episode in by_key.items():
            code = episode.take_reply(replies[key], left, params.max_tokens)
            if code is not None:
                jobs.append((episode, code))
            elif episode.done:
                on_done(episode)
            else:
                still.append(episode)
        results = run_jobs(jobs, run_code) if jobs else []
        for (episode, _), result in zip(jobs, results, strict=True):
            episode.take_result(result, left)
            if episode.done:
                on_done(episode)
            else:
                still.append(episode)
        active = still


__all__ = ["run_jobs", "run_tool_episodes", "turn_seed"]
