"""The hostile corpus judged from OUTSIDE the sandbox, at the default limits.

Every snippet of tests/agents/sandbox_corpus/ runs at ``DEFAULT_LIMITS`` (its ``# limits:`` header is
ignored here) in each mode its header names, and the test measures for itself, not from the sandbox's
report:

* wall time, on the test's clock around ``run``: at most :data:`BUDGET_WALL_S`;
* whole-tree memory: :class:`~tests.agents.sandbox_judge.TreeSampler` sums the VmRSS of every
  descendant of the test process every 3 ms, from before the sandbox is made until after it is closed
  (so warm workers count; a copy of the test process between fork and exec does not, its pages are
  the test's); the peak stays within :data:`BUDGET_MEMORY_MIB`;
* processes left: after the run (and ``sandbox.close()`` where there is one), no descendant of the test
  process that the run added, none of the processes seen during the run, and no process anywhere whose
  command line or environment holds the run's token or temp directory (zombies count as gone: dead,
  they hold only a pid until init reaps them; a SIGKILLed tree is given 0.5 s to go);
* files touched outside scratch: no tokenized file in the repo, the Python prefix, numpy's
  site-packages, /usr, /, /tmp, /var/tmp, /dev/shm, $HOME, the canary directory or anywhere in the
  test's temp directory; the canary tree and the sandbox package unchanged; no temp file of the run
  left;
* the host's settings: every readable file under /proc/sys/{kernel,fs,vm,user} reads the same after
  ``close()`` as before the run (but the few that change on their own:
  :data:`~tests.agents.host_state.SYSCTL_VOLATILE`; ``fs.aio-nr`` back to at most what it was);
* host-wide pools: while the run is in flight, the host itself can fork, ``io_setup``, make an inotify
  instance and watch, and an eventfd, every 50 ms (:class:`~tests.agents.host_state.HostProber`);
* identity: no process of a jail (bubblewrap and below) is ever seen with a host uid or gid of 0, and a
  bwrap run's jail is seen at all;
* cgroups: no memory cgroup of the Sandbox (``gf2-sandbox-<pid>-*``) left after ``close()``;
* connections: the TCP and UDP listeners on 127.0.0.1 got nothing;
* secrets: the one planted in the environment (``GF2_SECRET``) and on disk never appear in the output;
* the answer channel: the record's target never appears in the output (no snippet can know it: the
  record's 16 samples do not pin it down, so even benign_solver's best guess differs), and the host's
  ``Record`` is unchanged.

Then the header's own expectations, those of ``# outside:`` where a snippet has one (what holds at the
default limits when ``# expect:`` needs its shortened ``# limits:``), else those of ``# expect:``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gf2env.agents.sandbox import (
    DEFAULT_LIMITS,
    STOP_REASONS,
    Sandbox,
    SandboxPool,
    SandboxResult,
    SandboxUnavailableError,
)
from gf2env.agents.sandbox.limits import RUN_TASKS
from gf2env.records.record import Record
from tests.agents.host_state import HostProber, in_jail, sandbox_cgroups, sysctl_changes, sysctl_snapshot
from tests.agents.sandbox_judge import (
    CORPUS,
    INFO,
    Case,
    Context,
    TreeSampler,
    alive,
    check_expects,
    corpus_cases,
    corpus_params,
    descendants,
    fill,
    make_sandbox,
    needs_bwrap,
    processes_mentioning,
    target_strings,
    wait_until,
    writes_outside,
)

BUDGET_WALL_S = DEFAULT_LIMITS.wall_s + 0.75  # every run returns within the wall plus 0.75 s
BUDGET_MEMORY_MIB = DEFAULT_LIMITS.memory_mb  # the whole tree
BUDGET_HOST_MEMORY_MIB = DEFAULT_LIMITS.memory_mb + 128  # the host's available memory falls at most this
GRACE_S = 0.5  # for a SIGKILLed process to be reaped and leave /proc

CASES = corpus_cases()


@dataclass
class HostWatch:
    """The host around one run: its tree, the prober of host-wide pools, and after ``close()`` its
    settings and the Sandbox's cgroups."""

    tree: TreeSampler
    probe: HostProber
    sysctls: dict[str, bytes] = field(default_factory=dict)
    cgroups: list[str] = field(default_factory=list)


