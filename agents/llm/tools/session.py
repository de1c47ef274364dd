"""Tool turns for ``GF2ReconText-v1``: the model's code runs in the sandbox, in one workspace per episode.

:class:`SandboxTools` is the :class:`gf2env.envs.tool_turns.ToolTurns` the text env takes::

    env = gym.make("GF2ReconText-v1", tools=SandboxTools(), p=6, d=3, K=16, n=8, step_mode="reveal")

Each step of an episode is a tool episode of :mod:`gf2env.agents.llm.tools.episode` (its protocol, its
budget of ``max_revisions + 1`` replies, its final-answer precedence), driven one reply at a time by the
env's ``step`` (:meth:`ToolEpisode.take_reply` and :meth:`ToolEpisode.take_result`, the rules the
batched agent uses). With ``workspace="episode"`` (the default) the episode's code runs in one
:class:`gf2env.agents.sandbox.Workspace`: files written at depth g are there at depth g+1, every step's
tool instructions end with :func:`gf2env.agents.llm.tools.reuse.workspace_note` (what the workspace holds when
the step begins), and the step's ``info["reuse"]`` is :func:`gf2env.agents.llm.tools.reuse.step_reuse`; the
workspace is emptied and its worker given back when the env's episode ends, at the next ``reset``
and at ``env.close()``. With ``workspace="fresh"`` every run starts from an empty scratch and the
model is told nothing of files.

The env's actions are plain strings, so a reply is never known to be cut off by ``max_tokens``
(:func:`gf2env.agents.llm.tools.protocol.cut_off` needs the finish reason): a cut-off reply counts as an
ordinary one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gf2env.agents.llm.queries import Completion, Query
from gf2env.agents.llm.tools.episode import ToolEpisode, start_episode
from gf2env.agents.llm.tools.paper import PAPER_MAX_REVISIONS
from gf2env.agents.llm.tools.protocol import tool_protocol
from gf2env.agents.llm.tools.reuse import step_reuse, workspace_note
from gf2env.agents.llm.tools.runner import run_jobs
from gf2env.agents.llm.tools.workspaces import WORKSPACE_MODES
from gf2env.agents.sandbox import Sandbox, SandboxResult, Workspace, WorkspaceInventory
from gf2env.envs.tool_turns import ToolTurn
from gf2env.errors import GF2ConfigError, ResetNeededError
from gf2env.records.record import Record
from gf2env.text.prompt import Prompt


class SandboxTools:
    """Sessions whose code runs in ``sandbox`` (default: ``Sandbox(protocol's limits)``, made here and
    closed by :meth:`close`; a sandbox passed in keeps its own limits and stays the caller's).

    Args:
        sandbox: where the code runs.
        workspace: ``"episode"``: one workspace per env episode (files persist across its steps);
            ``"fresh"``: every run in a fresh scratch.
        protocol: the tool protocol (``"gf2env"``; ``"paper"`` only with ``workspace="fresh"``: the
            paper's protocol has no workspace).
        max_revisions: replies a step may take after its first (the paper: :data:`PAPER_MAX_REVISIONS`).
    """

    def __init__(
        self,
        sandbox: Sandbox | None = None,
        workspace: str = "episode",
        protocol: str = "gf2env",
        max_revisions: int = PAPER_MAX_REVISIONS,
    ) -> None:
        if workspace not in WORKSPACE_MODES:
            raise GF2ConfigError(
                f"workspace={workspace!r} is unknown; pass 'episode' (files persist across an episode's "
                "steps) or 'fresh' (every run starts empty)."
            )
        self.protocol = tool_protocol(protocol)
        if self.protocol.name == "paper" and workspace == "episode":
            raise GF2ConfigError(
                "protocol='paper' has no workspace (its instructions say nothing of files kept across "
                "steps); pass workspace='fresh' with it, or protocol='gf2env' for a persistent workspace."
            )
        if isinstance(max_revisions, bool) or not isinstance(max_revisions, int) or max_revisions < 0:
            raise GF2ConfigError(
                f"max_revisions={max_revisions!r}: pass an integer >= 0 (paper: {PAPER_MAX_REVISIONS})."
            )
        self.workspace = workspace
        self.max_revisions = max_revisions
        self._own = sandbox is None
        self.sandbox = Sandbox(self.protocol.limits) if sandbox is None else sandbox

    def open(self) -> SandboxToolSession:
        """A session for one episode (the env opens it at ``reset``)."""
        return SandboxToolSession(self)

    def close(self) -> None:
        """Stop the sandbox's workers if this object made the sandbox."""
        if self._own:
            self.sandbox.close()

    def __deepcopy__(self, memo: dict[int, Any]) -> SandboxTools:
        """Itself: a handle on a sandbox (``gym.make`` deep-copies its kwargs into the env's spec)."""
        return self

    def __enter__(self) -> SandboxTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SandboxToolSession:
    """One env episode's tool turns (a :class:`gf2env.envs.tool_turns.ToolSession`): a
    :class:`ToolEpisode` per step, all in the episode's workspace (``workspace="episode"``)."""

    def __init__(self, tools: SandboxTools) -> None:
        self.tools = tools
        self.workspace: Workspace | None = tools.sandbox.workspace() if tools.workspace == "episode" else None
        self.episode: ToolEpisode | None = None
        self.steps = 0
        self.closed = False
        self._before = WorkspaceInventory()  # what the workspace held when the current step began
        self._after: WorkspaceInventory | None = None  # what it held when the last step ended
        self._seen: set[str] = set()  # the code lines the episode's steps ran so far

    def begin(self, prompt: Prompt, record: Record) -> list[dict[str, str]]:
        """Start a step: the prompt with the tool instructions (and, in a workspace, what it holds)."""
        if self.closed:
            raise ResetNeededError("this tool session is closed (its episode ended); reset the env.")
        protocol = self.tools.protocol
        note = None
        if self.workspace is not None:
            self._before = self._after if self._after is not None else self.workspace.inventory()
            note = workspace_note(self._before)
        query = Query(f"text-env-step-{self.steps}", prompt, 0)
        view = protocol.view(record, prompt)
        revise = self.tools.max_revisions > 0
        self.episode = start_episode(query, view, protocol, revise, workspace=self.workspace, note=note)
        self.steps += 1
        return list(self.episode.messages)

    def _run_fresh(self, jobs: Sequence[tuple[str, dict[str, Any]]]) -> list[SandboxResult]:
        return [self.tools.sandbox.run(code, view) for code, view in jobs]

    def take(self, reply: str) -> ToolTurn:
        """Take one reply: run its code, and either go on (feedback) or end the step (final text)."""
        episode = self.episode
        if self.closed or episode is None or episode.done:
            raise ResetNeededError("no step is waiting for a reply; call begin() (the env: reset()).")
        left = self.tools.max_revisions - len(episode.turns)  # replies allowed after this one
        code = episode.take_reply(Completion(episode.query.key, reply), left, max_tokens=0)
        result = None
        if code is not None:
            (result,) = run_jobs([(episode, code)], self._run_fresh)
            episode.take_result(result, left)
        if not episode.done:
            turn = {"turn": len(episode.turns) - 1, "code": code, "turns_left": left}
            if result is not None:
                turn.update(
                    exit_code=result.exit_code, stop_reason=result.stop_reason, wall_s=result.wall_s,
                    stdout_truncated=result.stdout_truncated,
                )  # fmt: skip
            return ToolTurn(list(episode.messages), None, {"tool_turn": turn})
        after = self.workspace.inventory() if self.workspace is not None else WorkspaceInventory()
        self._after = after
        codes = [t["code"] for t in episode.turns if t["code"] is not None]
        reuse = step_reuse(codes, self._before, after, self._seen)
        tool = {**episode.summary(), "workspace": self.tools.workspace}
        if self.workspace is not None:
            tool["workspace_lost"] = self.workspace.lost
        return ToolTurn(list(episode.messages), episode.final_text, {"tool": tool, "reuse": reuse})

    def close(self) -> None:
        """Empty the workspace and give its worker back (idempotent)."""
        self.closed = True
        if self.workspace is not None:
            self.workspace.close()


__all__ = ["SandboxToolSession", "SandboxTools"]
