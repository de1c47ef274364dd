"""Warm sandbox workers, in real processes: reuse, a fresh process and an empty scratch for every run,
no run poisoning the next, workers that die or hang replaced, nothing left after close or after the
host dies, and per-run limits."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from gf2env.agents.sandbox import DEFAULT_LIMITS, Sandbox, SandboxConfigError, SandboxLimits
from gf2env.agents.sandbox.isolation import HOST_UID_BASE, HOST_UID_ENV, WORKER_UID, host_uid
from gf2env.agents.sandbox.limits import SCRATCH_INODES
from gf2env.agents.sandbox.supervise import tree_pids
from tests.agents.sandbox_judge import HAVE_BWRAP, INFO, MODE_PARAMS, MODES, make_sandbox, needs_bwrap
from tests.paths import REPO


def make(mode: str, workers: int, limits: SandboxLimits = DEFAULT_LIMITS) -> Sandbox:
    return make_sandbox(limits, mode, workers)


def descendants() -> list[int]:
    return [pid for pid in tree_pids(os.getpid()) if pid != os.getpid()]


def servers() -> list[int]:
    """Host pids of this test process's fork servers."""
    found = []
    for pid in descendants():
        try:
            is_bwrap = Path(f"/proc/{pid}/comm").read_text().strip() == "bwrap"
            if b"\0serve\0" in Path(f"/proc/{pid}/cmdline").read_bytes() and not is_bwrap:
                found.append(pid)
        except OSError:
            pass
    return found


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_runs_reuse_one_worker_with_a_fresh_process_and_an_empty_scratch(mode: str) -> None:
    dirty = textwrap.dedent(
        """
        import os, stat
        os.makedirs("deep/er", exist_ok=True)
        open("deep/er/f", "w").write("x")
        os.chmod("deep/er", 0)
        os.chmod("deep", stat.S_IRUSR | stat.S_IXUSR)
        os.mkfifo("fifo")
        os.symlink("/etc/passwd", "link")
        open("/tmp/t", "w").write("t")
        import numpy as np
        print(os.getpid(), np.random.randint(1 << 30), sorted(os.listdir(".")))
        """
    )
    look = "import os, numpy as np\n"
    look += "print(os.getpid(), np.random.randint(1 << 30), os.listdir('.'), os.listdir('/tmp'))"
    with make(mode, workers=1) as sandbox:
        first = sandbox.run(dirty)
        assert first.ok, first.stderr
        second = sandbox.run(look)
        assert second.ok, second.stderr
        pid1, draw1, _ = first.stdout.split(" ", 2)
        pid2, draw2, listing = second.stdout.split(" ", 2)
        assert pid1 != pid2 and draw1 != draw2  # a fresh process, and numpy's generator drawn afresh
        if mode == "bwrap":
            assert listing.strip() == "[] []"  # /scratch and /tmp (the same tmpfs) wiped
        else:
            assert listing.startswith("[]")  # the UNSAFE mode's /tmp is the host's
        assert sandbox.workers_started == 1 and sandbox.workers_retired == 0


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_a_run_cannot_poison_the_worker_for_the_next(mode: str) -> None:
    hostile = textwrap.dedent(
        """
        import fcntl, os, resource, signal
        parent = os.getppid()
        attempts = {
            "prlimit": lambda: resource.prlimit(parent, resource.RLIMIT_NOFILE, (3, 3)),
            "setpriority": lambda: os.setpriority(os.PRIO_PROCESS, parent, 19),
            "setpriority_user": lambda: os.setpriority(os.PRIO_USER, 0, 19),
            "sched_setaffinity": lambda: os.sched_setaffinity(parent, {0}),
            "kill_parent": lambda: os.kill(parent, signal.SIGKILL),
            "kill_group": lambda: os.kill(0, signal.SIGKILL),
            "kill_all": lambda: os.kill(-1, signal.SIGKILL),
            "sigio_owner": lambda: fcntl.fcntl(os.pipe()[0], fcntl.F_SETOWN, parent),
            "memfd": lambda: os.memfd_create("keep"),
            "proc_mem": lambda: open(f"/proc/{parent}/mem", "rb"),
            "proc_fd": lambda: [os.open(f"/proc/{parent}/fd/{n}", 0) for n in "0123"],
            "proc_environ": lambda: open(f"/proc/{parent}/environ", "rb").read(),
        }
        for name, attempt in attempts.items():
            try:
                attempt()
                print(name, "ALLOWED")
            except OSError as err:
                print(name, "refused", err.errno)
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        print("shmget", libc.shmget(0x4711, 4096, 0o1666), ctypes.get_errno())
        print("mq_open", libc.syscall(240, b"/q", 0o100 | 2, 0o600, None), ctypes.get_errno())
        """
    )
    after = "import numpy as np\nfiles = [open('/dev/null') for _ in range(50)]\n"
    after += "print(np.ones(3).sum(), len(files))"
    with make(mode, workers=1) as sandbox:
        result = sandbox.run(hostile)
        assert result.ok, result.stderr
        lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
        assert "ALLOWED" not in result.stdout, result.stdout
        assert set(lines) >= {"prlimit", "kill_parent", "sigio_owner", "memfd", "proc_mem", "proc_fd"}
        assert lines["shmget"] == "-1 1" and lines["mq_open"] == "-1 1"  # EPERM
        following = sandbox.run(after)
        assert following.ok and following.stdout.strip() == "3.0 50", following
        assert sandbox.workers_started == 1 and sandbox.workers_retired == 0


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_a_hung_worker_is_killed_and_replaced(mode: str) -> None:
    with make(mode, workers=1) as sandbox:
        sandbox.start()
        (server,) = servers()
        os.kill(server, signal.SIGSTOP)  # it can neither start the next run nor report it
        started = time.monotonic()
        result = sandbox.run("print('elsewhere')")
        assert result.ok and result.stdout == "elsewhere\n"  # it never started there: sent on
        assert time.monotonic() - started < 3.0 + 2.0  # the worker's time to start it, then a new one
        assert sandbox.workers_retired == 1 and server not in descendants()
        (server,) = servers()
        limits = dataclasses.replace(sandbox.limits, wall_s=0.5)
        threading.Timer(0.2, os.kill, (server, signal.SIGSTOP)).start()  # hung mid-run
        started = time.monotonic()
        hung = sandbox.run("import time\nprint('begun', flush=True)\ntime.sleep(10)", limits=limits)
        assert hung.stop_reason == "timeout" and hung.stdout == "begun\n"
        assert time.monotonic() - started < 0.5 + 2.0 + 1.0
        assert sandbox.workers_retired == 2 and sandbox.run("print('again')").stdout == "again\n"


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_a_worker_dying_mid_run_is_reported_and_replaced(mode: str) -> None:
    with make(mode, workers=1) as sandbox:
        sandbox.start()
        (server,) = servers()
        threading.Timer(0.5, os.kill, (server, signal.SIGKILL)).start()
        result = sandbox.run("import time\nprint('started', flush=True)\ntime.sleep(3)")
        assert result.stop_reason == "killed" and result.stdout == "started\n"
        assert result.wall_s < 2.0  # the run's process died with its worker
        assert sandbox.run("print(1)").ok and sandbox.workers_retired == 1


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_close_leaves_nothing_and_refuses_later_runs(mode: str) -> None:
    before = set(descendants())
    sandbox = make(mode, workers=2)
    sandbox.start()
    assert len(servers()) == 2
    assert sandbox.run("print(1)").ok
    sandbox.close()
    assert set(descendants()) <= before
    with pytest.raises(SandboxConfigError, match="closed"):
        sandbox.run("print(1)")


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_workers_die_with_the_host(mode: str, tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import json, os, sys, warnings
        warnings.simplefilter("ignore")
        from gf2env.agents.sandbox import Sandbox
        from gf2env.agents.sandbox.supervise import tree_pids
        sandbox = Sandbox(isolation={MODES[mode]!r}, workers=2)
        sandbox.start()
        assert sandbox.run("print(1)").ok
        print(json.dumps([p for p in tree_pids(os.getpid()) if p != os.getpid()]), flush=True)
        sys.stdin.read()
        """
    )
    host = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert host.stdout is not None
    pids = json.loads(host.stdout.readline())
    assert len(pids) >= 2
    host.kill()
    host.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in pids):
        time.sleep(0.05)
    alive = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    assert not alive, f"workers outlived their host: {alive}"


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_limits_per_run(mode: str) -> None:
    with make(mode, workers=1) as sandbox:
        quick = dataclasses.replace(sandbox.limits, wall_s=0.3)
        started = time.monotonic()
        result = sandbox.run("while True: pass", limits=quick)
        assert result.stop_reason == "timeout" and time.monotonic() - started < 1.5
        assert 0.3 <= result.wall_s < 1.0  # the worker's clock: a timed-out run took its whole wall
        assert sandbox.run("import time; time.sleep(0.5); print('slow')").ok  # the Sandbox's own wall
        strict = dataclasses.replace(sandbox.limits, imports=("math",))
        refused = sandbox.run("import os", limits=strict)
        assert refused.stop_reason == "error" and "not allowed" in refused.stderr
        with pytest.raises(SandboxConfigError, match="scratch_mb"):
            sandbox.run("pass", limits=SandboxLimits(scratch_mb=8))
        with pytest.raises(SandboxConfigError, match="must be a SandboxLimits"):
            sandbox.run("pass", limits={"wall_s": 1})  # type: ignore[arg-type]


def test_the_budget_is_the_whole_tree() -> None:
    """A memory bomb's whole-tree peak (worker + run, as the result reports it and as the host's
    /proc says) stays within memory_mb; a budget too small for the worker is refused by name."""
    with make("bwrap" if HAVE_BWRAP else "unsafe", workers=1) as sandbox:
        result = sandbox.run("hoard = []\nwhile True: hoard.append(bytearray(10**6))")
        assert result.stop_reason == "memory_limit" and "MemoryError" in result.stderr
        assert 500 < result.memory_mb <= sandbox.limits.memory_mb
        tight = dataclasses.replace(sandbox.limits, memory_mb=256)
        small = sandbox.run("hoard = []\nwhile True: hoard.append(bytearray(10**6))", limits=tight)
        assert small.stop_reason == "memory_limit" and small.memory_mb <= 256
    with make("unsafe", workers=1, limits=SandboxLimits(memory_mb=256, scratch_mb=200)) as sandbox:
        assert sandbox.run("print(1)").ok  # UNSAFE's scratch is a host directory: not in the budget
    if HAVE_BWRAP:
        with make("bwrap", workers=1, limits=SandboxLimits(memory_mb=256, scratch_mb=200)) as sandbox:
            with pytest.raises(SandboxConfigError, match=r"memory_mb=256: .* raise memory_mb to at least"):
                sandbox.run("print(1)")


@pytest.mark.skipif(not INFO["memory_cgroup"], reason=f"no memory cgroup: {INFO['memory_cgroup_error']}")
def test_a_memory_cgroup_holds_each_worker_and_counts_its_scratch() -> None:
    with make("bwrap" if HAVE_BWRAP else "unsafe", workers=1) as sandbox:
        assert f"memory-{INFO['memory_cgroup']}" in sandbox.layers
        fill = "for i in range(4):\n    open(f'f{i}', 'wb').write(bytes(15 << 20))"
        result = sandbox.run(fill)
        assert result.ok, result.stderr
        (worker,) = sandbox._all
        assert worker.cgroup is not None
        members = {int(pid) for pid in Path(worker.cgroup.procs).read_text().split()}
        assert members and members <= set(descendants())  # the whole worker, and only it
        if sandbox.isolation == "bwrap":  # the tmpfs scratch is memory: the cgroup counts it
            assert result.memory_mb >= 60 + worker.overhead_mb * 0.5
        small = dataclasses.replace(sandbox.limits, memory_mb=512)
        assert sandbox.run("print(1)", limits=small).ok
        assert worker.cgroup_limit_mb == 512 and worker.cgroup.peak_mb() <= 512
        path = worker.cgroup.path
    assert not path.exists()  # removed with its worker


FLOOD = textwrap.dedent(
    """
    import os, time
    end, made = time.monotonic() + 1.0, 0
    try:
        while time.monotonic() < end:
            open(f"f{made}", "w").close()
            made += 1
    finally:
        print(made)
    """
)
DEEP = "import os\nfor _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\nprint('deep')"
LIST = "import os\nprint(os.listdir('.'))"


def test_a_scratch_full_of_files_slows_neither_its_run_nor_the_next_unsafe() -> None:
    """The run's report comes before the wipe, and the next run's clock starts when its process
    does; a scratch that cannot be emptied (too deep) sends the next run to a fresh worker."""
    with make("unsafe", workers=1) as sandbox:
        started = time.monotonic()
        flooded = sandbox.run(FLOOD)
        assert flooded.ok and int(flooded.stdout) > 1000 and time.monotonic() - started < 2.0
        after = sandbox.run(LIST)
        assert after.stdout == "[]\n" and after.wall_s < 1.0
        assert sandbox.run(DEEP).stdout == "deep\n"
        assert sandbox.run(LIST).stdout == "[]\n"  # on a fresh worker
        assert sandbox.workers_retired == 1 and sandbox.workers_started == 2


@needs_bwrap
def test_a_scratch_holds_so_many_files_and_each_run_gets_a_new_one() -> None:
    """Under bwrap each run's scratch is a new tmpfs of SCRATCH_INODES inodes: a flood of files stops
    there (ENOSPC, not a slow wipe), and neither a flood nor a tree too deep to wipe reaches the next
    run, which starts on the same worker at once."""
    with make("bwrap", workers=1) as sandbox:
        started = time.monotonic()
        flooded = sandbox.run(FLOOD)
        assert "No space left on device" in flooded.stderr, flooded
        assert int(flooded.stdout) == SCRATCH_INODES - 1  # the root directory is one of them
        assert time.monotonic() - started < 2.0
        after = sandbox.run(LIST)
        assert after.stdout == "[]\n" and after.wall_s < 1.0
        assert sandbox.run(DEEP).stdout == "deep\n"
        assert sandbox.run(LIST).stdout == "[]\n"
        assert sandbox.workers_retired == 0 and sandbox.workers_started == 1


@pytest.mark.skipif(not INFO["memory_cgroup"], reason=f"no memory cgroup: {INFO['memory_cgroup_error']}")
def test_groups_of_killed_hosts_are_removed_and_joining_is_checked() -> None:
    from gf2env.agents.sandbox import cgroups

    version = str(INFO["memory_cgroup"])
    live = cgroups.MemoryCgroup(version, 64)
    dead_pid = subprocess.run(["/bin/sh", "-c", "echo $$"], capture_output=True, text=True).stdout.strip()
    stale = live.path.parent / f"gf2-sandbox-{dead_pid}-7"
    stale.mkdir()
    cgroups.cgroup_support.cache_clear()
    assert cgroups.cgroup_support() == (version, "")  # it made a group and moved a process into it
    assert not stale.exists() and live.path.exists()  # this process's own group stays
    live.remove()
    assert not live.path.exists()


def host_ids(pid: int) -> tuple[list[int], list[int]]:
    """A process's (real, effective, saved, fs) uids and gids as the host sees them."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("Uid:", "Gid:")):
            fields[line[:3]] = [int(v) for v in line.split()[1:]]
    return fields["Uid"], fields["Gid"]


