"""OpenAI-compatible servers as a backend (``vllm serve``, ``transformers serve``; needs httpx).

``/v1/chat/completions`` or ``/v1/completions``, async with a bounded number of requests in flight
per server, queries dealt round-robin over the servers (data-parallel replicas), and retries with
exponential backoff (or the wait a 429/503's ``Retry-After`` asks, up to ``max_retry_after``, 60 s by
default) on connection errors, timeouts (``timeout`` is the deadline of a whole request,
its reply's body included), 429/5xx and bodies that are not a completion;
a retry goes to the next server. What still fails is reported as a completion with ``error`` set,
never raised. A reply's body is read up to ``max_response_bytes`` (8 MiB by default, decoded bytes):
a longer one is cut off unread past that and is such a failure, its message naming the size and
the setting (the log keeps 256 Ki characters of a reply and a real reply is bounded by
``max_tokens``, so only a runaway or hostile server sends that much).

With ``SamplingParams.max_model_len`` set, each request's prompt is first counted by the server's
``/tokenize`` (vLLM's; the count its own template gives) and ``max_tokens`` cut to what is left of
the context, so a long conversation (tool mode) ends cut off, never refused with HTTP 400.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timezone
from email.utils import parsedate_to_datetime
from typing import Any

from agents.llm.queries import Backend, Callback, Completion, Query, SamplingParams
from gf2env.errors import GF2ConfigError


class BadResponseError(Exception):
    """A server answered, but not with a usable completion."""


class BusyError(BadResponseError):
    """HTTP 429 or 503: the server asks to come back, after ``retry_after`` seconds where it says so."""

    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after_seconds(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (seconds, or an HTTP-date), ``None`` if absent or
    unreadable; never negative."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        try:
            when = parsedate_to_datetime(value.strip())
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = when.timestamp() - time.time()
    return None if math.isnan(seconds) else max(0.0, seconds)


class DeadlineError(BadResponseError):
    """A request's whole response (headers and body) did not arrive within its deadline."""


class TooLargeError(BadResponseError):
    """A reply's body is longer than ``max_response_bytes``."""


#: The default cap of a reply's body (8 MiB): far above what a scored reply needs (the log keeps 256 Ki
#: characters; JSON escapes take at most 6 bytes a character), far below what would strain memory.
MAX_RESPONSE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Reply:
    """An HTTP reply read whole (its body decoded as its ``Content-Encoding`` says, within the cap)."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON (ValueError when it is not JSON, or not UTF-8)."""
        return json.loads(self.content)


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
    if params.top_k is not None:
        body["top_k"] = params.top_k  # vLLM's extension of the OpenAI API
    if params.stop:
        body["stop"] = list(params.stop)
    if query.api == "chat":
        body["messages"] = query.chat_messages()
    else:
        body["prompt"] = query.prompt.completion()
    return body


def parse_response(payload: Any, api: str) -> tuple[str, int | None, int | None, str | None, str | None]:
    """(text, prompt tokens, completion tokens, finish reason, stop string) from a response body, or
    BadResponseError. The stop string is vLLM's ``stop_reason`` when a stop string ended the reply (a
    token id there, or a server without the field, gives ``None``)."""
    try:
        choice = payload["choices"][0]
        text = choice["message"]["content"] if api == "chat" else choice["text"]
        if text is None:
            text = ""
        if not isinstance(text, str):
            raise TypeError(f"text is {type(text).__name__}")
        usage = payload.get("usage") or {}
        stop = choice.get("stop_reason")
        stop_reason = stop if isinstance(stop, str) else None
        finish = choice.get("finish_reason")
        if finish is not None and not isinstance(finish, str):
            raise TypeError(f"finish_reason is {type(finish).__name__}")
        tokens = _count_of(usage, "prompt_tokens"), _count_of(usage, "completion_tokens")
        return text, *tokens, finish, stop_reason
    except (KeyError, IndexError, TypeError, AttributeError) as err:
        raise BadResponseError(f"not a {api} completion ({type(err).__name__}: {err})") from None


def _count_of(usage: dict[str, Any], name: str) -> int | None:
    """A token count of ``usage``: absent, or a whole number >= 0 (anything else: TypeError)."""
    value = usage.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise TypeError(f"usage.{name} is {value!r}, not a count")
    return value