@contextmanager
def watch_host(before: set[int], sysctls_before: dict[str, bytes]) -> Iterator[HostWatch]:
    """Sample the tree and probe the host while the body runs; then read the host's settings (given a
    moment to settle: contexts freed at exit are counted back asynchronously) and the cgroups left
    (those that were not there before)."""
    cgroups = set(sandbox_cgroups())
    with TreeSampler(exclude=before) as tree, HostProber() as probe:
        watch = HostWatch(tree, probe)
        yield watch
    wait_until(lambda: not sysctl_changes(sysctls_before, sysctl_snapshot()), 1.0)
    watch.sysctls = sysctl_snapshot()
    watch.cgroups = sorted(set(sandbox_cgroups()) - cgroups)


@dataclass
class OutsideRun:
    """One run as the host saw it."""

    result: SandboxResult
    elapsed: float  # the test's clock around run()
    tree: TreeSampler
    before: set[int]  # the test process's descendants before the sandbox was made
    host: HostWatch


def run_outside(new_sandbox: Callable[[], Sandbox], code: str, record: Record, ctx: Context) -> OutsideRun:
    """Make a sandbox, run ``code`` on ``record`` and close the sandbox where it can be closed (warm
    workers), all the while sampling the process tree (what the sandbox starts ahead counts too) and
    probing the host."""
    before = descendants(os.getpid())
    with watch_host(before, ctx.sysctls) as host:
        sandbox = new_sandbox()
        started = time.monotonic()
        result = sandbox.run_record(code, record)
        elapsed = time.monotonic() - started
        close = getattr(sandbox, "close", None)
        if callable(close):
            close()
    return OutsideRun(result, elapsed, host.tree, before, host)


TOOL_STEP = "open('tools.py', 'w').write('def parity(bits):\\n    return sum(bits) % 2\\n')"
NEXT_EPISODE = "import os\nprint(sorted(os.listdir('.')))"


def run_outside_in_workspace(
    new_sandbox: Callable[[], Sandbox], code: str, record: Record, ctx: Context
) -> tuple[OutsideRun, SandboxResult]:
    """Like :func:`run_outside`, with ``code`` as the second step of an episode's workspace (after a
    step that built a tool), and then the first run of the next episode on the same Sandbox."""
    before = descendants(os.getpid())
    with watch_host(before, ctx.sysctls) as host:
        sandbox = new_sandbox()
        with sandbox.workspace() as workspace:
            assert workspace.run(TOOL_STEP).ok
            started = time.monotonic()
            result = workspace.run_record(code, record)
            elapsed = time.monotonic() - started
        with sandbox.workspace() as following:
            after = following.run(NEXT_EPISODE)
        sandbox.close()
    return OutsideRun(result, elapsed, host.tree, before, host), after


def leftovers(run: OutsideRun, ctx: Context) -> list[str]:
    """Processes of the run still alive: new descendants, ones seen during it, ones naming it."""
    found = [f"descendant {pid}" for pid in sorted(alive(descendants(os.getpid()) - run.before))]
    found += [f"seen during the run: {pid}" for pid in run.tree.survivors()]
    for needle in (ctx.token, str(ctx.work_tmp)):
        found += [f"mentions the run: {hit}" for hit in processes_mentioning(needle)]
    return found


