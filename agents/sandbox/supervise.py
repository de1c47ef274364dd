"""Process supervision: start the run in its own session and process group, read stdout and stderr
without blocking up to the output cap, stop it at the wall-clock deadline, SIGKILL the whole group
at the end and collect the wrapper's report of the program's status and CPU time."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from agents.sandbox.limits import SandboxLimits

DRAIN_S = 1.0  # how long stragglers may hold the pipes once the child has exited or been killed
POLL_S = 0.02  # exit polling when pidfd_open is unavailable


def _exited(pid: int) -> bool:
    """Has ``pid`` exited? (without reaping it, so its process group id stays reserved)"""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds used so far by ``pid`` and its descendants (read from /proc; 0 where unreadable)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, stack, seen = 0.0, [pid], set()
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in os.listdir(f"/proc/{p}/task"):
                stack += [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
        except (OSError, ValueError, IndexError):
            continue
    return total


def _read_report(fd: int) -> tuple[int, float] | None:
    """The wrapper's ``(wait status, CPU seconds)`` of the program, or None when it wrote none."""
    os.set_blocking(fd, False)
    try:
        data = os.read(fd, 4096)
    except BlockingIOError:
        return None
    if not data:
        return None
    report = json.loads(data)
    if report["status"] is None:
        return None
    return int(report["status"]), float(report["cpu_s"])


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Streams:
    """stdout and stderr of one run, read without blocking and kept up to a byte cap."""

    def __init__(self, proc: subprocess.Popen, cap: int) -> None:
        assert proc.stdout is not None and proc.stderr is not None
        self.cap = cap
        self.files = {proc.stdout.fileno(): proc.stdout, proc.stderr.fileno(): proc.stderr}
        self.kept = {fd: bytearray() for fd in self.files}
        self.seen = dict.fromkeys(self.files, 0)
        self.selector = selectors.DefaultSelector()
        for fd in self.files:
            os.set_blocking(fd, False)
            self.selector.register(fd, selectors.EVENT_READ)

    @property
    def open(self) -> int:
        return sum(1 for key in self.selector.get_map().values() if key.fd in self.files)

    def over_cap(self) -> bool:
        return any(n > self.cap for n in self.seen.values())

    def read(self, fd: int) -> None:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            self.selector.unregister(fd)
            return
        self.seen[fd] += len(chunk)
        room = self.cap - len(self.kept[fd])
        if room > 0:
            self.kept[fd] += chunk[:room]

    def pump(self, timeout: float) -> None:
        """Read what is ready within ``timeout`` (returns early when another registered fd fires)."""
        for key, _ in self.selector.select(max(timeout, 0.0)):
            if key.fd in self.files:
                self.read(key.fd)

    def drain(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while self.open and time.monotonic() < end:
            self.pump(end - time.monotonic())

    def close(self) -> None:
        self.selector.close()
        for f in self.files.values():
            f.close()

    def text(self, fd: int) -> tuple[str, bool, int]:
        return self.kept[fd].decode("utf-8", errors="replace"), self.seen[fd] > self.cap, self.seen[fd]


# what to start, given the report pipe's write end: (argv, env, cwd)
Command = Callable[[int], tuple[list[str], dict[str, str], str]]


def supervise(command: Command, limits: SandboxLimits) -> tuple[Streams, int, float, float, str]:
    """Run ``command(report_fd)`` under ``limits`` (wall clock, output cap) until it ends.

    Returns the streams, the program's wait status and CPU seconds, the wall seconds, and why it was
    stopped: '' when it ended by itself, else ``timeout`` or ``output_limit``."""
    report_r, report_w = os.pipe()
    try:
        argv, env, cwd = command(report_w)
        start = time.monotonic()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            close_fds=True,
            pass_fds=(report_w,),
            start_new_session=True,
        )
    except BaseException:
        os.close(report_r)
        raise
    finally:
        os.close(report_w)
    streams = Streams(proc, limits.output_bytes)
    pidfd = None
    try:
        if hasattr(os, "pidfd_open"):
            try:
                pidfd = os.pidfd_open(proc.pid)
                streams.selector.register(pidfd, selectors.EVENT_READ)
            except OSError:
                pidfd = None
        stop, tree_cpu = _watch(proc, streams, pidfd, start + limits.wall_s)
        if pidfd is not None and pidfd in streams.selector.get_map():
            streams.selector.unregister(pidfd)
        _kill_group(proc.pid)  # the leader is not reaped yet, so its group id is still ours
        _, wrapper_status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        proc.returncode = wrapper_status  # reaped here; keep Popen from waiting again
        streams.drain(DRAIN_S)
        report = _read_report(report_r)
    finally:
        os.close(report_r)
        if proc.returncode is None:  # something above raised: leave nothing running
            _kill_group(proc.pid)
            proc.wait()
        if pidfd is not None:
            os.close(pidfd)
        streams.close()
    if report is not None:  # the wrapper saw the program end: its status and everyone's CPU
        status, cpu = report
    else:  # the wrapper was killed (timeout, output cap) or failed before starting the program
        status, cpu = wrapper_status, max(usage.ru_utime + usage.ru_stime, tree_cpu)
    return streams, status, cpu, wall, stop


def _watch(proc: subprocess.Popen, streams: Streams, pidfd: int | None, deadline: float) -> tuple[str, float]:
    """Pump the pipes until the child exits (''), the deadline passes or the output cap is hit."""
    while True:
        if _exited(proc.pid):
            if pidfd is not None:
                streams.selector.unregister(pidfd)
                pidfd = None
            end = time.monotonic() + DRAIN_S
            while streams.open and not streams.over_cap() and time.monotonic() < end:
                streams.pump(end - time.monotonic())
            return ("output_limit", 0.0) if streams.over_cap() else ("", 0.0)
        now = time.monotonic()
        if now >= deadline:
            return "timeout", _tree_cpu_s(proc.pid)
        streams.pump(min(deadline - now, 1.0 if pidfd is not None else POLL_S))
        if streams.over_cap():
            return "output_limit", _tree_cpu_s(proc.pid)
