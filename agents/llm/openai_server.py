"""OpenAI-compatible servers as a backend (``vllm serve``, ``transformers serve``; needs httpx).

One idea: one conversation with an OpenAI-compatible server (the request, its deadline and retries,
and the checks that keep a wrong reply from becoming a number).

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

A reply is a completion only when it reads as one: its token counts (``usage``) are whole numbers
from 0 to :data:`MAX_TOKEN_COUNT` (10**9), and its completion tokens no more than the ``max_tokens``
asked; a body nested too deeply to parse is not one either. A reply whose ``model`` names another model
than the one asked still counts, but says so (``Completion.answered_by``; vLLM names its first
``--served-model-name``, whichever of its names was asked). The first time a server cannot be
connected to (refused, no such host), one line on stderr names it and the reason, at once, before the
retries (one line a server, however many queries fail there).

With ``SamplingParams.max_model_len`` set, each request's prompt is first counted by the server's
``/tokenize`` (vLLM's; the count its own template gives) and ``max_tokens`` cut to what is left of
the context, so a long conversation (tool mode) ends cut off, never refused with HTTP 400.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timezone
from email.utils import parsedate_to_datetime
from typing import Any, NamedTuple

from gf2env.agents.llm.queries import MAX_TOKEN_COUNT, Backend, Callback, Completion, Query, SamplingParams
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

#: Characters of a reply's ``model`` that are kept (a model's name is short; the rest is cut).
MODEL_NAME_KEEP_CHARS = 200


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
        """The body as JSON (ValueError when it is not JSON, or not UTF-8; BadResponseError when it is
        nested too deeply for the parser)."""
        try:
            return json.loads(self.content)
        except RecursionError:
            raise BadResponseError(
                f"body is JSON nested too deeply to read ({len(self.content):,} bytes starting "
                f"{self.content[:40]!r})"
            ) from None


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


class Parsed(NamedTuple):
    """What a completion's body says (see :func:`parse_response`)."""

    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str | None
    stop_reason: str | None
    model: str | None


def parse_response(payload: Any, api: str, max_tokens: int | None = None) -> Parsed:
    """The text, token counts, finish reason, stop string and model of a response body, or
    BadResponseError. The stop string is vLLM's ``stop_reason`` when a stop string ended the reply (a
    token id there, or a server without the field, gives ``None``). The model is the reply's ``model``
    (``None`` when absent or empty; cut to :data:`MODEL_NAME_KEEP_CHARS`). A token count must be a
    whole number from 0 to :data:`MAX_TOKEN_COUNT`, the completion's no more than ``max_tokens`` (the
    limit asked, when given)."""
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
        model = payload.get("model")
        if model is not None and not isinstance(model, str):
            raise TypeError(f"model is {type(model).__name__}")
        prompt_tokens = _count_of(usage, "prompt_tokens")
        completion_tokens = _count_of(usage, "completion_tokens")
        if completion_tokens is not None and max_tokens is not None and completion_tokens > max_tokens:
            raise BadResponseError(
                f"usage.completion_tokens is {completion_tokens:,}, more than the max_tokens={max_tokens:,} "
                "asked: the server ignored the limit or miscounts"
            )
        name = model[:MODEL_NAME_KEEP_CHARS] if model else None
        return Parsed(text, prompt_tokens, completion_tokens, finish, stop_reason, name)
    except (KeyError, IndexError, TypeError, AttributeError) as err:
        raise BadResponseError(f"not a {api} completion ({type(err).__name__}: {err})") from None


def _count_of(usage: dict[str, Any], name: str) -> int | None:
    """A token count of ``usage``: absent, or a whole number from 0 to :data:`MAX_TOKEN_COUNT` (not a
    whole number >= 0: TypeError; above the maximum: BadResponseError naming the value)."""
    value = usage.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise TypeError(f"usage.{name} is {value!r}, not a count")
    if value is not None and value > MAX_TOKEN_COUNT:
        shown = str(value) if value < 10**40 else f"about 10**{int(value.bit_length() * 0.30103)}"
        raise BadResponseError(
            f"usage.{name} is {shown}, over the most a token count may be ({MAX_TOKEN_COUNT:,}): "
            "not a real count"
        )
    return value