def judge_host(run: OutsideRun, ctx: Context, jailed: bool) -> list[str]:
    """Everything wrong with the host around ``run`` (``jailed``: a bwrap run, whose jail must be seen)."""
    wrong = sysctl_changes(ctx.sysctls, run.host.sysctls)
    failures = run.host.probe.failures
    if failures:
        wrong.append(f"{len(failures)} of {run.host.probe.rounds} host probes failed: {failures[:5]}")
    if run.host.probe.memory_drop_mib > BUDGET_HOST_MEMORY_MIB:
        drop = run.host.probe.memory_drop_mib
        wrong.append(f"the host's available memory fell {drop:.0f} MiB > {BUDGET_HOST_MEMORY_MIB} MiB")
    wrong += [f"cgroup left after close(): {path}" for path in run.host.cgroups]
    wrong += [f"a jailed process ran as host root: {what}" for what in run.tree.jailed_root]
    if jailed and not run.tree.jailed:
        wrong.append("no process of the jail was seen (the identity check saw nothing)")
    return wrong


def judge_outside(
    run: OutsideRun, ctx: Context, knows_target: bool = False, jailed: bool = False
) -> list[str]:
    """Everything wrong with ``run`` as measured from outside, against the budget (empty: all holds)."""
    result, wrong = run.result, judge_host(run, ctx, jailed)
    if run.elapsed > BUDGET_WALL_S:
        wrong.append(f"wall {run.elapsed:.2f} s > {BUDGET_WALL_S} s")
    if run.tree.peak_mib > BUDGET_MEMORY_MIB:
        wrong.append(
            f"tree peak {run.tree.peak_mib:.0f} MiB > {BUDGET_MEMORY_MIB} MiB (pids {run.tree.peak_pids})"
        )
    wait_until(lambda: not leftovers(run, ctx), GRACE_S)
    wrong += [f"left running: {what}" for what in leftovers(run, ctx)]
    wrong += writes_outside(ctx)
    if list(ctx.work_tmp.iterdir()):
        wrong.append(f"temp files left in {ctx.work_tmp}: {sorted(os.listdir(ctx.work_tmp))}")
    ctx.tcp.setblocking(False)
    ctx.udp.setblocking(False)
    try:
        conn, peer = ctx.tcp.accept()
        conn.close()
        wrong.append(f"a TCP connection reached the listener from {peer}")
    except BlockingIOError:
        pass
    try:
        data, peer = ctx.udp.recvfrom(100)
        wrong.append(f"a datagram reached the listener from {peer}: {data!r}")
    except BlockingIOError:
        pass
    output = result.stdout + result.stderr
    if ctx.secret in output:
        wrong.append("the planted secret is in the output")
    if not knows_target:
        leaked = [s for s in dict.fromkeys(target_strings(ctx.record)) if s in output]
        wrong += [f"the target leaked as {s}" for s in leaked]
    if json.dumps(ctx.record.to_json(), sort_keys=True) != ctx.record_json:
        wrong.append("the host's Record changed")
    if result.stop_reason not in STOP_REASONS:
        wrong.append(f"stop_reason {result.stop_reason!r} is not one of {STOP_REASONS}")
    cap = DEFAULT_LIMITS.output_bytes
    if len(result.stdout) > cap or len(result.stderr) > cap:
        wrong.append(f"output past the cap: {len(result.stdout)}, {len(result.stderr)} > {cap}")
    return wrong


@pytest.mark.parametrize(("case", "mode"), corpus_params(CASES))
def test_corpus_from_outside(case: Case, mode: str, ctx: Context) -> None:
    code = case.path.read_text()
    assert "@SECRET@" not in code, "the secret must be found by the code, not given to it"
    run = run_outside(lambda: make_sandbox(DEFAULT_LIMITS, mode), fill(code, ctx.fill), ctx.record, ctx)
    result = run.result
    where = (
        f"{case.name} [{mode}] -> {result.stop_reason} exit={result.exit_code} signal={result.signal} "
        f"wall={run.elapsed:.2f}s peak={run.tree.peak_mib:.0f}MiB (summed VmHWM {run.tree.hwm_mib:.0f}MiB, "
        f"{run.tree.samples} samples; {run.host.probe.rounds} host probes; "
        f"host memory down {run.host.probe.memory_drop_mib:.0f}MiB; "
        f"jail host uids {sorted({ids[0][1] for _, ids in run.tree.jailed.values()})})"
    )
    print(where)  # the measured numbers, with -s
    expects = case.outside_expects
    wrong = judge_outside(run, ctx, jailed=mode == "bwrap")
    assert not wrong, f"{where}\n" + "\n".join(wrong) + f"\nstderr: {result.stderr[-800:]!r}"
    check_expects(expects, result, ctx, DEFAULT_LIMITS.output_bytes, run.elapsed, where)


