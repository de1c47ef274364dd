"""``GF2ReconText-v1``: the environment with a prompt string in and a model's raw text out.

The observation is the step rendered as a prompt (``prompt_id``, default the paper's); the action
is whatever the model wrote. :func:`gf2env.text.answers.score_answer` grades it (the last boxed answer
outside any reasoning block; every failure classified), and the underlying ``GF2Recon-v1`` moves on
exactly as it would for the parsed answer. A reply that does not parse to a well-formed term counts
as a wrong step: the inner env is given a wrong candidate so that its step mode (reveal, terminate,
retry) applies unchanged. The turns of the episode (prompt, response, score) are kept in
``history``, and the chat form of the current step is in ``info["messages"]``.

With ``tools`` (a :class:`gf2env.envs.tool_turns.ToolTurns`, e.g.
:class:`gf2env.agents.llm.tools.SandboxTools`) a step may take several replies: a reply that runs
code (or must be asked again) gets the session's feedback as the observation, with reward 0 and the
depth unchanged; the reply that ends the step is graded on the session's final text (see
:mod:`gf2env.envs.tool_turns`). One session spans one episode.
"""

from __future__ import annotations

import string
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from gf2env.envs.env import GF2ReconEnv
from gf2env.envs.tool_turns import ToolSession, ToolTurns
from gf2env.errors import GF2ConfigError, InvalidActionError, ResetNeededError
from gf2env.records.record import Record
from gf2env.task.combinatorics import rank_support
from gf2env.text.answers import score_answer
from gf2env.text.prompt import PAPER_PROMPT_ID, Prompt, check_prompt_id, render_prompt

MAX_PROMPT_CHARS = 1_000_000
PRINTABLE = string.printable  # the prompts' alphabet


