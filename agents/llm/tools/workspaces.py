"""Episode mode: an LLM walks each instance through its depths, its code in one workspace an episode.

With ``workspace: episode`` (``gf2 eval --tools --workspace episode``, on records that are the steps
of episodes: ``--episodes``), the queries of one instance (same source, setting, trial and sample)
form a chain in depth order. Step ``s`` of every chain is asked together (batched on the backend);
a chain's steps run one after another, each a tool episode of its own (:mod:`gf2env.agents.llm.tools.episode`:
a fresh conversation of at most ``max_revisions + 1`` replies) whose code runs in the chain's
:class:`~gf2env.agents.sandbox.Workspace`. The files the code writes stay for the chain's later steps, and
each step's tool instructions end with what the workspace holds
(:func:`gf2env.agents.llm.tools.reuse.workspace_note`).
The workspace is emptied and its worker given back when the chain ends.

A step's answer depends on the steps before it, so its query key is chained: the SHA-256 of its own
key (which names ``workspace-v1`` in its mode) and the previous step's chained key. A chain whose
every step is in the log is skipped on resume; a chain with any step missing (a failed query, a run
killed mid-episode) is asked again from its first step, since its workspace is gone, and the new
answers supersede the old ones in the log (:func:`gf2env.agents.llm.query_log.unique_entries`).

Each step's log line adds ``workspace`` (``"episode"``), ``episode_id``, ``episode_step`` and the
reuse measures of :func:`gf2env.agents.llm.tools.reuse.step_reuse`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from gf2env.agents.llm.planning import Planned
from gf2env.agents.llm.queries import Backend, SamplingParams
from gf2env.agents.llm.tools.episode import ToolEpisode, start_episode
from gf2env.agents.llm.tools.protocol import ToolProtocol
from gf2env.agents.llm.tools.reuse import step_reuse, workspace_note
from gf2env.agents.llm.tools.runner import run_tool_episodes
from gf2env.errors import GF2ConfigError, RecordFormatError
from gf2env.records.record import group_episodes

WORKSPACE_MODES = ("fresh", "episode")


@dataclass(frozen=True)
class EpisodeChain:
    """The queries of one episode in depth order, their keys chained (``own_keys``: the keys they had
    as lone queries); ``id`` names the episode."""

    steps: tuple[Planned, ...]
    own_keys: tuple[str, ...]

    @property
    def id(self) -> str:
        return self.steps[0].query.key[:16]


def _continues(earlier: Planned, later: Planned) -> bool:
    a, b = earlier.record, later.record
    head = (*a.prefix, a.target)
    return a.n == b.n and b.g > a.g and tuple(b.prefix[: len(head)]) == head


def chain_key(key: str, previous: str) -> str:
    """A step's chained key: its own key and the previous step's chained key (``""`` for the first)."""
    return hashlib.sha256(f"{key}:{previous}".encode()).hexdigest()


def chain_episodes(planned: Sequence[Planned]) -> list[EpisodeChain]:
    """The episodes of ``planned``, each in depth order with chained keys and seeds: its queries of one
    (source, setting, sample) grouped by :func:`gf2env.records.record.group_episodes` (the one grouping
    rule of episodes: the episode named by each record's ``exp``, one step a depth), episodes in order
    of first appearance. Refused unless every group is the steps of one instance (each record's prefix
    continues the one before, its target included)."""
    order = {id(p): i for i, p in enumerate(planned)}
    runs: dict[tuple[Any, ...], list[Planned]] = {}
    for p in planned:
        runs.setdefault((p.source, p.sampling, p.sample), []).append(p)
    found: list[tuple[int, EpisodeChain]] = []
    for (source, sampling, _), items in runs.items():
        by_record = {id(p.record): p for p in items}
        try:
            groups = group_episodes(p.record for p in items)
        except RecordFormatError as err:
            raise GF2ConfigError(
                "workspace: episode walks an instance through its depths, but among the records of "
                f"{source} ({sampling}): {err} Or evaluate with --episodes (grid: {{episodes: true}}), or "
                "drop --workspace episode."
            ) from None
        for (episode, n, p_, d, K), records in groups.items():
            steps = [by_record[id(record)] for record in records]
            for earlier, later in zip(steps, steps[1:], strict=False):
                if not _continues(earlier, later):
                    where = f"{episode!r} in {source} (p={p_} d={d} K={K} n={n} {sampling})"
                    raise GF2ConfigError(
                        f"workspace: episode walks an instance through its depths, but the record of {where} "
                        f"at g={later.record.g} does not continue its step at g={earlier.record.g} "
                        "(an edited file?); check the records."
                    )
            previous, chained = "", []
            for step in steps:
                key = chain_key(step.query.key, previous)
                query = replace(step.query, key=key, seed=int(key[:8], 16) & 0x7FFFFFFF)
                chained.append(replace(step, query=query))
                previous = key
            chain = EpisodeChain(tuple(chained), tuple(step.query.key for step in steps))
            found.append((min(order[id(step)] for step in steps), chain))
    return [chain for _, chain in sorted(found, key=lambda item: item[0])]


def _each(function: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    """``function`` on every item, in threads (each a sandbox run of its own workspace)."""
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(len(items), 32), thread_name_prefix="workspace") as pool:
        return list(pool.map(function, items))


def _no_shared_runs(jobs: Sequence[tuple[str, dict[str, Any]]]) -> list[Any]:
    raise AssertionError("every episode step runs its code in its own workspace")


def run_episodes(
    backend: Backend,
    chains: Sequence[EpisodeChain],
    params: SamplingParams,
    sandbox: Any,
    protocol: ToolProtocol,
    max_revisions: int,
    on_step: Callable[[ToolEpisode, dict[str, Any]], None],
    parallel: int = 64,
) -> None:
    """Play ``chains`` (see the module docs), ``parallel`` episodes at a time (each holds a sandbox
    worker while it runs). ``on_step`` gets each finished step's tool episode and its log fields."""
    if parallel < 1:
        raise GF2ConfigError(f"parallel={parallel} is less than the minimum 1.")
    revise = max_revisions > 0
    for start in range(0, len(chains), parallel):
        wave = chains[start : start + parallel]
        workspaces = [sandbox.workspace() for _ in wave]
        seen: list[set[str]] = [set() for _ in wave]
        # what each workspace holds: read once a step, at its end (nothing runs before the next step)
        before = {i: workspaces[i].inventory() for i in range(len(wave))}  # empty: no run has begun
        try:
            for s in range(max(len(chain.steps) for chain in wave)):
                live = [i for i, chain in enumerate(wave) if s < len(chain.steps)]
                held = [workspaces[i] for i in live]
                episodes: dict[int, ToolEpisode] = {}
                for i in live:
                    step = wave[i].steps[s]
                    view = protocol.view(step.record, step.query.prompt)
                    note = workspace_note(before[i])
                    episodes[i] = start_episode(step.query, view, protocol, revise, workspaces[i], note)
                run_tool_episodes(
                    backend, list(episodes.values()), params, _no_shared_runs, max_revisions, lambda e: None
                )
                after = dict(zip(live, _each(lambda w: w.inventory(), held), strict=True))
                for i in live:
                    episode = episodes[i]
                    codes = [t["code"] for t in episode.turns if t["sandbox"] is not None]
                    fields = {
                        "workspace": "episode",
                        "episode_id": wave[i].id,
                        "episode_step": s,
                        "workspace_lost": workspaces[i].lost,
                        **step_reuse(codes, before[i], after[i], seen[i]),
                    }
                    on_step(episode, fields)
                before.update(after)
        finally:
            for workspace in workspaces:
                workspace.close()


__all__ = ["EpisodeChain", "WORKSPACE_MODES", "chain_episodes", "chain_key", "run_episodes"]
