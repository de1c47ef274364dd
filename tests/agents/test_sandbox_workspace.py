"""Workspaces, in real processes: one episode's scratch persists from run to run (files, importable
modules, an inventory of what was defined), every run is still a fresh limited process, and nothing
of an episode reaches the next one, even when a step is hostile or kills its worker."""

from __future__ import annotations

import os
import signal
import textwrap
import threading
import time

import pytest

from gf2env.agents.sandbox import DEFAULT_LIMITS, Sandbox, SandboxConfigError, WorkspaceInventory
from gf2env.agents.sandbox.supervise import tree_pids
from gf2env.agents.sandbox.workspace import INVENTORY_ENTRIES, Workspace, parse_inventory
from tests.agents.sandbox_judge import HAVE_BWRAP, MODE_PARAMS, make_sandbox

BUILD = textwrap.dedent(
    """
    source = "def parity(bits):\\n    return sum(bits) % 2\\n\\nclass Table:\\n    pass\\n"
    open("tools.py", "w").write(source)
    import os
    os.makedirs("data", exist_ok=True)
    open("data/cache.txt", "w").write("42")
    print("built")
    """
)
USE = "import tools\nprint(tools.parity([1, 1, 1]), open('data/cache.txt').read(), __import__('os').getpid())"


def servers() -> list[int]:
    """Host pids of this test process's fork servers."""
    return [
        pid
        for pid in tree_pids(os.getpid())
        if pid != os.getpid()
        and open(f"/proc/{pid}/comm").read().strip() != "bwrap"
        and b"\0serve\0" in open(f"/proc/{pid}/cmdline", "rb").read()
    ]


def make(mode: str) -> Sandbox:
    return make_sandbox(DEFAULT_LIMITS, mode, workers=1)


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_a_tool_built_at_one_step_is_imported_at_the_next(mode: str) -> None:
    with make(mode) as sandbox, sandbox.workspace() as workspace:
        assert workspace.inventory() == WorkspaceInventory()
        assert workspace.run(BUILD).stdout == "built\n"
        first = workspace.run(USE)
        second = workspace.run(USE)
        assert first.ok and first.stdout.split()[:2] == ["1", "42"], first.stderr
        assert first.stdout.split()[2] != second.stdout.split()[2]  # each run a fresh process
        inventory = workspace.inventory()
        assert inventory.complete and inventory.files == {"data/cache.txt": 2, "tools.py": 66}
        assert inventory.definitions == {"tools": ["parity", "Table"]}
        assert inventory.names == ["tools.parity", "tools.Table"]
        assert workspace.runs == 3 and workspace.lost == 0  # the inventory is not a step's run


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_nothing_of_an_episode_reaches_the_next(mode: str) -> None:
    hostile = textwrap.dedent(
        """
        import os, stat, sys
        open("tools.py", "w").write("def parity(bits):\\n    return 'POISONED'\\n")
        open("json.py", "w").write("raise SystemExit('shadowed')\\n")
        os.makedirs("locked/deeper")
        open("locked/deeper/f", "w").write("x")
        os.chmod("locked/deeper", 0)
        os.chmod("locked", stat.S_IRUSR | stat.S_IXUSR)
        os.mkfifo("pipe")
        print("planted")
        """
    )
    with make(mode) as sandbox:
        with sandbox.workspace() as workspace:
            assert workspace.run(hostile).stdout == "planted\n"
            assert set(workspace.inventory().files) >= {"tools.py", "json.py", "pipe"}
        with sandbox.workspace() as later:
            look = later.run("import os, json\nprint(sorted(os.listdir('.')), json.dumps(1))")
            assert look.ok and look.stdout == "[] 1\n", look
            assert later.run("import tools").stop_reason == "error"  # no tools module any more
        assert sandbox.workers_started == 1 and sandbox.workers_retired == 0


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_a_workspace_that_loses_its_worker_says_so_and_starts_empty(mode: str) -> None:
    with make(mode) as sandbox, sandbox.workspace() as workspace:
        workspace.run(BUILD)
        (server,) = [
            pid
            for pid in tree_pids(os.getpid())
            if pid != os.getpid()
            and open(f"/proc/{pid}/comm").read().strip() != "bwrap"
            and b"\0serve\0" in open(f"/proc/{pid}/cmdline", "rb").read()
        ]
        os.kill(server, signal.SIGKILL)
        while os.path.exists(f"/proc/{server}") and "Z" not in open(f"/proc/{server}/stat").read().split()[2]:
            time.sleep(0.01)
        again = workspace.run(USE)  # sent to the dead worker, then run on a fresh one
        assert again.stop_reason == "error" and "No module named 'tools'" in again.stderr
        assert workspace.lost == 1 and workspace.inventory().files == {}
        workspace.run(BUILD)
        threading.Timer(0.3, os.kill, (servers()[0], signal.SIGKILL)).start()
        mid = workspace.run("import time\ntime.sleep(3)")  # its worker dies under it
        assert mid.stop_reason == "killed" and workspace.lost == 2
        assert workspace.inventory().files == {}