class OpenAICompatibleBackend(Backend):
    """Queries to OpenAI-compatible servers (see the module docs).

    Args:
        base_urls: server roots such as ``http://127.0.0.1:8000`` (``/v1`` is added if missing).
        model: the served model's name.
        concurrency: requests in flight per server.
        timeout: seconds one HTTP request may take in all, from sending it to the last byte of the
            reply (a deadline, not a per-read timeout: a server dripping its body a byte at a time
            meets it too); a request past it is retried like any timeout.
        max_retries: retries of a failing request (so ``max_retries + 1`` attempts at most).
        backoff: seconds before the first retry; doubled each time.
        api_key: sent as a bearer token when given.
        max_retry_after: the longest wait, in seconds, that a ``Retry-After`` header (seconds or an
            HTTP-date, on HTTP 429 and 503) may ask before a retry; the wait before a retry is the
            longer of the backoff and that (the retry may go to the next replica all the same).
        max_response_bytes: the most bytes of a reply's body that are read (:data:`MAX_RESPONSE_BYTES`
            by default); a longer body is not read further, and is a failure of that attempt.
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
        max_retry_after: float = 60.0,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        if not base_urls:
            raise GF2ConfigError("No server given; pass at least one base URL, e.g. http://127.0.0.1:8000.")
        if concurrency < 1:
            raise GF2ConfigError(f"concurrency={concurrency} is less than the minimum 1.")
        if max_retries < 0:
            raise GF2ConfigError(f"max_retries={max_retries} is negative; pass 0 or more.")
        if max_response_bytes < 1:
            raise GF2ConfigError(f"max_response_bytes={max_response_bytes} is less than the minimum 1.")
        self.base_urls = [self._v1(u) for u in base_urls]
        self.model = model
        self.concurrency, self.timeout = concurrency, timeout
        self.max_retries, self.backoff = max_retries, backoff
        self.api_key = api_key
        self.max_retry_after = max_retry_after
        self.max_response_bytes = max_response_bytes

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
            asked: float | None = None  # the wait a busy server's Retry-After asked for
            url = self.base_urls[(server + attempt) % len(self.base_urls)]
            async with gates[(server + attempt) % len(self.base_urls)]:
                start = time.perf_counter()
                try:
                    if params.max_model_len is not None:
                        count = await self._count(client, url, body)
                        room = params.room(count)
                        if room == 0:  # nothing left of the context: cut off before the first token
                            return Completion(query.key, "", count, 0, "length", 0.0, attempt + 1, url)
                        body["max_tokens"] = room
                    response = await self._post(client, url + path, body)
                    latency = time.perf_counter() - start
                    if response.status_code in (429, 503):
                        after = retry_after_seconds(response.headers.get("Retry-After"))
                        raise BusyError(f"HTTP {response.status_code}: {response.text[:200]}", after)
                    if response.status_code >= 500:
                        raise BadResponseError(f"HTTP {response.status_code}: {response.text[:200]}")
                    if response.status_code >= 400:  # the request itself is wrong: retrying won't help
                        errors.append(f"HTTP {response.status_code}: {response.text[:500]}")
                        return Completion(
                            query.key, attempts=attempt + 1, server=url, error=errors[-1], errors=errors
                        )
                    try:
                        payload = response.json()
                    except ValueError:  # not JSON, or not UTF-8
                        raise BadResponseError(f"body is not JSON: {response.text[:200]!r}") from None
                    text, p_tok, c_tok, finish, stop = parse_response(payload, query.api)
                    return Completion(
                        query.key, text, p_tok, c_tok, finish, latency, attempt + 1, url, None, errors, stop
                    )
                except (httpx.TransportError, BadResponseError) as err:
                    errors.append(f"{type(err).__name__}: {err}"[:500])
                    asked = err.retry_after if isinstance(err, BusyError) else None
            if attempt < self.max_retries:
                wait = self.backoff * 2**attempt
                if asked is not None:
                    wait = max(wait, min(asked, self.max_retry_after))
                await asyncio.sleep(wait)
        return Completion(
            query.key, attempts=self.max_retries + 1, server=url, error=errors[-1], errors=errors
        )

    async def _post(self, client: Any, url: str, body: dict[str, Any]) -> Reply:
        """POST ``body`` and read the whole reply within the deadline ``timeout`` (or DeadlineError), at
        most ``max_response_bytes`` of it (or TooLargeError; a body that does not decode as its
        ``Content-Encoding`` says: BadResponseError)."""
        import httpx

        try:
            return await asyncio.wait_for(self._read(client, url, body), self.timeout)
        except asyncio.TimeoutError:
            raise DeadlineError(f"no whole reply within the deadline of {self.timeout:g} s") from None
        except httpx.DecodingError as err:  # e.g. a body labelled gzip that is not
            raise BadResponseError(f"body does not decode as its headers say ({err})") from None

    async def _read(self, client: Any, url: str, body: dict[str, Any]) -> Reply:
        """The reply to POST ``body``, its body read in chunks and given up past the cap."""
        cap = self.max_response_bytes
        raise_it = "raise max_response_bytes (llm: max_response_bytes, or gf2 eval --max-response-bytes)"
        async with client.stream("POST", url, json=body) as response:
            announced = response.headers.get("Content-Length", "")
            if announced.isdigit() and int(announced) > cap:
                raise TooLargeError(
                    f"the reply's body is {int(announced):,} bytes (Content-Length), over "
                    f"max_response_bytes={cap:,}; not read. If replies this long are expected, {raise_it}."
                )
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > cap:
                    chunks.clear()  # now, not when the error's traceback (a cycle) is collected
                    raise TooLargeError(
                        f"the reply's body is over max_response_bytes={cap:,} bytes ({size:,} read, then "
                        f"given up). If replies this long are expected, {raise_it}."
                    )
                chunks.append(chunk)
            return Reply(response.status_code, response.headers, b"".join(chunks))

    async def _count(self, client: Any, url: str, body: dict[str, Any]) -> int:
        """The prompt's tokens by the server's ``/tokenize`` (at the root, beside ``/v1``)."""
        ask: dict[str, Any] = {k: body[k] for k in ("model", "messages", "prompt") if k in body}
        if "messages" in ask:
            ask["add_generation_prompt"] = True
        response = await self._post(client, url.removesuffix("/v1") + "/tokenize", ask)
        if response.status_code == 404:
            raise GF2ConfigError(
                f"{url} has no /tokenize, so max_model_len cannot be applied there; serve with vLLM or "
                "leave max_model_len out (the server then refuses prompts that overflow its context)."
            )
        if response.status_code >= 400:
            raise BadResponseError(f"/tokenize: HTTP {response.status_code}: {response.text[:200]}")
        try:
            return int(response.json()["count"])
        except (KeyError, TypeError, ValueError) as err:
            raise BadResponseError(f"/tokenize: no count ({type(err).__name__}: {err})") from None


__all__ = [
    "BadResponseError",
    "BusyError",
    "DeadlineError",
    "MAX_RESPONSE_BYTES",
    "OpenAICompatibleBackend",
    "Reply",
    "TooLargeError",
    "parse_response",
    "request_body",
    "retry_after_seconds",
]