@needs_bwrap
def test_no_process_of_a_jail_is_host_root_and_its_server_is_closed_to_runs() -> None:
    """Every process below the wrapper (bwrap, the fork server, a run) has the jail's host uid: on a
    root host the sandbox's own, else this user's; the fork server is the jail's pid 1, and a run
    cannot open its memory or descriptors, nor make itself dumpable."""
    root = os.geteuid() == 0
    probe = textwrap.dedent(
        """
        import ctypes, os
        print(os.getpid() != 1, open("/proc/1/cmdline").read().split("\\0")[4])
        for path in ("/proc/1/mem", "/proc/1/fd/0", "/proc/1/environ"):
            try:
                open(path, "rb").read(1)
                print("opened", path)
            except OSError as err:
                print(type(err).__name__)
        print(ctypes.CDLL(None, use_errno=True).prctl(4, 1, 0, 0, 0), ctypes.get_errno())
        import time; time.sleep(0.5)
        """
    )
    with make("bwrap", workers=1) as sandbox:
        sandbox.start()
        result: list = []
        thread = threading.Thread(target=lambda: result.append(sandbox.run(probe)))
        thread.start()
        time.sleep(0.15)
        jailed = {pid: host_ids(pid) for pid in descendants()}
        thread.join()
        assert len(jailed) >= 3  # bwrap, the server, the run (the wrapper became bwrap)
        (worker,) = sandbox._all
        expected = HOST_UID_BASE + worker.proc.pid if root else os.geteuid()
        for pid, (uids, gids) in jailed.items():
            assert set(uids) == {expected} and set(gids) == {expected}, (pid, uids, gids)
        run = result[0]
        assert run.ok and run.stdout.splitlines() == [
            "True /sandbox/harness.py",
            "PermissionError",
            "PermissionError",
            "PermissionError",
            "-1 1",
        ], run


def test_the_host_uid_is_configurable_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        assert host_uid() is None  # a user's jail is that user
        return
    assert host_uid() == WORKER_UID  # each worker its own: HOST_UID_BASE + its pid
    monkeypatch.setenv(HOST_UID_ENV, "2100000077")
    assert host_uid() == "2100000077"
    if not HAVE_BWRAP:
        return
    with Sandbox(workers=1) as sandbox:
        sandbox.start()
        (worker,) = sandbox._all
        assert {host_ids(pid)[0][0] for pid in tree_pids(worker.proc.pid)} == {2100000077}
    for bad in ("0", "-5", "root", str(2**32 - 1)):
        monkeypatch.setenv(HOST_UID_ENV, bad)
        with pytest.raises(SandboxConfigError, match=HOST_UID_ENV):
            host_uid()