class AnyText(spaces.Text):
    """Any string within the length bounds (what a sandbox prints can hold any character); samples
    are drawn from ``charset`` as :class:`gymnasium.spaces.Text`'s are."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length


class GF2ReconTextEnv(gym.Wrapper):
    """GF2Recon with text observations (the prompt) and text actions (the model's reply).

    ## Observation space
    ``Text``: the prompt of the current step (empty after the last step); with ``tools``, the
    session's user message (:class:`AnyText`: it may quote the sandbox's output).

    ## Action space
    ``Text``: the model's raw reply; any string.

    ## Rewards, episode end, step modes
    As ``GF2Recon-v1``: 1 for the exact next term, else 0.

    ## Info
    The inner env's keys, plus on reset and after every step: ``prompt_id``, ``answer_offset`` and
    ``messages`` (chat form of the new prompt); after a step also ``score`` (the grading as a dict:
    correct, failure, indices, answer_text, mode).
    With ``tools``: ``messages`` is the step's conversation so far (its last message is the
    observation); after a reply that did not end the step, the session's ``tool_turn``; after one
    that did, the session's summary of the step (``tool``, ``reuse`` for ``SandboxTools``).

    ## Arguments
    ``gym.make("GF2ReconText-v1", prompt_id="paper", tools=None, **GF2Recon-v1 kwargs)``; ``tools``:
    a :class:`~gf2env.envs.tool_turns.ToolTurns` that runs the model's code (tool turns, above).

    ## Version history
    - v0: initial version.
    """

    def __init__(
        self, prompt_id: str = PAPER_PROMPT_ID, tools: ToolTurns | None = None, **kwargs: Any
    ) -> None:
        if kwargs.get("render_mode") is not None:
            raise GF2ConfigError(
                "GF2ReconText-v1 does not render (its observation is the text); drop render_mode."
            )
        check_prompt_id(prompt_id)
        if tools is not None and not isinstance(tools, ToolTurns):
            raise GF2ConfigError(
                f"tools={type(tools).__name__} has no open(); pass a gf2env.envs.tool_turns.ToolTurns "
                "such as gf2env.agents.llm.tools.SandboxTools(), or None for plain replies."
            )
        self.tools = tools
        self._session: ToolSession | None = None
        self._messages: list[dict[str, str]] = []
        super().__init__(GF2ReconEnv(**kwargs))
        self.inner: GF2ReconEnv = self.env  # type: ignore[assignment]
        self.config = self.inner.config
        self.prompt_id = prompt_id
        self._prompt: Prompt | None = None
        self.history: list[dict[str, Any]] = []
        text = spaces.Text if tools is None else AnyText
        self.observation_space = text(max_length=MAX_PROMPT_CHARS, min_length=0, charset=PRINTABLE)
        self.action_space = spaces.Text(max_length=MAX_PROMPT_CHARS, min_length=0)

    @property
    def prompt(self) -> Prompt | None:
        """The current step's prompt (``None`` before reset and after the last step)."""
        return self._prompt

    def _render_current(self) -> str:
        inst, ev = self.inner.instance, self.inner.evidence
        if inst is None or ev is None:
            self._prompt = None
            return ""
        c = self.config
        prefix = [inst.term(j) for j in range(ev.g)]
        self._prompt = render_prompt(
            self.prompt_id, prefix, ev.address, ev.payload, ev.labels, n=c.n, p=c.p, d=c.d
        )
        if self._session is None:
            self._messages = self._prompt.messages()
        else:
            self._messages = self._session.begin(self._prompt, Record.from_step(inst, ev))
        return self._messages[-1]["content"]

    def _end_session(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()

    def _prompt_info(self) -> dict[str, Any]:
        if self._prompt is None:
            return {"prompt_id": self.prompt_id, "answer_offset": None, "messages": []}
        return {
            "prompt_id": self.prompt_id,
            "answer_offset": self._prompt.answer_offset,
            "messages": list(self._messages),
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        self._end_session()
        _, info = self.inner.reset(seed=seed, options=options)
        self.history = []
        if self.tools is not None:
            self._session = self.tools.open()
        text = self._render_current()
        return text, {**info, **self._prompt_info()}

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not isinstance(action, str):
            raise InvalidActionError(
                f"GF2ReconText-v1 takes the model's reply as a str, not {type(action).__name__}."
            )
        if self._prompt is None or self.inner.instance is None:
            raise ResetNeededError("step() called on a finished or unreset episode; call reset() first.")
        c = self.config
        g = self.inner.depth
        graded, tool_info = action, {}
        if self._session is not None:
            turn = self._session.take(action)
            self._messages = list(turn.messages)
            if turn.final_text is None:  # the step goes on: the session's next message
                info = {"depth": g, **turn.info, **self._prompt_info()}
                return self._messages[-1]["content"], 0.0, False, False, info
            graded, tool_info = turn.final_text, turn.info
        target = self.inner.instance.term(g)
        score = score_answer(graded, target, c.p, self._prompt.answer_offset)
        if score.indices is not None and score.failure.value in ("none", "wrong_term"):
            inner_action: Any = list(score.indices)
        else:  # not a well-formed term: a wrong step, whatever the inner env's mode does with it
            inner_action = (rank_support(target, c.p) + 1) % c.num_candidates
        prompt_text = self._prompt.text
        _, reward, terminated, truncated, info = self.inner.step(inner_action)
        record = score.to_dict()
        turn_record = {"depth": g, "prompt": prompt_text, "response": action, "score": record}
        if self._session is not None:
            turn_record.update(graded=graded, **tool_info)
        self.history.append(turn_record)
        if terminated or truncated:  # the episode is over: so is its session (its workspace)
            self._end_session()
        text = "" if terminated else self._render_current()
        if terminated:
            self._prompt, self._messages = None, []
        info = {**info, "score": record, **tool_info, **self._prompt_info()}
        return text, float(reward), terminated, truncated, info

    def close(self) -> None:
        """Close the episode's tool session (if any), then the inner env."""
        self._end_session()
        super().close()


__all__ = ["AnyText", "GF2ReconTextEnv"]
