"""Tool reuse across the steps of an episode: what the model is told its workspace holds, whether a
step's code uses what an earlier step left there, and the table that sums it up.

A step of an episode in a persistent workspace (:mod:`gf2env.agents.llm.tools.workspaces`) is measured
against what the workspace held when the step began (:class:`gf2env.agents.sandbox.WorkspaceInventory`,
read inside the sandbox). Every run is a fresh process, so code can only use an earlier step's work
through the workspace's files: a step **reuses** when its code imports one of the workspace's modules
(``import tools``, ``from tools import solve``) or names one of its files in a string (``open("notes.json")``,
``runpy.run_path("solve.py")``). :func:`step_reuse` reports that, the names it used, the non-blank
lines the step ran and how many of them no earlier step of the episode ran (``new_lines``), and what
the workspace defined before and after the step. The analysis reads the code (``ast``); it does not
trace it, so an import in a branch that did not run still counts, and code that does not parse
counts as no reuse.

:func:`reuse_table` sums a query log up by agent, mode (``episode``: a persistent workspace;
``fresh``: tool mode with an empty sandbox a run; ``text``: no tools) and depth: γ with its interval,
the reuse rate, new lines, sandbox runs and ms, tokens a step; :func:`episode_table` by agent: the
depth at which a tool (a function or class in the workspace) first appears, and γ before and after
it.
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
    :class:`~gf2env.agents.sandbox.WorkspaceInventory`: its files, and the functions and classes of its
    modules)."""
    files, definitions = inventory.files, inventory.definitions
    head = (
        "This task is one step of an episode: the same circuit, one depth after another. Files your code "
        "writes in its working directory stay there for the later steps of this episode and are deleted "
        "when it ends; later code can import a module written there. Every run is a new process: only "
        "files carry over. So build a tool once and reuse it: write a function that solves a step from the "
        "globals (e.g. `def solve(record): ...` returning the answer's indices) into `tools.py`, run it, and "
        "at later steps `import tools` and call it instead of writing the code again."
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
    ``after`` the workspace's inventories at its start and end
    (:class:`~gf2env.agents.sandbox.WorkspaceInventory`),
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


def log_agent(line: dict[str, Any]) -> str:
    """Who answered a query log line: the agent's name (logs before it was recorded: the model's)."""
    return str(line.get("agent") or line["model"])


def log_mode(line: dict[str, Any]) -> str:
    """A query log line's mode: ``episode``, ``fresh`` (tool mode without a workspace) or ``text``."""
    if line.get("workspace") == "episode":
        return "episode"
    return "fresh" if "tool_use" in line else "text"


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


EPISODE_COLUMNS = ("reuse_rate", "tool_share", "gamma_with_tool", "new_lines")


def _episode_columns(group: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    with_tool = [bool(line["correct"]) for line in group if line["tools_before"]]
    return {
        "reuse_rate": _mean([bool(line["reused"]) for line in group]),
        "tool_share": _mean([bool(line["tools_before"]) for line in group]),
        "gamma_with_tool": _mean(with_tool),
        "new_lines": _mean([line["new_lines"] for line in group]),
    }


def reuse_table(lines: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (agent, mode, g) (:func:`log_agent`): answered queries, γ (mean correct) with its Jeffreys
    95% interval; in episode mode (``None`` otherwise) the share of steps that reused the workspace,
    the share that began with a tool in it (a function or class) and γ over those; and the means a
    step of new code lines, sandbox runs, sandbox ms, prompt and completion tokens and model seconds."""
    from gf2env.agents.llm.query_log import entry_compute, unique_entries
    from gf2env.report.results import jeffreys_interval

    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for line in unique_entries(lines):
        if line.get("status") == "ok":
            groups.setdefault((log_agent(line), log_mode(line), int(line["g"])), []).append(line)
    rows = []
    for (agent, mode, g), group in sorted(groups.items()):
        wins = sum(bool(line["correct"]) for line in group)
        lo, hi = jeffreys_interval(wins, len(group))
        tools = mode != "text"
        costs = [entry_compute(line) for line in group]  # the results' compute columns, read once
        rows.append({
            "agent": agent, "mode": mode, "g": g, "queries": len(group), "gamma": wins / len(group),
            "gamma_lo": float(lo), "gamma_hi": float(hi),
            **(_episode_columns(group) if mode == "episode" else dict.fromkeys(EPISODE_COLUMNS)),
            "sandbox_runs": _mean([c["sandbox_runs"] or 0 for c in costs]) if tools else None,
            "sandbox_ms": _mean([c["sandbox_ms"] or 0 for c in costs]) if tools else None,
            "prompt_tokens": _mean([c["prompt_tokens"] or 0 for c in costs]),
            "completion_tokens": _mean([c["completion_tokens"] or 0 for c in costs]),
            "model_s": _mean([(c["model_ms"] or 0) / 1000 for c in costs]),
        })  # fmt: skip
    return rows


def episode_table(lines: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per agent of episode-mode lines: episodes, those in which a tool (a function or class in the
    workspace) appeared, the mean depth it first appeared at, and γ over the steps before it and
    over the steps after it (the step that built it counts as before; ``None`` where no step)."""
    from gf2env.agents.llm.query_log import unique_entries

    episodes: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for line in unique_entries(lines):
        if line.get("status") == "ok" and log_mode(line) == "episode":
            episodes.setdefault((log_agent(line), line["episode_id"]), []).append(line)
    agents: dict[str, dict[str, list[Any]]] = {}
    for (agent, _), steps in sorted(episodes.items()):
        steps.sort(key=lambda line: int(line["g"]))
        acc = agents.setdefault(agent, {"first": [], "before": [], "after": [], "episodes": []})
        acc["episodes"].append(1)
        first = next((int(line["g"]) for line in steps if line["tools_after"]), None)
        if first is not None:
            acc["first"].append(first)
        for line in steps:
            after = first is not None and int(line["g"]) > first
            acc["after" if after else "before"].append(bool(line["correct"]))
    return [
        {
            "agent": agent,
            "episodes": len(acc["episodes"]),
            "with_tool": len(acc["first"]),
            "first_tool_g": _mean(acc["first"]),
            "gamma_before": _mean(acc["before"]),
            "steps_before": len(acc["before"]),
            "gamma_after": _mean(acc["after"]),
            "steps_after": len(acc["after"]),
        }  # fmt: skip
        for agent, acc in agents.items()
    ]


def write_table_csv(path: Any, rows: Sequence[dict[str, Any]]) -> None:
    """Rows of :func:`reuse_table` or :func:`episode_table` as CSV (an empty cell: no value)."""
    import csv

    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else [])
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})


