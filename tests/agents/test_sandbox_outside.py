"""The hostile corpus judged from OUTSIDE the sandbox, at the default limits (issue 19).

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
  site-packages, /usr, /, /tmp, $HOME or the canary directory; the canary tree and the sandbox
  package unchanged; no temp file of the run left;
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
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from agents.sandbox import DEFAULT_LIMITS, STOP_REASONS, Sandbox, SandboxResult
from gf2env.records import Record
from tests.agents.sandbox_judge import (
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
    processes_mentioning,
    target_strings,
    wait_until,
    writes_outside,
)

BUDGET_WALL_S = 5.0  # issue 19: a 5 s / 1 GiB whole-tree budget, measured from outside
BUDGET_MEMORY_MIB = DEFAULT_LIMITS.memory_mb
GRACE_S = 0.5  # for a SIGKILLed process to be reaped and leave /proc

CASES = corpus_cases()


@dataclass
class OutsideRun:
    """One run as the host saw it."""

    result: SandboxResult
    elapsed: float  # the test's clock around run()
    tree: TreeSampler
    before: set[int]  # the test process's descendants before the sandbox was made


def run_outside(new_sandbox: Callable[[], Sandbox], code: str, record: Record) -> OutsideRun:
    """Make a sandbox, run ``code`` on ``record`` and close the sandbox where it can be closed (warm
    workers), all the while sampling the process tree: what the sandbox starts ahead counts too."""
    before = descendants(os.getpid())
    with TreeSampler(exclude=before) as tree:
        sandbox = new_sandbox()
        started = time.monotonic()
        result = sandbox.run_record(code, record)
        elapsed = time.monotonic() - started
        close = getattr(sandbox, "close", None)
        if callable(close):
            close()
    return OutsideRun(result, elapsed, tree, before)


TOOL_STEP = "open('tools.py', 'w').write('def parity(bits):\\n    return sum(bits) % 2\\n')"
NEXT_EPISODE = "import os\nprint(sorted(os.listdir('.')))"


def run_outside_in_workspace(
    new_sandbox: Callable[[], Sandbox], code: str, record: Record
) -> tuple[OutsideRun, SandboxResult]:
    """Like :func:`run_outside`, with ``code`` as the second step of an episode's workspace (after a
    step that built a tool), and then the first run of the next episode on the same Sandbox."""
    before = descendants(os.getpid())
    with TreeSampler(exclude=before) as tree:
        sandbox = new_sandbox()
        with sandbox.workspace() as workspace:
            assert workspace.run(TOOL_STEP).ok
            started = time.monotonic()
            result = workspace.run_record(code, record)
            elapsed = time.monotonic() - started
        with sandbox.workspace() as following:
            after = following.run(NEXT_EPISODE)
        sandbox.close()
    return OutsideRun(result, elapsed, tree, before), after


def leftovers(run: OutsideRun, ctx: Context) -> list[str]:
    """Processes of the run still alive: new descendants, ones seen during it, ones naming it."""
    found = [f"descendant {pid}" for pid in sorted(alive(descendants(os.getpid()) - run.before))]
    found += [f"seen during the run: {pid}" for pid in run.tree.survivors()]
    for needle in (ctx.token, str(ctx.work_tmp)):
        found += [f"mentions the run: {hit}" for hit in processes_mentioning(needle)]
    return found


def judge_outside(run: OutsideRun, ctx: Context, knows_target: bool = False) -> list[str]:
    """Everything wrong with ``run`` as measured from outside, against the budget (empty: all holds)."""
    result, wrong = run.result, []
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
    run = run_outside(lambda: make_sandbox(DEFAULT_LIMITS, mode), fill(code, ctx.fill), ctx.record)
    result = run.result
    where = (
        f"{case.name} [{mode}] -> {result.stop_reason} exit={result.exit_code} signal={result.signal} "
        f"wall={run.elapsed:.2f}s peak={run.tree.peak_mib:.0f}MiB (summed VmHWM {run.tree.hwm_mib:.0f}MiB, "
        f"{run.tree.samples} samples)"
    )
    print(where)  # the measured numbers, with -s
    expects = case.outside_expects
    wrong = judge_outside(run, ctx)
    assert not wrong, f"{where}\n" + "\n".join(wrong) + f"\nstderr: {result.stderr[-800:]!r}"
    check_expects(expects, result, ctx, DEFAULT_LIMITS.output_bytes, run.elapsed, where)


@pytest.mark.parametrize(("case", "mode"), [p for p in corpus_params(CASES) if p.values[1] == "bwrap"])
def test_corpus_from_outside_in_a_workspace(case: Case, mode: str, ctx: Context) -> None:
    """Every snippet as a step of an episode whose workspace persists (issue 20), judged the same way;
    and nothing of that episode reaches the next one."""
    code = fill(case.path.read_text(), ctx.fill)
    run, after = run_outside_in_workspace(lambda: make_sandbox(DEFAULT_LIMITS, mode), code, ctx.record)
    result = run.result
    where = f"{case.name} [{mode}, workspace] -> {result.stop_reason} wall={run.elapsed:.2f}s"
    where += f" peak={run.tree.peak_mib:.0f}MiB"
    print(where)
    wrong = judge_outside(run, ctx)
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
    run = run_outside(lambda: make_sandbox(DEFAULT_LIMITS, "unsafe"), code, ctx.record)
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
}


def test_every_hostile_class_has_snippets() -> None:
    names = {case.name for case in CASES}
    for kind, snippets in HOSTILE_CLASSES.items():
        missing = sorted(set(snippets) - names)
        assert not missing, f"{kind}: no snippet {missing} in the corpus"
