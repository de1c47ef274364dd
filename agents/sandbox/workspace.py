"""A workspace: one episode's runs on one warm worker whose scratch persists from run to run, so that
code can build a tool (a file, a module) at one step and import or call it at a later one.

Every run is still a fresh, limited process behind every layer of :mod:`gf2env.agents.sandbox.sandbox`; only
the scratch carries over (``/scratch`` is also first on ``sys.path``, so ``import tools`` finds
``/scratch/tools.py``). When the workspace closes, the scratch is emptied and the worker goes back
to the Sandbox (or is replaced where that fails), so nothing reaches the next episode.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from gf2env.agents.sandbox.errors import SandboxConfigError, SandboxUnavailableError
from gf2env.agents.sandbox.limits import SandboxLimits, SandboxResult
from gf2env.agents.sandbox.view import record_view
from gf2env.agents.sandbox.workers import ATTEMPTS, Worker, WorkerGoneError

if TYPE_CHECKING:
    from gf2env.records.record import Record


class WorkerSource(Protocol):
    """What a workspace needs of its :class:`~gf2env.agents.sandbox.Sandbox`: its limits, a run's checked
    inputs, and a worker to hold for the episode and give back."""

    limits: SandboxLimits

    def _job(
        self, code: str, view: dict[str, Any] | None, limits: SandboxLimits | None
    ) -> tuple[bytes, str, SandboxLimits]: ...

    def _acquire(self, beyond_workers: bool = False) -> Worker: ...

    def _release(self, worker: Worker, held: bool = False) -> None: ...


INVENTORY_WALL_S = 0.8  # the inventory run's wall clock at most: a call returns within 1 s
INVENTORY_DEADLINE_S = 0.5  # the inventory's own clock: past it, it stops and says it is incomplete
INVENTORY_ENTRIES = 2000  # files and directories listed at most
INVENTORY_FILE_BYTES = 1 << 20  # source read and parsed at most, a module
INVENTORY_TOTAL_BYTES = 4 << 20  # and in all
# about what compiling to an AST costs here: a parse that would run past the deadline is not begun
# (it cannot be interrupted; the run's wall clock would end it, and the whole inventory with it)
INVENTORY_PARSE_S_PER_BYTE = 2e-6

# Run in the workspace like any code (a fresh, limited process, under hostile-code conditions: the
# scratch holds whatever earlier runs left there). It lists the scratch without following a link and
# reads only regular files, without blocking (os.open with O_NOFOLLOW | O_NONBLOCK, then fstat), within
# the caps above; and lists a module's top-level functions and classes only where ``import`` in a
# fresh run loads exactly that source: the spec is found as the import system finds it, executing
# nothing (modules the worker already holds, then each finder of sys.meta_path, the scratch first on
# the path, a submodule in its parent package's locations), and must be a SourceFileLoader's whose
# origin is that regular file. Whatever it cannot decide (a module from bytecode or an extension, a
# link, an unreadable directory, a path beyond PATH_MAX, a cap or the deadline reached) makes it
# report "complete": false. The workspace's own modules go off sys.path first, so a file named ast.py
# or json.py cannot answer for the inventory's imports.
INVENTORY_CODE = (
    f"""\
import sys
scratch = sys.path.pop(0)
loaded = set(sys.modules)  # what a fresh run's import takes from the worker, not from the scratch
DEADLINE_S, ENTRIES = {INVENTORY_DEADLINE_S}, {INVENTORY_ENTRIES}
FILE_BYTES, TOTAL_BYTES = {INVENTORY_FILE_BYTES}, {INVENTORY_TOTAL_BYTES}
PARSE_S_PER_BYTE = {INVENTORY_PARSE_S_PER_BYTE}
"""
    + """\
import ast, json, os, stat, time
from importlib.machinery import PathFinder, SourceFileLoader, all_suffixes
from importlib.util import cache_from_source