CONNECT_TIMEOUT_S = 10.0
"""Seconds to open a connection to a server (at most the request's deadline): a host that drops
connections silently is named as unreachable after this long, not after the whole deadline."""


def connect_reason(err: BaseException) -> str:
    """Why a connection failed, in words (``connection refused``, ``name or service not known``):
    the first OS error behind ``err`` (httpx wraps it twice, asyncio once more), else ``err``'s text."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno is not None:
            words = os.strerror(seen.errno) if seen.errno > 0 else (seen.strerror or str(seen))
            return words[:1].lower() + words[1:]
        seen = seen.__cause__ or seen.__context__
    words = str(err) or type(err).__name__
    return words[:1].lower() + words[1:]


def warn_on_stderr(line: str) -> None:
    """Print ``line`` on stderr at once, above any progress bar (tqdm's)."""
    from tqdm import tqdm

    tqdm.write(line, file=sys.stderr)
    sys.stderr.flush()


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
        warn: called with one line the first time each server cannot be connected to (default: print
            it on stderr, :func:`warn_on_stderr`).
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
        warn: Callable[[str], None] | None = None,
        connect_timeout: float = CONNECT_TIMEOUT_S,
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
        self.warn = warn or warn_on_stderr
        self.connect_timeout = min(connect_timeout, timeout)
        self._unreachable: set[str] = set()  # servers a connection error has been reported for

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
        timeouts = httpx.Timeout(self.timeout, connect=self.connect_timeout)
        async with httpx.AsyncClient(timeout=timeouts, headers=headers, limits=limits) as client:

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
                endpoint = url + path
                try:
                    if params.max_model_len is not None:
                        endpoint = url.removesuffix("/v1") + "/tokenize"
                        count = await self._count(client, url, body)
                        room = params.room(count)
                        if room == 0:  # nothing left of the context: cut off before the first token
                            return Completion(query.key, "", count, 0, "length", 0.0, attempt + 1, url)
                        body["max_tokens"] = room
                        endpoint = url + path
                    response = await self._post(client, endpoint, body)
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
                    got = parse_response(payload, query.api, body["max_tokens"])
                    other = got.model if got.model not in (None, self.model) else None
                    return Completion(
                        query.key, got.text, got.prompt_tokens, got.completion_tokens, got.finish_reason,
                        latency, attempt + 1, url, None, errors, got.stop_reason, other,
                    )  # fmt: skip
                except (httpx.ConnectError, httpx.ConnectTimeout) as err:
                    reason = connect_reason(err)
                    if isinstance(err, httpx.ConnectTimeout):
                        reason = f"no connection within {self.connect_timeout:g} s"
                    errors.append(f"{type(err).__name__}: {endpoint}: {reason}"[:500])
                    self._report_unreachable(url, endpoint, reason)
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

    def _report_unreachable(self, server: str, endpoint: str, reason: str) -> None:
        """Say once a server (the first time it cannot be connected to) where and why, before retrying."""
        if server in self._unreachable:
            return
        self._unreachable.add(server)
        retries = self.max_retries
        then = (
            "no retries (retries=0): its queries fail"
            if retries == 0
            else f"each query is retried up to {retries} time{'s' if retries > 1 else ''}"
            + (", on the next server" if len(self.base_urls) > 1 else "")
        )
        self.warn(f"gf2: warning: {endpoint}: {reason}; is a server up there? ({then})")

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
        """The prompt's tokens by the server's ``/tokenize`` (at the root, beside ``/v1``): a whole number
        from 0 to :data:`MAX_TOKEN_COUNT`, or BadResponseError."""
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
            count = response.json()["count"]
        except (KeyError, TypeError, ValueError) as err:
            raise BadResponseError(f"/tokenize: no count ({type(err).__name__}: {err})") from None
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_TOKEN_COUNT:
            raise BadResponseError(
                f"/tokenize: count is {count!r}, not a token count from 0 to {MAX_TOKEN_COUNT:,}"[:300]
            )
        return count


__all__ = [
    "BadResponseError",
    "BusyError",
    "DeadlineError",
    "MAX_RESPONSE_BYTES",
    "MAX_TOKEN_COUNT",
    "OpenAICompatibleBackend",
    "Parsed",
    "Reply",
    "TooLargeError",
    "connect_reason",
    "parse_response",
    "request_body",
    "retry_after_seconds",
    "warn_on_stderr",
]
