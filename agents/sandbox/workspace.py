"""A workspace: one episode's runs on one warm worker whose scratch persists from run to run, so that
code can build a tool (a file, a module) at one step and import or call it at a later one.

Every run is still a fresh, limited process behind every layer of :mod:`agents.sandbox.sandbox`; only
the scratch carries over (``/scratch`` is also first on ``sys.path``, so ``import tools`` finds
``/scratch/tools.py``). When the workspace closes, the scratch is emptied and the worker goes back
to the Sandbox (or is replaced where that fails), so nothing reaches the next episode.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agents.sandbox.errors import SandboxConfigError, SandboxUnavailableError
from agents.sandbox.limits import SandboxLimits, SandboxResult
from agents.sandbox.view import record_view
from agents.sandbox.workers import ATTEMPTS, Worker, WorkerGoneError

if TYPE_CHECKING:
    from gf2env.records import Record


class WorkerSource(Protocol):
    """What a workspace needs of its :class:`~agents.sandbox.Sandbox`: a run's checked inputs, and a
    worker to hold for the episode and give back."""

    def _job(
        self, code: str, view: dict[str, Any] | None, limits: SandboxLimits | None
    ) -> tuple[bytes, str, SandboxLimits]: ...

    def _acquire(self, beyond_workers: bool = False) -> Worker: ...

    def _release(self, worker: Worker, held: bool = False) -> None: ...


# run in the workspace like any code (a fresh, limited process): what it holds, and the top-level
# functions and classes of its Python files (the workspace's own modules go off sys.path first, so a
# file named ast.py or json.py cannot answer for it)
INVENTORY_CODE = """\
import sys
del sys.path[0]
import ast, json, os
files, definitions = {}, {}
for root, dirs, names in os.walk("."):
    dirs.sort()
    for name in sorted(names):
        path = os.path.join(root, name)[2:]
        try:
            files[path] = os.lstat(path).st_size
        except OSError:
            continue
        if name.endswith(".py") and files[path] <= 1 << 20:
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    tree = ast.parse(fh.read())
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            module = path[:-3].replace(os.sep, ".")
            definitions[module] = [node.name for node in tree.body if isinstance(node, kinds)]
print(json.dumps({"files": files, "definitions": definitions}))
"""


@dataclass(frozen=True)
class WorkspaceInventory:
    """What a workspace holds: its files (path -> bytes) and, per Python module in it, the top-level
    functions and classes. ``complete`` is False when the listing could not be read whole (it is
    produced inside the sandbox, so it is checked like any output of the code)."""

    files: dict[str, int] = field(default_factory=dict)
    definitions: dict[str, list[str]] = field(default_factory=dict)
    complete: bool = True

    @property
    def names(self) -> list[str]:
        """``module.name`` for every function and class defined in the workspace."""
        return [f"{module}.{name}" for module, names in self.definitions.items() for name in names]


def parse_inventory(result: SandboxResult) -> WorkspaceInventory:
    """The inventory a run of :data:`INVENTORY_CODE` printed, checked field by field."""
    try:
        data = json.loads(result.stdout) if result.ok and not result.stdout_truncated else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return WorkspaceInventory(complete=False)
    files, definitions = data.get("files"), data.get("definitions")
    if not (
        isinstance(files, dict)
        and all(isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in files.items())
        and isinstance(definitions, dict)
        and all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(n, str) for n in v)
            for k, v in definitions.items()
        )
    ):
        return WorkspaceInventory(complete=False)
    return WorkspaceInventory(files=files, definitions=definitions)


class Workspace:
    """One episode's runs on one worker, its scratch kept between them (see the module docs); use it
    as a context manager, or call :meth:`close`. ``lost`` counts the times its worker died (or had to
    be killed) mid-episode, taking the files with it: the next run starts an empty workspace."""

    def __init__(self, sandbox: WorkerSource) -> None:
        self.sandbox = sandbox
        self.worker: Worker | None = None
        self.runs = 0
        self.lost = 0
        self.closed = False

    def run(
        self, code: str, view: dict[str, Any] | None = None, *, limits: SandboxLimits | None = None
    ) -> SandboxResult:
        """Run ``code`` like :meth:`Sandbox.run`, in this workspace's scratch."""
        result = self._run(code, view, limits)
        self.runs += 1
        return result

    def run_record(self, code: str, record: Record, *, limits: SandboxLimits | None = None) -> SandboxResult:
        """Run ``code`` with ``record_view(record)``, in this workspace's scratch."""
        return self.run(code, record_view(record), limits=limits)

    def _run(self, code: str, view: dict[str, Any] | None, limits: SandboxLimits | None) -> SandboxResult:
        if self.closed:
            raise SandboxConfigError("this workspace is closed; open a new one with sandbox.workspace().")
        code_bytes, view_json, checked = self.sandbox._job(code, view, limits)
        for _ in range(ATTEMPTS):
            if self.worker is None:
                self.worker = self.sandbox._acquire(beyond_workers=True)
            worker = self.worker
            try:
                return worker.run(code_bytes, view_json, checked, keep_scratch=True)
            except WorkerGoneError:  # found dead: the run goes to a fresh, empty workspace
                continue
            except BaseException:
                worker.healthy = False
                raise
            finally:
                if not worker.healthy:  # killed or dead: its files are gone with it
                    self.worker = None
                    self.lost += 1
                    self.sandbox._release(worker, held=True)
        raise SandboxUnavailableError(f"{ATTEMPTS} sandbox workers in a row died before the run started.")

    def inventory(self) -> WorkspaceInventory:
        """What the workspace holds now (an empty one before its first run)."""
        if self.worker is None:
            return WorkspaceInventory()
        return parse_inventory(self._run(INVENTORY_CODE, None, None))

    def close(self) -> None:
        """Empty the scratch and give the worker back (replaced if emptying fails)."""
        if self.closed:
            return
        self.closed = True
        worker, self.worker = self.worker, None
        if worker is not None:
            try:
                worker.wipe()
            finally:
                self.sandbox._release(worker, held=True)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