def test_a_closed_workspace_refuses_runs_and_the_inventory_is_checked() -> None:
    sandbox = make("bwrap" if HAVE_BWRAP else "unsafe")
    workspace = sandbox.workspace()
    workspace.close()
    with pytest.raises(SandboxConfigError, match="workspace is closed"):
        workspace.run("print(1)")
    sandbox.close()
    with sandbox_for_forgery() as forged:
        with forged.workspace() as workspace:
            workspace.run("open('ast.py', 'w').write('raise SystemExit(\"x\")')")
            assert workspace.inventory().files == {"ast.py": 21}  # a module named ast cannot answer


def sandbox_for_forgery() -> Sandbox:
    return make("bwrap" if HAVE_BWRAP else "unsafe")


def test_parse_inventory_refuses_what_is_not_an_inventory() -> None:
    def result(stdout: str, **kw: object) -> object:
        from gf2env.agents.sandbox import SandboxResult

        fields = dict(
            stdout=stdout, stderr="", exit_code=0, signal=None, wall_s=0.0, cpu_s=0.0, stop_reason="exited",
            stdout_truncated=False, stderr_truncated=False, stdout_bytes=len(stdout), stderr_bytes=0,
        )  # fmt: skip
        fields.update(kw)
        return SandboxResult(**fields)  # type: ignore[arg-type]

    good = '{"files": {"a.py": 3}, "definitions": {"a": ["f"]}, "complete": true}'
    assert parse_inventory(result(good)) == WorkspaceInventory({"a.py": 3}, {"a": ["f"]}, True)  # type: ignore[arg-type]
    partial = parse_inventory(result(good.replace("true", "false")))  # type: ignore[arg-type]
    assert partial.names == ["a.f"] and partial.complete is False  # what was listed is kept
    unsaid = parse_inventory(result('{"files": {"a.py": 3}, "definitions": {"a": ["f"]}}'))  # type: ignore[arg-type]
    assert unsaid.names == ["a.f"] and unsaid.complete is False  # complete only when it says so
    for bad in (
        "",
        "[]",
        "[" * 50_000,
        '{"files": {"a": -1}, "definitions": {}, "complete": true}',
        '{"files": {"a": true}, "definitions": {}, "complete": true}',
        '{"files": {"\\udc80": 1}, "definitions": {}, "complete": true}',
        '{"files": {}, "definitions": {"a": [1]}, "complete": true}',
        '{"files": {"a.py": 1}, "definitions": {"a": ["no such"]}, "complete": true}',
        '{"files": {}, "definitions": {"a": ["f"]}, "complete": true}',  # a module without its file
        '{"files": {}, "definitions": {}, "complete": 1}',
        '{"files": {}, "definitions": {}, "complete": "yes"}',
    ):
        assert parse_inventory(result(bad)) == WorkspaceInventory(complete=False), bad  # type: ignore[arg-type]
    assert parse_inventory(result(good, stdout_truncated=True)).complete is False  # type: ignore[arg-type]
    assert parse_inventory(result(good, stop_reason="timeout")).complete is False  # type: ignore[arg-type]