@pytest.mark.parametrize(("case", "mode"), [p for p in corpus_params(CASES) if p.values[1] == "bwrap"])
def test_corpus_from_outside_in_a_workspace(case: Case, mode: str, ctx: Context) -> None:
    """Every snippet as a step of an episode whose workspace persists, judged the same way;
    and nothing of that episode reaches the next one."""
    code = fill(case.path.read_text(), ctx.fill)
    run, after = run_outside_in_workspace(lambda: make_sandbox(DEFAULT_LIMITS, mode), code, ctx.record, ctx)
    result = run.result
    where = f"{case.name} [{mode}, workspace] -> {result.stop_reason} wall={run.elapsed:.2f}s"
    where += f" peak={run.tree.peak_mib:.0f}MiB"
    print(where)
    wrong = judge_outside(run, ctx, jailed=True)
    assert not wrong, f"{where}\n" + "\n".join(wrong) + f"\nstderr: {result.stderr[-800:]!r}"
    check_expects(case.outside_expects, result, ctx, DEFAULT_LIMITS.output_bytes, run.elapsed, where)
    assert after.ok and after.stdout == "[]\n", f"{where}: the next episode saw {after.stdout!r}"


# ---------------------------------------------------------------------------- the judge can fail
CHILD_MIB = 300


def test_tree_sampler_sees_a_child_memory_and_survivor() -> None:
    """The sampler counts a grandchild's written memory, and knows it survived until killed."""
    code = (
        "import subprocess, time\n"
        "subprocess.Popen(['sleep', '30'])\n"
        f"blob = bytearray({CHILD_MIB} << 20)\n"
        "blob[::4096] = b'x' * len(blob[::4096])\n"
        "time.sleep(0.5)\n"
    )
    before = descendants(os.getpid())
    with TreeSampler(exclude=before) as tree:
        subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
    assert CHILD_MIB <= tree.peak_mib <= tree.hwm_mib < CHILD_MIB + 100, (tree.peak_mib, tree.hwm_mib)
    survivors = tree.survivors()
    assert len(survivors) == 1, survivors  # the orphaned sleep: no longer a descendant, still alive
    assert Path(f"/proc/{survivors[0]}/cmdline").read_bytes() == b"sleep\x0030\x00"
    os.kill(survivors[0], 9)
    assert wait_until(lambda: not tree.survivors(), 2.0)


def test_judge_outside_finds_each_breach(ctx: Context) -> None:
    """A run that breaks the budget in every way the judge knows is reported on every count."""
    code = f"print({list(ctx.record.target)})"
    run = run_outside(lambda: make_sandbox(DEFAULT_LIMITS, "unsafe"), code, ctx.record, ctx)
    assert judge_outside(run, ctx) == [f"the target leaked as {list(ctx.record.target)}"]
    assert judge_outside(run, ctx, knows_target=True) == []
    sleeper = subprocess.Popen(["sleep", "30"], env={"GF2_RUN": ctx.token})  # as if the run left it
    try:
        (ctx.canary_dir / "keep").write_text("changed")
        with socket.create_connection(ctx.tcp.getsockname()):
            pass
        run.elapsed, run.tree.peak_kib = BUDGET_WALL_S + 1, (BUDGET_MEMORY_MIB + 1) << 10
        wrong = "\n".join(judge_outside(run, ctx, knows_target=True))
    finally:
        sleeper.kill()
        sleeper.wait()
    for breach in ("wall", "tree peak", f"descendant {sleeper.pid}", "mentions the run", "canaries", "TCP"):
        assert breach in wrong, (breach, wrong)


