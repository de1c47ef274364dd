"""The layout rules of the README, checked on the source with ``ast``.

- Layers: the core ``gf2env`` (the task) < ``gf2env.agents`` (who plays it, from ``agents/``) <
  ``gf2env.train`` (who learns it, from ``train/``). Inside the core, rooms are layered too, from
  ``errors`` up to the ``gf2`` dispatcher (``CORE_ROOMS``). A module imports only from its own layer
  (or room) or below, never up.
- No import circle between modules, counting every import (module level, inside functions and
  under ``TYPE_CHECKING``): a circle held together by lazy imports is still a circle.
- A module over ``MAX_LINES`` lines holds one idea and says which in its docstring, on a line that
  starts ``One idea:``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.paths import REPO

#: Where each layer's source lives in the repository (pyproject's package-dir maps the last two).
LAYER_FOLDERS = {"gf2env": "gf2env", "gf2env.agents": "agents", "gf2env.train": "train"}
#: The core's rooms, lowest first: a module of one room imports only from its own room or those before
#: it. The package itself (``gf2env``, whose ``__init__`` registers the envs) and the dispatcher sit on top.
CORE_ROOMS = (
    ("errors", "extras", "version", "event_loop", "run_record"),
    ("task",),
    ("stream",),
    ("config",),
    ("text",),
    ("records",),
    ("envs",),
    ("report",),
    ("integrations",),
    ("cli", "__main__", ""),
)
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    found = {}
    for layer, folder in LAYER_FOLDERS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            if folder == "gf2env" and path.relative_to(REPO / folder).parts[0] in ("agents", "train"):
                continue
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([layer, *parts])] = path
    return found


MODULES = _modules()


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str) -> set[str]:
    """The project modules ``module`` imports (``from a import b`` counts ``a.b`` when it is a module)."""
    path = MODULES[module]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, path, node)
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for name in names:
            # the longest project module that the dotted name starts with
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
    return targets


GRAPH = {module: _imports(module) for module in MODULES}


def _layer(module: str) -> int:
    parts = module.split(".")
    return {"agents": 1, "train": 2}.get(parts[1], 0) if len(parts) > 1 else 0


def _room(module: str) -> int:
    """The rank of a core module's room in ``CORE_ROOMS``."""
    name = module.split(".")[1] if "." in module else ""
    ranks = [rank for rank, rooms in enumerate(CORE_ROOMS) if name in rooms]
    assert ranks, f"{module} is in no room of CORE_ROOMS: add its room there"
    return ranks[0]


def test_the_walk_sees_the_project() -> None:
    assert {"gf2env.envs.env", "gf2env.agents.base", "gf2env.train.grpo"} <= MODULES.keys()
    assert "gf2env.task.oracle" in GRAPH["gf2env.envs.env"]
    assert not any(name.startswith(("agents.", "train.")) for name in MODULES)


def test_no_import_goes_up_a_layer() -> None:
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if _layer(target) > _layer(module)
    )
    assert not upward, "gf2env < gf2env.agents < gf2env.train; these import upward:\n" + "\n".join(upward)


def test_every_core_module_is_in_a_room() -> None:
    for module in MODULES:
        if _layer(module) == 0:
            _room(module)


def test_no_import_goes_up_a_room_of_the_core() -> None:
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if _layer(module) == _layer(target) == 0 and _room(target) > _room(module)
    )
    rooms = " < ".join("/".join(r or "gf2env" for r in rooms) for rooms in CORE_ROOMS)
    assert not upward, f"the core's rooms are {rooms}; these import upward:\n" + "\n".join(upward)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle() -> None:
    # a package's __init__ re-exporting its modules is not a circle with them: drop package -> child edges
    graph = {
        module: {t for t in targets if not t.startswith(module + ".")} for module, targets in GRAPH.items()
    }
    cycles = _cycles(graph)
    assert not cycles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_long_module_holds_one_idea(module: str) -> None:
    path = MODULES[module]
    lines = len(path.read_text().splitlines())
    if lines <= MAX_LINES:
        return
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    assert any(line.startswith("One idea:") for line in docstring.splitlines()), (
        f"{path.relative_to(REPO)} has {lines} lines (> {MAX_LINES}): split it, or say in its docstring, "
        "on a line starting 'One idea:', which one idea it holds"
    )


def test_the_cli_names_command_modules_that_exist() -> None:
    from gf2env.cli import COMMAND_MODULES

    for name in COMMAND_MODULES:
        assert name in MODULES, f"gf2env.cli.COMMAND_MODULES names {name}, which is not a module"
        assert "def register(" in MODULES[name].read_text(), f"{name} has no register(subparsers)"