def _cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_reuse_table(rows: Sequence[dict[str, Any]]) -> str:
    """:func:`reuse_table` as a text table."""
    head = (
        f"{'agent':<24} {'mode':<8} {'g':>3} {'n':>4} {'gamma':>6} {'interval':>15} {'reuse':>6} "
        f"{'tool':>5} {'γ tool':>6} "
        f"{'new ln':>6} {'runs':>5} {'sbx ms':>7} {'prompt':>7} {'compl':>6} {'model s':>7}"
    )
    out = [head]
    for r in rows:
        interval = f"[{r['gamma_lo']:.3f}, {r['gamma_hi']:.3f}]"
        out.append(
            f"{r['agent']:<24} {r['mode']:<8} {r['g']:>3} {r['queries']:>4} {r['gamma']:>6.3f} "
            f"{interval:>15} {_cell(r['reuse_rate'], '.2f'):>6} {_cell(r['tool_share'], '.2f'):>5} "
            f"{_cell(r['gamma_with_tool'], '.3f'):>6} "
            f"{_cell(r['new_lines'], '.1f'):>6} {_cell(r['sandbox_runs'], '.2f'):>5} "
            f"{_cell(r['sandbox_ms'], '.0f'):>7} {_cell(r['prompt_tokens'], '.0f'):>7} "
            f"{_cell(r['completion_tokens'], '.0f'):>6} {_cell(r['model_s'], '.2f'):>7}"
        )
    return "\n".join(out)


def format_episode_table(rows: Sequence[dict[str, Any]]) -> str:
    """:func:`episode_table` as a text table."""
    out = [
        f"{'agent':<24} {'episodes':>8} {'w/ tool':>7} {'first g':>7} {'γ before (steps)':>17} "
        f"{'γ after (steps)':>16}"
    ]
    for r in rows:
        out.append(
            f"{r['agent']:<24} {r['episodes']:>8} {r['with_tool']:>7} {_cell(r['first_tool_g'], '.1f'):>7} "
            f"{_cell(r['gamma_before'], '.3f'):>10} ({r['steps_before']:>4}) "
            f"{_cell(r['gamma_after'], '.3f'):>9} ({r['steps_after']:>4})"
        )
    return "\n".join(out)


__all__ = [
    "NOTE_ITEMS",
    "WORKSPACE_NOTE_ID",
    "code_lines",
    "episode_table",
    "format_episode_table",
    "format_reuse_table",
    "log_agent",
    "log_mode",
    "reuse_table",
    "step_reuse",
    "used_from_workspace",
    "workspace_note",
    "write_table_csv",
]