def test_sysctl_changes_skip_only_what_moves_on_its_own() -> None:
    """A changed setting is reported; the volatile counters are not; AIO contexts must be back."""
    before = {"kernel/pid_max": b"32768\n", "kernel/ns_last_pid": b"10\n", "fs/aio-nr": b"5\n"}
    quiet = {"kernel/pid_max": b"32768\n", "kernel/ns_last_pid": b"99\n", "fs/aio-nr": b"0\n"}
    assert sysctl_changes(before, quiet) == []
    loud = {"kernel/pid_max": b"4194304\n", "kernel/ns_last_pid": b"99\n", "fs/aio-nr": b"65541\n"}
    wrong = "\n".join(sysctl_changes(before, loud))
    assert "kernel/pid_max" in wrong and "fs/aio-nr still raised" in wrong and "ns_last_pid" not in wrong
    assert sysctl_changes(before, {**quiet, "kernel/core_pattern": b"|/bin/sh\n"})  # a new entry counts
    assert len(sysctl_snapshot()) > 100 and "kernel/pid_max" in sysctl_snapshot()


def test_host_prober_records_a_failure() -> None:
    """A round where a host call fails is recorded (here: the watch's directory is gone), not raised."""
    probe = HostProber()
    probe.probe()
    assert probe.failures == [] and probe.rounds == 1
    os.rmdir(probe._dir)
    probe.probe()
    assert len(probe.failures) == 1 and "host inotify failed" in probe.failures[0], probe.failures


def test_tree_sampler_sees_who_a_jailed_process_is() -> None:
    """A process that runs the jail's harness path is recorded with its host ids; as host root it is a
    breach (the host's own wrapper, ``inside.py limit ... /sandbox/harness.py``, is not in a jail)."""
    assert not in_jail(
        os.getpid(), ["python", "-S", "/x/agents/sandbox/inside.py", "limit", "/sandbox/harness.py"]
    )
    assert in_jail(os.getpid(), ["python", "-S", "-s", "/sandbox/harness.py", "serve", "3"])
    assert in_jail(os.getpid(), ["/usr/bin/bwrap", "--unshare-all"])
    before = descendants(os.getpid())
    with TreeSampler(exclude=before) as tree:
        subprocess.run(
            [sys.executable, "-c", "import time; time.sleep(0.3)", "/sandbox/harness.py"], check=True
        )
    assert len(tree.jailed) == 1, tree.jailed
    assert bool(tree.jailed_root) == (os.geteuid() == 0), tree.jailed_root


@pytest.mark.skipif(not INFO["memory_cgroup"], reason=f"no memory cgroup here: {INFO['memory_cgroup_error']}")
def test_judge_sees_the_sandbox_cgroups() -> None:
    """The judge finds a live Sandbox's cgroup where the sandbox makes it, so its 'none left' means
    something."""
    sandbox = make_sandbox(DEFAULT_LIMITS, "unsafe")
    try:
        assert sandbox.run("print(1)").ok
        assert sandbox_cgroups(), "the judge does not see the worker's cgroup"
    finally:
        sandbox.close()
    assert sandbox_cgroups() == []


# ---------------------------------------------------------------------------- nothing carries over
INSPECT_SCRATCH = """\
import json, os
st = os.stat(".")
state = {"xattrs": os.listxattr("."), "mode": st.st_mode & 0o7777, "files": os.listdir(".")}
print(json.dumps({**state, "times": [st.st_atime, st.st_mtime, st.st_ctime]}))
"""


