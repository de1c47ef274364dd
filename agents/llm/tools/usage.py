"""Tool-usage tables from a query log: gf2env's breakdown by tool-use class, and the paper's table
(accuracy with no tool, with the first run only, and after the whole revise loop) with its CSV.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gf2env.agents.llm.query_log import unique_entries
from gf2env.agents.llm.tools.episode import TOOL_USE_CLASSES


def tool_usage(lines: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """gf2env's tool-use breakdown from a query log (the paper's table is :func:`paper_tool_usage`):
    per (model, g), how many answered queries made no, one or several tool calls, and the accuracy
    of each class (``None`` where the class is empty; episode mode's steps are the model's row
    ``"<model> (episode)"``);
    then the share of queries whose outcome is ``truncated`` (no answer, the last reply cut off by
    ``max_tokens``) and the number of cut-off replies over all their turns (``0`` for logs from
    before ``tools-v2``, which did not record them)."""
    groups: dict[tuple[str, int], dict[str, list[bool]]] = {}
    truncated: dict[tuple[str, int], list[int]] = {}
    for line in unique_entries(lines):  # a query logged twice counts once
        if line.get("status") != "ok" or "tool_use" not in line:
            continue
        episode = line.get("workspace") == "episode"  # episode mode: a row of its own
        key = (f"{line['model']} (episode)" if episode else line["model"], int(line["g"]))
        cell = groups.setdefault(key, {c: [] for c in TOOL_USE_CLASSES})
        cell[line["tool_use"]].append(bool(line["correct"]))
        counts = truncated.setdefault(key, [0, 0])
        counts[0] += line.get("outcome") == "truncated"
        counts[1] += int(line.get("cut_off_replies", 0))
    rows = []
    for (model, g), cell in sorted(groups.items()):
        total = sum(len(v) for v in cell.values())
        row: dict[str, Any] = {"model": model, "g": g, "queries": total}
        for name, results in cell.items():
            row[f"{name}_share"] = len(results) / total
            row[f"{name}_accuracy"] = sum(results) / len(results) if results else None
        row["truncated_share"] = truncated[model, g][0] / total
        row["cut_off_replies"] = truncated[model, g][1]
        rows.append(row)
    return rows


def format_tool_usage(rows: Sequence[dict[str, Any]]) -> str:
    """:func:`tool_usage` as a text table (shares and accuracies in percent)."""
    head = f"{'model':<24} {'g':>4} {'queries':>7}" + "".join(f" {c:>19}" for c in TOOL_USE_CLASSES)
    head += f" {'truncated':>9} {'cut-off':>7}"
    out = [head, " " * 37 + "   share / accuracy" * len(TOOL_USE_CLASSES) + f" {'share':>9} {'replies':>7}"]
    for r in rows:
        cells = ""
        for c in TOOL_USE_CLASSES:
            acc = r[f"{c}_accuracy"]
            accuracy = f"{100 * acc:>6.1f}%" if acc is not None else "     -"
            cells += f" {100 * r[f'{c}_share']:>8.1f}% / " + accuracy
        cells += f" {100 * r['truncated_share']:>8.1f}% {r['cut_off_replies']:>7}"
        out.append(f"{r['model']:<24} {r['g']:>4} {r['queries']:>7}{cells}")
    return "\n".join(out)


PAPER_TOOL_USAGE_COLUMNS = (
    "model_class", "model", "g", "p",
    "no_tool_rate", "no_tool_n", "single_tool_rate", "single_tool_n", "multi_tool_rate", "multi_tool_n",
)  # fmt: skip


def paper_tool_usage(lines: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The paper's tool-usage table from a query log holding a tool run and a no-tool run of a model:
    per (model class, model, g, p), the accuracy under three budgets and the queries behind each.

    - ``no_tool``: the no-tool run's queries (answered lines without tool episodes);
    - ``single_tool``: the tool run scored on its FIRST sandbox run's output only (an episode whose
      model ran no code scores wrong: the paper's "no code = no credit");
    - ``multi_tool``: the same episodes scored after the whole revise loop (the logged verdict).

    Only models with a tool run have a row; a rate is ``None`` where its budget has no queries
    (e.g. no no-tool run was logged). Episode mode's steps (a workspace kept across depths) are not
    the paper's protocol and are left out."""
    cells: dict[tuple[str, str, int, int], dict[str, list[bool]]] = {}
    plain: dict[tuple[str, str, int, int], list[bool]] = {}
    for line in unique_entries(lines):  # a query logged twice counts once
        if line.get("status") != "ok" or line.get("workspace") == "episode":  # not the paper's protocol
            continue
        model_class = str(line.get("model_class", line.get("backend", "")))
        key = (model_class, line["model"], int(line["g"]), int(line["p"]))
        if "tool_use" in line:
            cell = cells.setdefault(key, {"single_tool": [], "multi_tool": []})
            cell["single_tool"].append(bool(line.get("first_run_correct")))
            cell["multi_tool"].append(bool(line["correct"]))
        else:
            plain.setdefault(key, []).append(bool(line["correct"]))
    rows = []
    for key, cell in sorted(cells.items()):
        model_class, model, g, p = key
        row: dict[str, Any] = {"model_class": model_class, "model": model, "g": g, "p": p}
        for name, results in (("no_tool", plain.get(key, [])), *cell.items()):
            row[f"{name}_rate"] = sum(results) / len(results) if results else None
            row[f"{name}_n"] = len(results)
        rows.append({c: row[c] for c in PAPER_TOOL_USAGE_COLUMNS})
    return rows


def write_paper_tool_usage(path: Any, rows: Sequence[dict[str, Any]]) -> None:
    """:func:`paper_tool_usage`'s rows as CSV with the paper's columns (an empty cell: no queries)."""
    import csv

    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=PAPER_TOOL_USAGE_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})


def format_paper_tool_usage(rows: Sequence[dict[str, Any]]) -> str:
    """:func:`paper_tool_usage` as a text table (rates in percent, with their query counts)."""
    budgets = ("no_tool", "single_tool", "multi_tool")
    out = [f"{'model_class':<16} {'model':<24} {'g':>4} {'p':>3}" + "".join(f" {b:>18}" for b in budgets)]
    for r in rows:
        cells = ""
        for b in budgets:
            rate = r[f"{b}_rate"]
            shown = f"{100 * rate:.1f}%" if rate is not None else "-"
            cells += f" {shown:>10} (n={r[f'{b}_n']:>3})"
        out.append(f"{r['model_class']:<16} {r['model']:<24} {r['g']:>4} {r['p']:>3}{cells}")
    return "\n".join(out)


__all__ = [
    "PAPER_TOOL_USAGE_COLUMNS",
    "format_paper_tool_usage",
    "format_tool_usage",
    "paper_tool_usage",
    "tool_usage",
    "write_paper_tool_usage",
]
