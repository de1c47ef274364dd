"""The record views: what of a task record the sandboxed code sees (never the target), and the check
that refuses any other view.

Two layouts: gf2env's (:func:`record_view`: globals ``record``, ``n``, ``p``, ``d``, ``g``, ``K``,
``prefix``, ``samples``) and the paper's tool protocol's (:func:`paper_record_view`: globals ``RECORD``
and ``PROMPT``).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from gf2env.agents.sandbox.errors import SandboxConfigError
from gf2env.records.record import Record

VIEW_KEYS = ("n", "p", "d", "g", "K", "prefix", "samples")
PAPER_VIEW_KEYS = ("RECORD", "PROMPT")
PAPER_RECORD_KEYS = ("n", "p", "g", "d_max", "prefix", "samples")
EMPTY_VIEW: dict[str, Any] = {"n": 0, "p": 0, "d": 0, "g": 0, "K": 0, "prefix": [], "samples": []}


def record_view(record: Record) -> dict[str, Any]:
    """What the sandboxed code may see of ``record``: everything but the target (the answer)."""
    if not isinstance(record, Record):
        raise SandboxConfigError(
            f"record_view needs a gf2env.records.record.Record, got {type(record).__name__}; "
            "load records with gf2env.records.record.read_records or Record.from_json."
        )
    bits = np.concatenate([record.address, record.payload], axis=1).astype(np.uint8)
    chars = bits + np.uint8(ord("0"))
    samples = []
    for row, y in zip(chars, record.labels, strict=True):
        s = row.tobytes().decode("ascii")
        samples.append(
            {
                "x": int(s, 2) if s else 0,
                "bits": s,
                "address": s[: record.n],
                "payload": s[record.n :],
                "y": int(y),
            }
        )
    return {
        "n": int(record.n),
        "p": int(record.p),
        "d": int(record.d),
        "g": int(record.g),
        "K": int(record.K),
        "prefix": [[int(i) for i in term] for term in record.prefix],
        "samples": samples,
    }


def paper_record_view(record: Record, question: str) -> dict[str, Any]:
    """The paper protocol's globals: ``RECORD`` (n, p, g, d_max, prefix, and samples with ``x`` as the
    paper's hex string, ``x_int``, ``bits`` with ``x_0`` leftmost, ``y``) and ``PROMPT`` (``question``,
    the prompt text). Unlike the paper's sandbox, ``RECORD`` carries no ``target``."""
    view = record_view(record)
    samples = [{"x": hex(s["x"]), "x_int": s["x"], "bits": s["bits"], "y": s["y"]} for s in view["samples"]]
    paper = {"n": view["n"], "p": view["p"], "g": view["g"], "d_max": view["d"], "prefix": view["prefix"]}
    return {"RECORD": {**paper, "samples": samples}, "PROMPT": str(question)}


def _check_paper_view(view: dict[str, Any]) -> None:
    extra = sorted(set(view) - set(PAPER_VIEW_KEYS))
    record = view.get("RECORD")
    if extra or not isinstance(record, dict) or not isinstance(view.get("PROMPT"), str):
        raise SandboxConfigError(
            f"a paper view holds RECORD (a dict) and PROMPT (a str) only, got keys {sorted(view)}; "
            "build it with paper_record_view(record, question)."
        )
    if "target" in record:
        raise SandboxConfigError(
            "RECORD has a 'target' key: the sandboxed code must never see the answer; "
            "build the view with paper_record_view(record, question)."
        )
    missing = [key for key in PAPER_RECORD_KEYS if key not in record]
    if missing:
        raise SandboxConfigError(
            f"RECORD lacks the keys {missing}; build it with paper_record_view(record, question)."
        )


def _check_gf2env_view(view: dict[str, Any]) -> None:
    if "target" in view:
        raise SandboxConfigError(
            "view has a 'target' key: the sandboxed code must never see the answer; "
            "build the view with record_view(record)."
        )
    missing = [key for key in VIEW_KEYS if key not in view]
    if missing:
        raise SandboxConfigError(f"view lacks the keys {missing}; build it with record_view(record).")


def check_view(view: dict[str, Any] | None) -> str:
    """The view as JSON, after refusing one that is not a dict, lacks a key or carries a target."""
    if view is None:
        view = EMPTY_VIEW
    if not isinstance(view, dict):
        raise SandboxConfigError(
            f"view must be a dict from record_view(record) or None, got {type(view).__name__}."
        )
    if "RECORD" in view:
        _check_paper_view(view)
    else:
        _check_gf2env_view(view)
    try:
        return json.dumps(view)
    except (TypeError, ValueError) as err:
        raise SandboxConfigError(
            f"view is not JSON-serialisable ({err}); build it with record_view(record)."
        ) from err