@needs_bwrap
@pytest.mark.parametrize("across", ["runs", "episodes"])
def test_nothing_parked_on_the_scratch_carries_over(across: str, ctx: Context) -> None:
    """What scratch_xattr_park leaves on the scratch directory itself (xattrs, times, mode) is gone for
    the next run, and for the next episode of a workspace (where, within the episode, it stays)."""
    park = fill((CORPUS / "scratch_xattr_park.py").read_text(), ctx.fill)
    with make_sandbox(DEFAULT_LIMITS, "bwrap", workers=1) as sandbox:
        start = time.time()
        if across == "runs":
            parked = sandbox.run(park)
            seen = sandbox.run(INSPECT_SCRATCH)
        else:
            with sandbox.workspace() as workspace:
                parked = workspace.run(park)
                kept = json.loads(workspace.run(INSPECT_SCRATCH).stdout)
                assert kept["xattrs"] and kept["mode"] == 0o777, kept  # the episode keeps its scratch
            with sandbox.workspace() as workspace:
                seen = workspace.run(INSPECT_SCRATCH)
        end = time.time()
    assert parked.ok and "dot: 0o777 1000000000" in parked.stdout, parked
    print(parked.stdout.strip())
    state = json.loads(seen.stdout)
    assert state["xattrs"] == [] and state["mode"] == 0o700 and state["files"] == [], state
    assert all(start - 1 <= t <= end + 1 for t in state["times"]), (start, end, state["times"])


def _numbers(result: SandboxResult, key: str) -> int:
    assert result.ok, result
    words = result.stdout.split()
    return int(words[words.index(key) + 1])


@needs_bwrap
@pytest.mark.parametrize("across", ["runs", "episodes"])
def test_inode_numbers_carry_nothing(across: str, ctx: Context) -> None:
    """A fresh scratch numbers its inodes from the start: the 201 files one run makes do not show in
    the next run's (or episode's) first inode; within an episode they do."""
    code = fill((CORPUS / "inode_channel.py").read_text(), ctx.fill)
    with make_sandbox(DEFAULT_LIMITS, "bwrap", workers=1) as sandbox:
        if across == "runs":
            first, second = (_numbers(sandbox.run(code), "inode") for _ in range(2))
        else:
            with sandbox.workspace() as workspace:
                first = _numbers(workspace.run(code), "inode")
                moved = _numbers(workspace.run(code.replace('"first"', '"later"')), "inode")
                assert moved > first + 200, (first, moved)  # the channel, where the scratch is kept
            with sandbox.workspace() as workspace:
                second = _numbers(workspace.run(code), "inode")
    assert first == second, (first, second)


@needs_bwrap
def test_pid_counter_between_runs(ctx: Context) -> None:
    """How much one run's tasks move the next run's pid: at most a run's task cap (RUN_TASKS), and
    nothing where each run has a pid namespace of its own (reported as xfail while it is not so)."""
    spender = fill((CORPUS / "pid_counter_channel.py").read_text(), ctx.fill)
    plain = "import os\nprint('pid', os.getpid())"
    with make_sandbox(DEFAULT_LIMITS, "bwrap", workers=1) as sandbox:
        pids = [_numbers(sandbox.run(code), "pid") for code in (plain, plain, spender, plain)]
    quiet, loud = pids[1] - pids[0], pids[3] - pids[2]
    print(f"pids {pids}: the step after a quiet run {quiet}, after one that started 100 threads {loud}")
    assert 0 <= loud - quiet <= RUN_TASKS, pids
    if loud != quiet:
        pytest.xfail(f"the pid counter carries {loud - quiet} tasks of one run to the next (pids {pids})")


HOLD_ALL_TASKS = """\
import threading, time
threading.stack_size(64 * 1024)
stop, started = threading.Event(), 0
try:
    while started < 20_000:
        threading.Thread(target=stop.wait, daemon=True).start()
        started += 1
except RuntimeError:
    pass
time.sleep(2.0)
stop.set()
print("threads", started)
"""


