"""Tool turns for ``GF2ReconText-v1``: what the text env needs of whoever runs the model's code.

The env does not run code itself (the sandbox lives in :mod:`gf2env.agents.sandbox`, a layer above); it is
given a :class:`ToolTurns` (``gym.make("GF2ReconText-v1", tools=...)``, e.g.
:class:`gf2env.agents.llm.tools.SandboxTools`) and talks to it through these two protocols:

- at ``reset`` the env opens a :class:`ToolSession` (one per episode), and closes it when the episode
  ends, at the next ``reset`` and at ``close``: whatever the session kept for the episode (a
  workspace) goes with it;
- at each step the session gets the step's prompt and record (:meth:`ToolSession.begin`) and returns
  the step's first messages; the env's observation is the last of them (a user message), and
  ``info["messages"]`` is the conversation of the step so far;
- each action (the model's reply) goes to :meth:`ToolSession.take`: a :class:`ToolTurn` whose
  ``final_text`` is ``None`` keeps the env on the same step (the reply ran code, or must be asked
  again: the new user message is the observation, the reward 0); otherwise the env grades
  ``final_text`` with :func:`gf2env.text.answers.score_answer` and moves on as for a plain reply.

``gym.make`` deep-copies its kwargs into the env's spec: a ``ToolTurns`` that holds resources (a
sandbox's workers) returns itself from ``__deepcopy__``. The session gets the whole record (the
target too); what the model's code may see is the session's business
(:func:`gf2env.agents.sandbox.record_view` never shows the target).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from gf2env.records.record import Record
from gf2env.text.prompt import Prompt


@dataclass(frozen=True)
class ToolTurn:
    """What a session made of one reply.

    ``messages``: the step's conversation so far (while the step goes on, it ends with the next user
    message); ``final_text``: the text to grade when the step is over, else ``None``; ``info``: keys
    the env adds to the step's ``info`` (e.g. ``tool_turn`` while the step goes on, ``tool`` and
    ``reuse`` when it is over)."""

    messages: list[dict[str, str]]
    final_text: str | None
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class ToolSession(Protocol):
    """One episode's tool turns (see the module docs)."""

    def begin(self, prompt: Prompt, record: Record) -> list[dict[str, str]]:
        """Start a step: its first messages (chat form; the last is the user message)."""
        ...

    def take(self, reply: str) -> ToolTurn:
        """Take the model's reply to the current step's last message."""
        ...

    def close(self) -> None:
        """End the episode: give back what it held (idempotent)."""
        ...


@runtime_checkable
class ToolTurns(Protocol):
    """What ``GF2ReconText-v1`` takes as ``tools``: a source of episode sessions."""

    def open(self) -> ToolSession:
        """A new session, for one episode."""
        ...


__all__ = ["ToolSession", "ToolTurn", "ToolTurns"]