def test_open_workspaces_never_wait_on_each_other() -> None:
    """More workspaces than workers (one thread, as TRL steps its environments): each gets a worker,
    and the extra ones stop when their workspaces close."""
    with make("bwrap" if HAVE_BWRAP else "unsafe") as sandbox:
        spaces = [sandbox.workspace() for _ in range(3)]
        for i, space in enumerate(spaces):
            assert space.run(f"open('mine', 'w').write('{i}')").ok
        for i, space in enumerate(spaces):
            assert space.run("print(open('mine').read())").stdout == f"{i}\n"
        assert len(servers()) == 3 and sandbox.run("print(1)").stdout == "1\n"  # a plain run too
        for space in spaces:
            space.close()
        assert len(servers()) == 1 and sandbox.workers_retired == 0


# ---------------------------------------------------------------------------- a hostile scratch
# Each planted by a run of the workspace (the model's code may leave anything there); each inventory
# must come back within 1 s, measured here, and list only what ``import`` in a fresh run would give.
PARITY = "open('tools.py', 'w').write('def parity(bits):\\n    return sum(bits) % 2\\n')\n"


def inventory_within_1s(workspace: Workspace) -> WorkspaceInventory:
    """The workspace's inventory, which comes back within 1 s whatever its scratch holds, and
    agrees with what importing each module it lists gives a later run."""
    start = time.monotonic()
    inventory = workspace.inventory()
    elapsed = time.monotonic() - start
    assert elapsed < 1.0, f"the inventory took {elapsed:.3f} s"
    for module, names in inventory.definitions.items():
        assert set(names) <= set(imported(workspace, module) or ()), (module, names)
    return inventory


