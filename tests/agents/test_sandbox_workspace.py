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

from agents.sandbox import DEFAULT_LIMITS, Sandbox, SandboxConfigError, WorkspaceInventory
from agents.sandbox.supervise import tree_pids
from agents.sandbox.workspace import parse_inventory
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
        from agents.sandbox import SandboxResult

        fields = dict(
            stdout=stdout, stderr="", exit_code=0, signal=None, wall_s=0.0, cpu_s=0.0, stop_reason="exited",
            stdout_truncated=False, stderr_truncated=False, stdout_bytes=len(stdout), stderr_bytes=0,
        )  # fmt: skip
        fields.update(kw)
        return SandboxResult(**fields)  # type: ignore[arg-type]

    good = '{"files": {"a.py": 3}, "definitions": {"a": ["f"]}}'
    assert parse_inventory(result(good)).names == ["a.f"]  # type: ignore[arg-type]
    for bad in (
        "",
        "[]",
        '{"files": {"a": -1}, "definitions": {}}',
        '{"files": {}, "definitions": {"a": [1]}}',
    ):
        assert parse_inventory(result(bad)).complete is False  # type: ignore[arg-type]
    assert parse_inventory(result(good, stdout_truncated=True)).complete is False  # type: ignore[arg-type]


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