deadline = time.monotonic() + DEADLINE_S
files, definitions, complete = {}, {}, True
modes, partial, stack = {}, None, [""]  # every entry listed (path -> lstat mode); a dir listed in part
while stack and partial is None:
    if time.monotonic() > deadline:
        complete = False
        break
    top, listed, subdirs = stack.pop(), [], []
    try:
        with os.scandir(top or ".") as entries:
            for entry in entries:
                if len(modes) + len(listed) >= ENTRIES or time.monotonic() > deadline:
                    partial, complete = top, False
                    break
                try:
                    listed.append((entry.name, entry.stat(follow_symlinks=False)))
                except OSError:
                    complete = False
    except OSError:  # unreadable, gone, or deeper than PATH_MAX
        complete = False
        continue
    for name, st in sorted(listed, key=lambda item: item[0]):
        path = f"{top}/{name}" if top else name
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:  # no JSON reader downstream takes it
            complete = False
            continue
        modes[path] = st.st_mode
        if stat.S_ISDIR(st.st_mode):
            subdirs.append(path)
        else:
            files[path] = st.st_size
    stack.extend(reversed(subdirs))

found = {}  # module -> (origin, loader, submodule search locations); None: no such module; False: unknown


def find(name):
    if name in loaded:  # a fresh run gets the worker's own module, whatever the scratch holds
        return None, None, getattr(sys.modules[name], "__path__", None)
    parent, path = name.rpartition(".")[0], None
    if parent:
        if not found[parent]:
            return found[parent]
        path = found[parent][2]
        if path is None:  # not a package
            return None
    stub = parent and parent not in sys.modules
    if stub:  # a run imports the parent first; a namespace package's path looks it up there
        sys.modules[parent] = type(sys)(parent)
        sys.modules[parent].__path__ = path
    try:
        for finder in sys.meta_path:
            where = path if parent else [scratch, *sys.path] if finder is PathFinder else None
            spec = finder.find_spec(name, where)
            if spec is not None:
                locations = spec.submodule_search_locations
                origin = spec.origin if spec.has_location else None
                return origin, spec.loader, None if locations is None else list(locations)
        return None
    finally:
        if stub:
            del sys.modules[parent]


def resolve(name):
    todo = [name]
    while "." in todo[-1] and todo[-1].rpartition(".")[0] not in found:
        todo.append(todo[-1].rpartition(".")[0])
    for each in reversed(todo):
        try:
            found[each] = find(each)
        except Exception:
            found[each] = False
    return found[name]


def has_bytecode(source):
    # The loader runs the bytecode at cache_from_source(source) instead of the source when that is
    # valid. The harness points sys.pycache_prefix at a directory that does not exist, so a
    # __pycache__ beside a module is never read and the source is what runs: cache_from_source follows
    # that setting as the run's own loader does, so the module is listed. Should a run ever read
    # __pycache__ again, a file planted there makes the module undecided here, never silently listed.
    try:
        os.lstat(cache_from_source(source))
    except (FileNotFoundError, NotADirectoryError):
        return False
    except Exception:
        return True
    return True