def imported(workspace: Workspace, module: str) -> list[str] | None:
    """The public names ``import module`` gives a fresh run of the workspace (None: it fails)."""
    code = f"import importlib\nm = importlib.import_module({module!r})\nprint(*sorted(vars(m)))"
    result = workspace.run(code)
    return [name for name in result.stdout.split() if not name.startswith("_")] if result.ok else None


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_a_fifo_named_like_a_module_is_listed_never_opened(mode: str) -> None:
    plant = "import os\nos.mkfifo('tools.py')\nopen('other.py', 'w').write('def helper():\\n    pass\\n')"
    with make(mode) as sandbox, sandbox.workspace() as workspace:
        assert workspace.run(plant).ok
        inventory = inventory_within_1s(workspace)
        assert inventory.files == {"tools.py": 0, "other.py": 23}
        assert inventory.definitions == {"other": ["helper"]}
        assert imported(workspace, "tools") is None  # no module in a FIFO: nothing left undecided
        assert inventory.complete


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_a_package_shadows_the_module_of_its_name(mode: str) -> None:
    plant = PARITY + textwrap.dedent(
        """
        import os
        os.mkdir("tools")
        open("tools/__init__.py", "w").write("def other():\\n    return 2\\n")
        os.mkdir("plain.dir")  # no package: import splits names at dots
        open("plain.dir/mod.py", "w").write("def unreachable():\\n    pass\\n")
        open("json.py", "w").write("def dumps():\\n    pass\\n")  # the worker's own json answers
        """
    )
    with make(mode) as sandbox, sandbox.workspace() as workspace:
        assert workspace.run(plant).ok
        inventory = inventory_within_1s(workspace)
        assert imported(workspace, "tools") == ["other"]
        assert "tools.parity" not in inventory.names and "tools" not in inventory.definitions
        assert inventory.definitions == {"tools.__init__": ["other"]}  # the package's own source
        assert set(inventory.files) == {"tools.py", "tools/__init__.py", "plain.dir/mod.py", "json.py"}
        assert inventory.complete


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_bytecode_and_extension_modules_are_not_taken_for_the_source(mode: str) -> None:
    plant = PARITY + textwrap.dedent(
        """
        import os, py_compile
        for name, defined in (("helper", "secret"), ("tools", "other")):
            open("src.py", "w").write(f"def {defined}():\\n    pass\\n")
            py_compile.compile("src.py", cfile=f"{name}.pyc", doraise=True)
        os.remove("src.py")
        """
    )
    extension = "open('tools.cpython-311-x86_64-linux-gnu.so', 'wb').write(b'\\x7fELF')"
    with make(mode) as sandbox, sandbox.workspace() as workspace:
        assert workspace.run(plant).ok
        inventory = inventory_within_1s(workspace)
        assert imported(workspace, "tools") == ["parity"]  # the source comes before tools.pyc
        assert imported(workspace, "helper") == ["secret"]  # a module without a source to read
        assert inventory.definitions == {"tools": ["parity"]} and not inventory.complete
        assert workspace.run(extension).ok
        inventory = inventory_within_1s(workspace)
        assert imported(workspace, "tools") is None  # the finder takes the extension first
        assert "tools" not in inventory.definitions and not inventory.complete
        assert "tools.cpython-311-x86_64-linux-gnu.so" in inventory.files


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_bytecode_in_pycache_never_makes_the_listing_untrue(mode: str) -> None:
    plant = PARITY + textwrap.dedent(
        """
        import os, py_compile, sys
        os.mkdir("__pycache__")
        open("src.py", "w").write("def other():\\n    return 'POISONED'\\n")
        cfile = f"__pycache__/tools.{sys.implementation.cache_tag}.pyc"
        unchecked = py_compile.PycInvalidationMode.UNCHECKED_HASH  # used whatever the source says
        py_compile.compile("src.py", cfile, doraise=True, invalidation_mode=unchecked)
        os.remove("src.py")
        """
    )
    with make(mode) as sandbox, sandbox.workspace() as workspace:
        assert workspace.run(plant).ok
        inventory = inventory_within_1s(workspace)
        if imported(workspace, "tools") == ["other"]:  # runs read __pycache__: the bytecode answers
            assert "tools" not in inventory.definitions and not inventory.complete
        else:  # runs ignore __pycache__: the source is what runs
            assert imported(workspace, "tools") == ["parity"]
            assert inventory.definitions == {"tools": ["parity"]}


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_a_tree_deeper_than_path_max_is_said_incomplete(mode: str) -> None:
    plant = PARITY + textwrap.dedent(
        """
        import os
        for _ in range(20):  # 20 * 251 characters: beyond PATH_MAX (4096) from the scratch
            os.mkdir("d" * 250)
            os.chdir("d" * 250)
        open("deep.py", "w").write("def deep():\\n    pass\\n")
        """
    )
    with make(mode) as sandbox, sandbox.workspace() as workspace:
        assert workspace.run(plant).ok
        inventory = inventory_within_1s(workspace)
        assert inventory.files == {"tools.py": 43} and inventory.definitions == {"tools": ["parity"]}
        assert not inventory.complete


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_too_many_files_are_said_incomplete(mode: str) -> None:
    plant = "import os\nfor i in range(5000):\n    os.close(os.open(f'f{i}', os.O_CREAT | os.O_WRONLY))"
    with make(mode) as sandbox, sandbox.workspace() as workspace:
        assert workspace.run(plant).ok
        inventory = inventory_within_1s(workspace)
        assert 0 < len(inventory.files) <= INVENTORY_ENTRIES and not inventory.complete


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_sources_too_big_or_too_slow_to_parse_are_said_incomplete(mode: str) -> None:
    big = PARITY + "open('tools.py', 'a').write('x = 1\\n' * 200_000)"  # over 1 MiB: never read
    slow = "open('tools.py', 'w').write('x = f\"' + '{x}' * 70_000 + '\"\\n')"  # seconds to parse
    with make(mode) as sandbox, sandbox.workspace() as workspace:
        assert workspace.run(big).ok
        inventory = inventory_within_1s(workspace)
        assert inventory.files == {"tools.py": 43 + 1_200_000} and inventory.definitions == {}
        assert not inventory.complete
        assert workspace.run(slow).ok
        inventory = inventory_within_1s(workspace)
        assert inventory.definitions == {} and not inventory.complete
