"""A record as one prompt row: the chat prompt and what a scorer needs to grade a reply to it.

The one row shape every prompt dataset uses (TRL training streams, ``datasets`` folders, the
reasoning-gym and verifiers adapters): ``prompt`` (chat messages), ``target`` (the next term's
support), ``p`` and ``answer_offset`` (what :func:`gf2env.text.answers.score_answer` takes besides the
reply), ``g`` and ``record`` (the record's JSON, the tool environment's input).
"""

from __future__ import annotations

import json
from typing import Any

from gf2env.records.record import Record
from gf2env.text.prompt import render_prompt


def prompt_row(record: Record, prompt_id: str, tools: bool = False) -> dict[str, Any]:
    """One dataset row for a record: chat prompt, scorer columns, depth and the record's JSON.

    With ``tools`` the user message is left empty: the tool environment's ``reset`` appends the step
    (and the tool instructions) to it."""
    prompt = render_prompt(
        prompt_id, record.prefix, record.address, record.payload, record.labels,
        n=record.n, p=record.p, d=record.d,
    )  # fmt: skip
    messages = prompt.messages()
    if tools:
        messages[-1] = {"role": "user", "content": ""}
    return {
        "prompt": messages,
        "target": list(record.target),
        "p": record.p,
        "answer_offset": prompt.answer_offset,
        "g": record.g,
        "record": json.dumps(record.to_json()),
    }
