"""Tool reuse across the steps of an episode: what the model is told its workspace holds, whether a
step's code uses what an earlier step left there, and the table that sums it up.

A step of an episode in a persistent workspace (:mod:`agents.llm.episodes`) is measured against what
the workspace held when the step began (:class:`agents.sandbox.WorkspaceInventory`, read inside the
sandbox). Every run is a fresh process, so code can only use an earlier step's work through the
workspace's files: a step **reuses** when its code imports one of the workspace's modules (``import
tools``, ``from tools import solve``) or names one of its files in a string (``open("notes.json")``,
``runpy.run_path("solve.py")``). :func:`step_reuse` reports that, the names it used, the non-blank
lines the step ran and how many of them no earlier step of the episode ran (``new_lines``), and what
the workspace defined before and after the step. The analysis reads the code (``ast``); it does not
trace it, so an import in a branch that did not run still counts, and code that does not parse
counts as no reuse.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from typing import Any

WORKSPACE_NOTE_ID = "workspace-v1"  # hashed into a query's key with the note's text
NOTE_ITEMS = 24  # files and definitions listed in the note (the rest are counted)


def workspace_note(inventory: Any) -> str:
    """The paragraph added to a step's tool instructions in episode mode: that files persist for the
    episode's later steps, and what the workspace holds now (``inventory``, a
    :class:`~agents.sandbox.WorkspaceInventory`: its files, and the functions and classes of its
    modules)."""
    files, definitions = inventory.files, inventory.definitions
    head = (
        "This task is one step of an episode: the same circuit, one depth after another. Files your code "
        "writes in its working directory stay there for the later steps of this episode and are deleted "
        "when it ends; later code can import a module written there (save `tools.py`, then "
        "`import tools`). Every run is a new process: only files carry over."
    )
    if not inventory.complete:
        return f"{head}\nThe workspace's listing could not be read this step."
    if not files:
        return f"{head}\nThe workspace is empty."
    shown = []
    for path in sorted(files)[:NOTE_ITEMS]:
        module = path[:-3].replace("/", ".") if path.endswith(".py") else None
        names = definitions.get(module, []) if module else []
        listed = ", ".join(names[:NOTE_ITEMS]) + (
            f" and {len(names) - NOTE_ITEMS} more" if len(names) > NOTE_ITEMS else ""
        )
        shown.append(f"- `{path}` ({files[path]} bytes)" + (f": defines {listed}" if names else ""))
    more = len(files) - NOTE_ITEMS
    tail = f"\n- and {more} more files" if more > 0 else ""
    return f"{head}\nThe workspace holds:\n" + "\n".join(shown) + tail


def code_lines(code: str) -> list[str]:
    """The lines of ``code`` that do something: stripped, without blank and comment-only lines."""
    return [s for s in (line.strip() for line in code.splitlines()) if s and not s.startswith("#")]


def _module_names(files: Iterable[str]) -> set[str]:
    return {path[:-3].replace("/", ".") for path in files if path.endswith(".py")}


def used_from_workspace(code: str, files: dict[str, int]) -> list[str]:
    """What ``code`` uses of a workspace holding ``files``: the modules it imports (``tools``), the
    names it imports from them or reads off them (``tools.solve``), and the files it names in a
    string; sorted, empty when it uses nothing or does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    modules = _module_names(files)
    paths = set(files) | {f"./{path}" for path in files} | {f"/scratch/{path}" for path in files}
    paths |= {f"/tmp/{path}" for path in files}
    used: set[str] = set()
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    used.add(alias.name)
                    aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules:
            used.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in paths:
            used.add(node.value.removeprefix("./").removeprefix("/scratch/").removeprefix("/tmp/"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            used.add(f"{aliases[node.value.id]}.{node.attr}")
    return sorted(used)


def step_reuse(
    codes: Sequence[str],
    before: Any,
    after: Any,
    seen: set[str],
) -> dict[str, Any]:
    """What one step did with its workspace: ``codes`` are the step's runs in order, ``before`` and
    ``after`` the workspace's inventories at its start and end (:class:`~agents.sandbox.WorkspaceInventory`),
    ``seen`` the lines earlier steps of the episode ran (updated in place). The keys are those the
    query log records for an episode step."""
    used = sorted({name for code in codes for name in used_from_workspace(code, before.files)})
    lines = [line for code in codes for line in code_lines(code)]
    new = [line for line in dict.fromkeys(lines) if line not in seen]
    seen.update(lines)
    return {
        "reused": bool(used),
        "reused_names": used,
        "code_lines": len(lines),
        "new_lines": len(new),
        "tools_before": before.names,
        "tools_after": after.names,
        "workspace_complete": bool(before.complete and after.complete),
    }


__all__ = [
    "NOTE_ITEMS",
    "WORKSPACE_NOTE_ID",
    "code_lines",
    "step_reuse",
    "used_from_workspace",
    "workspace_note",
]