@pytest.mark.slow
@needs_bwrap
def test_runs_holding_all_their_tasks_leave_room_for_another_sandbox() -> None:
    """Runs that each hold every task they may (RUN_TASKS), in several workers at once, still leave room
    for another Sandbox of the machine to start a worker and run a thread: on a root host each jail has
    a host uid of its own, so one run's tasks are not another jail's to lose."""
    workers = 4
    with make_sandbox(DEFAULT_LIMITS, "bwrap", workers=workers) as storms:
        storms.start(workers)
        held: list[SandboxResult] = []
        thread = threading.Thread(
            target=lambda: held.extend(SandboxPool(storms, workers).map([(HOLD_ALL_TASKS, None)] * workers))
        )
        thread.start()
        try:
            time.sleep(1.0)  # every storm is holding its tasks (each takes ~0.1 s to start them)
            try:
                with make_sandbox(DEFAULT_LIMITS, "bwrap", workers=1) as other:
                    result = other.run(
                        "import threading\nt = threading.Thread(target=print, args=(1,))\nt.start()"
                    )
                    late = f"{result.stop_reason}: {result.stderr[-300:]!r}" if not result.ok else ""
            except SandboxUnavailableError as err:
                late = f"could not start: {err}"
        finally:
            thread.join()
    counts = [_numbers(result, "threads") for result in held]
    print(f"{workers} runs held {sum(counts)} threads ({counts}); the other Sandbox: {late or 'ran'}")
    assert not late, f"while {workers} runs held {sum(counts)} threads ({counts}), another Sandbox {late}"


# ---------------------------------------------------------------------------- what the corpus covers
HOSTILE_CLASSES = {
    "the task record tampered with, in memory and on disk": ("tamper_record_memory", "tamper_record_disk"),
    "threads that outlive the code or flood from the background": (
        "thread_outlives_code",
        "thread_daemon_prints_on",
        "thread_flood_stdout",
    ),
    "the output streams closed, then running on": ("close_std_fds", "close_streams_run_on"),
    "unbounded recursion, limit raised": ("recursion_limit_raised", "recursion_limit_raised_indirect"),
    "odd exit statuses": (
        "exit_status_300",
        "exit_status_minus_one",
        "exit_status_message",
        "exit_status_none",
        "exit_status_true",
        "exit_status_137",
        "exit_signal_sigterm",
        "exit_signal_abort",
        "exit_signal_segv",
    ),
    "the code raising its own limits": ("raise_own_limits",),
    "memory bombs driven from C in the standard library and numpy": (
        "memory_bytes_bomb",
        "memory_c_bytearray",
        "memory_c_bytes_zero",
        "memory_c_str_ljust",
        "memory_c_array_repeat",
        "memory_c_bigint_shift",
        "memory_c_list_repeat",
        "memory_c_itertools_product",
        "memory_c_json_deep",
        "memory_c_zlib_bomb",
        "memory_numpy_zeros",
        "memory_numpy_ones",
        "memory_numpy_fill",
        "memory_numpy_50gb",
    ),
    "attacks on the host's reading of the result": ("forge_report", "forged_answer", "non_utf8_output"),
    "higher-level network clients and DNS": ("network_clients", "network"),
    "the host's settings (sysctls), and core_pattern's pipe to host root": (
        "sysctl_write_kernel",
        "core_pattern_pipe_abort",
        "uid_map_identity",
    ),
    "the jail's pid 1 and the run's parent: memory, descriptors, ptrace": ("pid1_mem_write", "pid1_fd_write"),
    "state parked on the scratch, and covert channels between fresh runs": (
        "scratch_xattr_park",
        "pid_counter_channel",
        "inode_channel",
    ),
    "host-wide pools drained from one run (pids, AIO, inotify, descriptors)": (
        "thread_storm_20k",
        "aio_exhaust",
        "inotify_exhaust",
        "eventfd_timerfd_flood",
    ),
    "host state left after close(): cgroups, shared temp directories": (
        "many_files_cgroup",
        "write_shared_tmp_dirs",
    ),
}


def test_every_hostile_class_has_snippets() -> None:
    names = {case.name for case in CASES}
    for kind, snippets in HOSTILE_CLASSES.items():
        missing = sorted(set(snippets) - names)
        assert not missing, f"{kind}: no snippet {missing} in the corpus"
