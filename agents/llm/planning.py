"""A record's queries: what each one is about, the content hash that names it, the seed it draws with.

Each query is a (record, prompt id, sampling settings, model, API, sample index, mode, system
message when it is not the prompt's own); its ``key``
is the SHA-256 of those (the record's instance, depth and samples included), and its sampling seed
is derived from the key, so a query means the same thing and draws the same way in every run: this
is what lets :class:`gf2env.agents.llm.query_log.QueryLog` resume by key, never by position.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gf2env.agents.llm.queries import Query, SamplingParams
from gf2env.records.record import Record
from gf2env.text.prompt import render_prompt


@dataclass(frozen=True)
class Planned:
    """A query and what it is about."""

    query: Query
    record: Record
    sample: int
    source: str
    sampling: str
    trial: int


def query_key(
    record: Record,
    prompt_id: str,
    params: SamplingParams,
    model: str,
    api: str,
    sample: int,
    mode: dict[str, Any] | None = None,
    system: str | None = None,
) -> str:
    """The content hash that identifies a query across runs (``mode``: e.g. tool-mode settings;
    ``system``: a system message replacing the prompt's, ``""`` for none)."""
    obj = record.to_json()
    obj.pop("exp", None)
    content = {"record": obj, "prompt_id": prompt_id, "params": params.to_dict(), "model": model, "api": api,
               "sample": sample}  # fmt: skip
    if mode is not None:
        content["mode"] = mode
    if system is not None:
        content["system"] = system
    blob = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def plan_queries(
    records: Sequence[tuple[Record, str, str, int]],
    prompt_id: str,
    params: SamplingParams,
    model: str,
    api: str = "chat",
    samples: int = 1,
    mode: dict[str, Any] | None = None,
    system: str | None = None,
) -> list[Planned]:
    """Queries for ``(record, source, sampling, trial)`` tuples, ``samples`` a record (``system``:
    the system message instead of the prompt's, ``""`` for none; ``None`` keeps the prompt's)."""
    out = []
    for record, source, sampling, trial in records:
        prompt = render_prompt(
            prompt_id, record.prefix, record.address, record.payload, record.labels,
            n=record.n, p=record.p, d=record.d,
        )  # fmt: skip
        if system is not None:
            prompt = replace(prompt, system=system)
        for s in range(samples):
            key = query_key(record, prompt_id, params, model, api, s, mode, system)
            seed = int(key[:8], 16) & 0x7FFFFFFF
            out.append(Planned(Query(key, prompt, seed, api), record, s, source, sampling, trial))
    return out


__all__ = ["Planned", "plan_queries", "query_key"]