def read(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = b""
        while len(data) <= FILE_BYTES and (chunk := os.read(fd, FILE_BYTES + 1 - len(data))):
            data += chunk
        return data if len(data) <= FILE_BYTES else None
    except OSError:
        return None
    finally:
        os.close(fd)


suffixes = sorted(all_suffixes(), key=len, reverse=True)
kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
parsed, handled, elsewhere = 0, set(), set()
for path, mode in modes.items():
    if time.monotonic() > deadline:
        complete = False
        break
    head, _, tail = path.rpartition("/")
    leaf = next((tail[: -len(suffix)] for suffix in suffixes if tail.endswith(suffix)), None)
    if leaf is None and (stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
        leaf = tail  # a package, or a link that may be one
    if not leaf or "." in leaf or "." in head or (partial is not None and head == partial):
        continue  # no module of this name (import splits names at dots), or a dir listed in part
    name = f"{head}/{leaf}".replace("/", ".") if head else leaf
    spec = resolve(name)
    own = os.path.join(scratch, path)
    if spec is False:
        complete = False
        continue
    if spec is None or spec[0] is None:
        continue  # no module, or none with a file: built in, the worker's own, a namespace package
    if spec[0] != own:
        if spec[0].startswith(scratch + os.sep):
            elsewhere.add(spec[0])  # another file of the scratch: decided at its own entry
        continue
    handled.add(own)
    if type(spec[1]) is not SourceFileLoader or not stat.S_ISREG(mode) or has_bytecode(own):
        complete = False  # bytecode, an extension, a link: what it defines is not read from a source
        continue
    size = files[path]
    if (
        size > FILE_BYTES
        or parsed + size > TOTAL_BYTES
        or size * PARSE_S_PER_BYTE > deadline - time.monotonic()
    ):
        complete = False
        continue
    source = read(path)
    if source is None:
        complete = False
        continue
    parsed += len(source)
    try:
        tree = compile(source, own, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError):  # import fails on it as well: it defines nothing
        continue
    except (RecursionError, MemoryError):
        complete = False
        continue
    definitions[name] = [node.name for node in tree.body if isinstance(node, kinds)]
if elsewhere - handled:
    complete = False
print(json.dumps({"files": files, "definitions": definitions, "complete": complete}))
"""
)


@dataclass(frozen=True)
class WorkspaceInventory:
    """What a workspace holds: its files (path -> bytes; links and other non-regular entries by their
    own size, never followed or read) and, per Python module in it, the top-level functions and
    classes, listed only where ``import`` loads exactly that source. ``complete`` is False when
    something could not be listed or decided (caps, the deadline, unreadable or non-source modules);
    what is listed is true all the same. It is produced inside the sandbox, so it is checked like any
    output of the code."""

    files: dict[str, int] = field(default_factory=dict)
    definitions: dict[str, list[str]] = field(default_factory=dict)
    complete: bool = True

    @property
    def names(self) -> list[str]:
        """``module.name`` for every function and class defined in the workspace."""
        return [f"{module}.{name}" for module, names in self.definitions.items() for name in names]


def _text(value: object) -> bool:
    """A str that encodes as UTF-8 (JSON carries lone surrogates, which no log or prompt takes)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_inventory(result: SandboxResult) -> WorkspaceInventory:
    """The inventory a run of :data:`INVENTORY_CODE` printed, checked field by field (anything
    malformed: an empty inventory, incomplete; no ``complete`` field: incomplete)."""
    try:
        data = json.loads(result.stdout) if result.ok and not result.stdout_truncated else None
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        return WorkspaceInventory(complete=False)
    files, definitions, complete = data.get("files"), data.get("definitions"), data.get("complete", False)
    if not (
        isinstance(complete, bool)
        and isinstance(files, dict)
        and all(_text(k) and type(v) is int and v >= 0 for k, v in files.items())
        and isinstance(definitions, dict)
        and all(
            isinstance(k, str)
            and f"{k.replace('.', '/')}.py" in files
            and isinstance(v, list)
            and all(isinstance(n, str) and n.isidentifier() for n in v)
            for k, v in definitions.items()
        )
    ):
        return WorkspaceInventory(complete=False)
    return WorkspaceInventory(files=files, definitions=definitions, complete=complete)


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
        """What the workspace holds now (an empty one before its first run), within about 1 s: it
        runs under the Sandbox's limits with a wall clock of at most :data:`INVENTORY_WALL_S` and
        without the protocol's ``imports``/``denied_builtins`` (rules for the model's code, not
        isolation layers); a run that does not finish gives an incomplete, empty inventory."""
        if self.worker is None:
            return WorkspaceInventory()
        limits = self.sandbox.limits
        limits = replace(
            limits, wall_s=min(limits.wall_s, INVENTORY_WALL_S), imports=None, denied_builtins=()
        )
        return parse_inventory(self._run(INVENTORY_CODE, None, limits))

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
