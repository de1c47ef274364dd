"""The record's sandbox globals: what the model's code sees under gf2env's tool protocol, said once.

gf2env's tool mode (:class:`~gf2env.agents.llm.tools.protocol.ToolProtocol`), TRL's tool environment
(:mod:`gf2env.train.tool_env`) and the verifiers toolset (:mod:`gf2env.agents.integrations.verifiers`) run
the model's code on the same globals: the record's public view
(:func:`gf2env.agents.sandbox.record_view`, never the target) and the prompt's ``answer_offset``, both in
the dict ``record`` (:func:`tool_view`). Their names and what they hold are declared here, and every door
renders its text from here: :func:`globals_list` (tool mode's system message, one global a line) and
:func:`globals_sentence` (the one-paragraph tool note of the tool-calling doors). The paper's protocol
has globals of its own (``RECORD`` and ``PROMPT``: :mod:`gf2env.agents.llm.tools.paper`).
"""

from __future__ import annotations

from typing import Any

from gf2env.agents.sandbox.view import VIEW_KEYS

SCALARS = (
    ("n", "address bits"),
    ("p", "payload bits"),
    ("d", "degree"),
    ("g", "known terms"),
    ("K", "samples"),
)
"""The int globals and what each counts."""
PREFIX_HOLDS = "known terms as lists of 0-based payload indices"
SAMPLE_FIELDS = {
    "x": "`bits` as an int, first address bit most significant",
    "bits": "address then payload",
    "address": "its n address bits",
    "payload": "its p payload bits as a '0'/'1' string",
    "y": "the label, 0 or 1",
}
"""The keys of a row of ``samples`` (in ``record_view``'s order) and what each holds."""
RECORD_GLOBALS = (*(name for name, _ in SCALARS), "prefix", "samples", "record")
"""Every global the code sees (``record`` holds the others and ``answer_offset``)."""
_LISTED = ("payload", "address", "bits", "x", "y")  # tool mode's order: the payload first

if RECORD_GLOBALS[:-1] != VIEW_KEYS:  # pragma: no cover - a guard for whoever edits the view
    raise ImportError(f"the described globals {RECORD_GLOBALS[:-1]} are not the record view's {VIEW_KEYS}")


def tool_view(record: Any, answer_offset: int) -> dict[str, Any]:
    """The globals of ``record``'s runs: its public view and the prompt's ``answer_offset``."""
    from gf2env.agents.sandbox import record_view

    return {**record_view(record), "answer_offset": answer_offset}


def _names(names: Any) -> str:
    return ", ".join(f"`{name}`" for name in names)


def globals_list(answer_offset: int) -> str:
    """The globals as tool mode's system message lists them, one a line (each line ends with ``\\n``)."""
    scalars = _names(name for name, _ in SCALARS)
    counts = ", ".join(what for _, what in SCALARS)
    fields = ", ".join(f"`{key}` ({SAMPLE_FIELDS[key]})" for key in _LISTED)
    return (
        f"- {scalars} (ints): {counts}\n"
        "- `prefix`: the known terms in order, each a list of its 0-based payload indices\n"
        f"- `samples`: one dict a row: {fields}\n"
        f"- `record`: all of these in one dict, and `record['answer_offset']` = {answer_offset}\n"
    )


def globals_sentence(article: str = "") -> str:
    """The globals in one clause, as the tool-calling doors' notes say them (``article``: a word put
    before "known terms", e.g. ``"the "``)."""
    scalars = _names(name for name, _ in SCALARS)
    return (
        f"{scalars}, `prefix` ({article}{PREFIX_HOLDS}) and `samples` (dicts with {_names(SAMPLE_FIELDS)}), "
        "also in `record`"
    )


__all__ = [
    "PREFIX_HOLDS",
    "RECORD_GLOBALS",
    "SAMPLE_FIELDS",
    "SCALARS",
    "globals_list",
    "globals_sentence",
    "tool_view",
]
