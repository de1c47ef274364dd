"""What every backend shares: text in, text out, for many queries at once.

A backend takes :class:`Query` objects (a rendered prompt, a per-query seed) and the
:class:`SamplingParams`, and reports one :class:`Completion` per query through a callback as soon
as it is done, so that a caller can log each result the moment it exists. The backends, one file
each so that each optional extra stays in its own file:

- :class:`gf2env.agents.llm.openai_server.OpenAICompatibleBackend`: OpenAI-compatible servers (httpx).
- :class:`gf2env.agents.llm.transformers_backend.TransformersBackend`: a local ``transformers`` model.
- :class:`gf2env.agents.llm.vllm_engine.VLLMEngineBackend`: an offline ``vllm.LLM`` engine.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gf2env.errors import GF2ConfigError
from gf2env.text.prompt import Prompt

APIS = ("chat", "completions")


MAX_TOKEN_COUNT = 10**9
"""The most tokens a count may be (a reply's ``usage``, ``max_tokens``, a context length): a thousand
times the longest context of any model today. A larger count is no count but a typo, or a broken or
hostile server that would swamp the run's token totals (such a reply is a BadResponseError)."""
MAX_TEMPERATURE = 100.0  # far past any useful temperature; a larger value is a typo
MAX_TOP_K = 10**7  # above every vocabulary


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings sent with every request (and hashed into each query's identity).

    ``stop``: strings that end a completion where they first appear (the string itself left out),
    as the server, the vLLM engine or ``transformers``' ``generate`` applies them.
    ``top_k``: sample among the ``top_k`` most likely tokens only (``None``: the backend's default,
    which for vLLM and OpenAI servers is no limit).
    ``max_model_len``: the context length the model runs with (a server's ``--max-model-len``); when
    given, each request's ``max_tokens`` is cut to what the prompt leaves of it, and a prompt that
    leaves nothing is answered with an empty completion cut off (finish reason ``length``) instead
    of a refused request (served backends count by the server's ``/tokenize``; ``transformers`` by
    its tokenizer; ``vllm-offline`` starts its engine with this context). ``None``: the backend's own
    limit applies.
    """

    temperature: float = 0.6
    top_p: float = 0.95
    max_tokens: int = 1024
    stop: tuple[str, ...] = ()
    max_model_len: int | None = None
    top_k: int | None = None

    def __post_init__(self) -> None:
        for name, example in (("temperature", 0.6), ("top_p", 0.95)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise GF2ConfigError(f"{name}={value!r} is not a finite number; pass e.g. {name}={example}.")
        if not 0 <= self.temperature <= MAX_TEMPERATURE:
            raise GF2ConfigError(
                f"temperature={self.temperature} is outside [0, {MAX_TEMPERATURE}]; pass e.g. 0.6."
            )
        if not 0 < self.top_p <= 1:
            raise GF2ConfigError(f"top_p={self.top_p} is outside (0, 1]; pass e.g. 0.95.")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int):
            raise GF2ConfigError(f"max_tokens={self.max_tokens!r} is not an integer; pass e.g. 1024.")
        if not 1 <= self.max_tokens <= MAX_TOKEN_COUNT:
            raise GF2ConfigError(
                f"max_tokens={self.max_tokens} is outside [1, {MAX_TOKEN_COUNT:,}]; pass e.g. 1024."
            )
        if isinstance(self.stop, str) or not all(isinstance(s, str) and s for s in self.stop):
            raise GF2ConfigError(
                f"stop={self.stop!r} is not a list of non-empty strings; pass e.g. stop=('</answer>',)."
            )
        if self.top_k is not None and (isinstance(self.top_k, bool) or not 1 <= self.top_k <= MAX_TOP_K):
            raise GF2ConfigError(
                f"top_k={self.top_k!r} is not a count of tokens in [1, {MAX_TOP_K:,}]; pass e.g. top_k=20, "
                "or leave it out for no limit."
            )
        if self.max_model_len is not None and not 2 <= self.max_model_len <= MAX_TOKEN_COUNT:
            raise GF2ConfigError(
                f"max_model_len={self.max_model_len} is outside [2, {MAX_TOKEN_COUNT:,}]; pass the context "
                "length the model was started with (e.g. 8192), or leave it out."
            )

    def to_dict(self) -> dict[str, Any]:
        """The settings as hashed into a query's key (``max_model_len`` and ``top_k`` only when set:
        old keys hold)."""
        out = {**asdict(self), "stop": list(self.stop)}
        for name in ("max_model_len", "top_k"):
            if out[name] is None:
                del out[name]
        return out

    def room(self, prompt_tokens: int) -> int:
        """The tokens a completion may have after a prompt of ``prompt_tokens`` (0: none left)."""
        if self.max_model_len is None:
            return self.max_tokens
        return max(0, min(self.max_tokens, self.max_model_len - prompt_tokens))


@dataclass(frozen=True)
class Query:
    """One request: ``key`` identifies it (see :mod:`gf2env.agents.llm.planning`), ``seed`` fixes its
    sampling.

    ``messages``, when given, is the whole conversation so far (a multi-turn query, e.g. tool mode);
    otherwise the chat form is the prompt's system + user messages.
    """

    key: str
    prompt: Prompt
    seed: int
    api: str = "chat"
    messages: tuple[dict[str, str], ...] | None = None

    def chat_messages(self) -> list[dict[str, str]]:
        return list(self.messages) if self.messages is not None else self.prompt.messages()


@dataclass
class Completion:
    """What came back for one query (``error`` set, ``text`` empty, when nothing usable did).

    ``answered_by``: the model a server's reply names (its ``model`` field) when that is not the model
    the query asked for; ``None`` when it is, when the reply names none, and for local backends."""

    key: str
    text: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    latency_s: float = 0.0
    attempts: int = 1
    server: str | None = None
    error: str | None = None
    errors: list[str] = field(default_factory=list)
    stop_reason: str | None = None  # the stop string that ended the reply, where the backend says so
    answered_by: str | None = None  # the model the reply names when it is not the model asked (served)


Callback = Callable[[Completion], None]


class Backend:
    """Base class: ``name`` and ``model`` describe it; :meth:`run` answers queries."""

    name = "backend"
    model = ""

    async def run(self, queries: Sequence[Query], params: SamplingParams, on_result: Callback) -> None:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model}


__all__ = ["APIS", "Backend", "Callback", "Completion", "Query", "SamplingParams"]
