"""Warm workers: one jail (bubblewrap, or the UNSAFE mode's bare process) holding a fork server that
has imported numpy once, started ahead of the runs and reused while it stays clean.

One idea: a warm worker seen from the host (start it, run one job on it, stop it).

Each run still gets a fresh process, forked for it alone, and an empty scratch: the worker wipes the
scratch after every run and the host retires the worker when that fails, when the run had to be
killed from outside, or when the worker dies. The host watches the whole tree's resident memory
while a run is in flight and stops the run when the tree passes ``memory_mb``; the run's own address
space is the budget less what the worker holds and the scratch size, so that stop is a backstop.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from gf2env.agents.sandbox import inside as harness
from gf2env.agents.sandbox.cgroups import MemoryCgroup
from gf2env.agents.sandbox.errors import SandboxConfigError, SandboxUnavailableError
from gf2env.agents.sandbox.isolation import (
    BWRAP,
    HARNESS_PATH,
    HOST_ENV,
    PYTHON_FLAGS,
    SANDBOX_ENV,
    interpreter,
    jail_command,
    limit_command,
    numpy_site,
    scratch_spec,
)
from gf2env.agents.sandbox.limits import STOP_REASONS, SandboxLimits, SandboxResult
from gf2env.agents.sandbox.supervise import Streams, kill_tree, resident_mb, tree_pids, tree_resident_mb

START_S = 30.0  # how long a worker may take to say it is ready
BACKSTOP_S = 0.5  # beyond the wall clock: the worker did not report, so the host kills it (a run
# returns within wall_s + 0.75 s, measured from outside, even then)
DRAIN_S = 0.2  # how long the pipes may stay open once the report is in (nothing else holds them)
SAMPLE_S = 0.01  # how often the host reads the tree's memory during a run
MIN_ADDRESS_SPACE_MB = 32  # what a run needs beyond the worker's own address space
ATTEMPTS = 3  # workers a run may be sent to when each is found dead before it starts
WIPE_S = 5.0  # how long emptying a workspace's scratch may take before the worker is replaced


class WorkerGoneError(Exception):
    """The worker was found dead when a run was sent to it (the run never started)."""


_spawner: ThreadPoolExecutor | None = None
_spawner_lock = threading.Lock()


def _spawn(argv: list[str], **kwargs: Any) -> subprocess.Popen:
    """Start a worker from one long-lived thread: the wrapper asks for SIGKILL when the thread that
    started it ends, so a worker must not be started by a short-lived pool thread, and it dies with
    this process (the thread ends at interpreter exit)."""
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gf2-sandbox-spawner")
    return _spawner.submit(lambda: subprocess.Popen(argv, **kwargs)).result()


@dataclass(frozen=True)
class Jail:
    """What every worker of one Sandbox shares: isolation, the bwrap binary, seccomp, scratch size,
    and the cgroup version that holds each worker's tree ('' for none: :mod:`.cgroups`)."""

    isolation: str
    bwrap: str
    seccomp: bool
    scratch_mb: int
    cgroup: str
    memory_mb: int


class Worker:
    """One warm jail and its fork server; :meth:`run` runs one job at a time (the caller serialises)."""

    def __init__(self, jail: Jail) -> None:
        self.jail = jail
        self.owner = os.getpid()  # a forked host must not talk to its parent's workers
        self.runs = 0
        self.healthy = True
        self.host_scratch = ""
        ctrl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ctrl = ctrl
        python, _ = interpreter()
        site = numpy_site()
        self.cgroup: MemoryCgroup | None = None
        try:
            if jail.cgroup:
                self.cgroup = MemoryCgroup(jail.cgroup, jail.memory_mb)
                self.cgroup_limit_mb = jail.memory_mb
            procs = self.cgroup.procs if self.cgroup else "-"
            if jail.isolation == BWRAP:
                sites = ["/sandbox/site-packages"] if site else []
                serve = ["serve", str(theirs.fileno()), "/scratch", scratch_spec(jail.scratch_mb), *sites]
                argv = jail_command(jail.bwrap, serve, procs)
                env, cwd = HOST_ENV, "/"
            else:
                self.host_scratch = tempfile.mkdtemp(prefix="gf2-sandbox-")
                inner = [python, *PYTHON_FLAGS, str(HARNESS_PATH), "serve", str(theirs.fileno())]
                inner += [self.host_scratch, "dir", *([site] if site else [])]
                env, cwd = {**SANDBOX_ENV, "HOME": self.host_scratch}, self.host_scratch
                argv = limit_command(inner, procs)
            self.proc = _spawn(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=env,
                cwd=cwd,
                close_fds=True,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        except BaseException:
            ctrl.close()
            self._remove_scratch()
            if self.cgroup is not None:
                self.cgroup.remove()
            raise
        finally:
            theirs.close()
        try:
            ready = self._receive(START_S)
            if not isinstance(ready, dict) or not isinstance(ready.get("ready"), int):
                raise SandboxUnavailableError(f"the sandbox worker did not start: {self._why()}")
            self.zygote = self._find_zygote()
            if jail.isolation == BWRAP:
                self._check_host_identity()
            self.overhead_mb = tree_resident_mb(self.proc.pid)
            self.vm_size_mb = _vm_size_mb(self.zygote)
        except BaseException:
            self.stop()
            raise

    # ------------------------------------------------------------------------ lifecycle
    def _receive(self, timeout: float) -> Any:
        """The next message of the worker as JSON (None when it closed the socket or said nothing)."""
        self.ctrl.settimeout(timeout)
        try:
            data = self.ctrl.recv(1 << 16)
        except (TimeoutError, OSError):
            return None
        finally:
            self.ctrl.settimeout(None)
        return json.loads(data) if data else None

    def _why(self) -> str:
        """What the worker wrote to its stderr before it failed (after killing it)."""
        kill_tree(self.proc.pid)
        self.proc.wait()
        assert self.proc.stderr is not None
        text = self.proc.stderr.read(4096).decode(errors="replace").strip()
        return text or f"exit status {self.proc.returncode}"

    def _check_host_identity(self) -> None:
        """Refuse a jail any of whose processes is host root, as the host sees them (bwrap and the
        fork server): a root host's wrapper must have become :func:`host_uid` before bwrap."""
        for pid in tree_pids(self.proc.pid):
            try:
                with open(f"/proc/{pid}/status") as fh:
                    ids = [line.split() for line in fh if line.startswith(("Uid:", "Gid:"))]
            except OSError:  # gone: the run that asks next will find out
                continue
            if any("0" in fields[1:] for fields in ids):
                raise SandboxUnavailableError(
                    f"the sandbox worker's process {pid} runs as host root ({ids}); a jail must not."
                )

    def _find_zygote(self) -> int:
        """The host pid of the fork server: the last of the fresh worker's tree, which is a chain
        (bwrap, its init in the new pid namespace, the server; or the server alone)."""
        pids = tree_pids(self.proc.pid)
        return pids[-1] if pids else self.proc.pid

    def address_space_mb(self, limits: SandboxLimits) -> int:
        """What a run's process may map: the budget less the worker's resident memory and scratch."""
        scratch = self.jail.scratch_mb if self.jail.isolation == BWRAP else 0
        room = int(limits.memory_mb - self.overhead_mb - scratch)
        if room < self.vm_size_mb + MIN_ADDRESS_SPACE_MB:
            raise SandboxConfigError(
                f"SandboxLimits.memory_mb={limits.memory_mb}: the worker holds {self.overhead_mb:.0f} MiB "
                f"and the scratch {scratch} MiB, leaving {room} MiB of address space for a run that starts "
                f"with {self.vm_size_mb:.0f} MiB mapped (Python and numpy); raise memory_mb to at least "
                f"{int(limits.memory_mb - room + self.vm_size_mb + MIN_ADDRESS_SPACE_MB) + 1}."
            )
        return room

    def stop(self) -> None:
        """End the worker: close its socket (it exits), kill what is left, reap, remove its scratch."""
        self.healthy = False
        if os.getpid() != self.owner:  # a forked copy: the parent's worker is not ours to stop
            self.ctrl.close()
            return
        self.ctrl.close()
        try:
            self.proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            kill_tree(self.proc.pid)
            self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        self._remove_scratch()
        if self.cgroup is not None:
            self.cgroup.remove()

    def _remove_scratch(self) -> None:
        """Remove the UNSAFE mode's host scratch, however deep the code made it."""
        if not self.host_scratch:
            return
        try:
            shutil.rmtree(self.host_scratch, ignore_errors=True)
        except RecursionError:  # deeper than Python's recursion limit: rm has none
            subprocess.run(["rm", "-rf", "--", self.host_scratch], check=False, capture_output=True)
        if os.path.exists(self.host_scratch):
            warnings.warn(
                f"could not remove the sandbox worker's scratch {self.host_scratch}",
                RuntimeWarning,
                stacklevel=2,
            )

    # ------------------------------------------------------------------------ one run
    def run(
        self, code: bytes, view_json: str, limits: SandboxLimits, keep_scratch: bool = False
    ) -> SandboxResult:
        """Run one job; the worker is marked unhealthy when it must not serve another. With
        ``keep_scratch`` (a workspace's runs) the scratch stays as the code left it."""
        self.runs += 1
        run_id = self.runs
        room = self.address_space_mb(limits)
        ooms = self._cgroup_before(limits)
        job_fd = os.memfd_create("gf2-sandbox-job", os.MFD_CLOEXEC)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            payload = json.dumps({"code": code.decode("utf-8"), "view": json.loads(view_json)}).encode()
            _write_all(job_fd, payload)
            os.lseek(job_fd, 0, os.SEEK_SET)
            request = {
                "run": run_id,
                "wall_s": limits.wall_s,
                "rlimits": harness.format_rlimits(limits.run_rlimits(room)),
                "imports": None if limits.imports is None else list(limits.imports),
                "denied_builtins": list(limits.denied_builtins),
                "recursion_limit": limits.recursion_limit,
                "seccomp": self.jail.seccomp,
                "keep_scratch": keep_scratch,
            }
            start = time.monotonic()
            try:
                socket.send_fds(self.ctrl, [json.dumps(request).encode()], [job_fd, out_w, err_w])
            except OSError as err:  # the worker died while idle: the run never started
                self.healthy = False
                raise WorkerGoneError(str(err)) from err
        except BaseException:
            for fd in (out_r, err_r):
                os.close(fd)
            raise
        finally:
            for fd in (job_fd, out_w, err_w):
                os.close(fd)
        streams = Streams(out_r, err_r, limits.output_bytes)
        try:
            report, stop, peak, started = self._watch(streams, run_id, limits, start)
            # the worker's clock, from before the fork to the reaping (the host's, where it had to kill)
            wall = float(report["wall_s"]) if report is not None else time.monotonic() - started
            streams.drain(DRAIN_S)
        finally:
            streams.close()
        if self.cgroup is not None:
            peak = max(peak, self.cgroup.peak_mb())
            if self.cgroup.oom_kills() > ooms:  # the kernel killed in the tree for want of memory
                stop = stop or "memory_limit"
        return self._result(streams, report, stop, peak, wall, limits)

    def _cgroup_before(self, limits: SandboxLimits) -> int:
        """Set the cgroup's limit to this run's budget and start its peak; the OOM kills so far."""
        if self.cgroup is None:
            return 0
        if limits.memory_mb != self.cgroup_limit_mb:
            self.cgroup.set_limit(limits.memory_mb)
            self.cgroup_limit_mb = limits.memory_mb
        self.cgroup.reset_peak()
        return self.cgroup.oom_kills()

    def _watch(
        self, streams: Streams, run_id: int, limits: SandboxLimits, sent: float
    ) -> tuple[dict[str, Any] | None, str, float, float]:
        """Pump the pipes, watch memory and the clock, until the worker reports the run's end: the
        report, why the host stopped it, the tree's peak, when the run's process started. The clock
        starts when the worker says the process exists (it may first finish emptying the scratch of
        the run before); a worker that neither starts nor refuses the run in time is killed and the
        run goes elsewhere (:class:`WorkerGoneError`)."""
        import selectors

        streams.selector.register(self.ctrl.fileno(), selectors.EVENT_READ)
        started = 0.0
        backstop = sent + harness.WIPE_S + BACKSTOP_S
        stop, peak, sampled = "", self.overhead_mb, 0.0
        try:
            while True:
                now = time.monotonic()
                if now >= backstop:  # the worker did not stop the run (or start it): stop everything
                    self.healthy = False
                    kill_tree(self.proc.pid)
                    if not started:
                        raise WorkerGoneError("the worker did not start the run in time")
                    return None, stop or "timeout", peak, started
                for key, _ in streams.selector.select(min(backstop - now, SAMPLE_S)):
                    if key.fd != self.ctrl.fileno():
                        streams.read(key.fd)
                        continue
                    try:
                        data = self.ctrl.recv(1 << 16)  # ready: a whole message, or b"" at its end
                    except OSError:  # the worker died with a message of ours unread
                        data = b""
                    if not data:  # the worker died
                        self.healthy = False
                        if not started:
                            raise WorkerGoneError("the worker died before the run started")
                        return None, stop, peak, started
                    report = json.loads(data)
                    if report.get("id") != run_id:
                        continue
                    if report.get("refused"):  # its scratch could not be emptied after the last run
                        self.healthy = False
                        raise WorkerGoneError(str(report["refused"]))
                    if report.get("started"):
                        started = time.monotonic()
                        backstop = started + limits.wall_s + BACKSTOP_S
                        continue
                    return report, stop, peak, started or sent
                if time.monotonic() - sampled >= SAMPLE_S:
                    sampled = time.monotonic()
                    memory = tree_resident_mb(self.proc.pid)
                    peak = max(peak, memory)
                    if memory > limits.memory_mb and not stop:
                        stop = "memory_limit"
                        self._ask_stop(run_id)
                if streams.over_cap() and not stop:
                    stop = "output_limit"
                    self._ask_stop(run_id)
        finally:
            streams.selector.unregister(self.ctrl.fileno())

    def wipe(self) -> None:
        """Empty the scratch (the end of a workspace); the worker is retired when that fails."""
        self.runs += 1
        try:
            self.ctrl.send(json.dumps({"wipe": self.runs}).encode())
            report = self._receive(WIPE_S)
        except OSError:
            report = None
        if not (isinstance(report, dict) and report.get("id") == self.runs and report.get("clean") is True):
            self.healthy = False

    def _ask_stop(self, run_id: int) -> None:
        try:
            self.ctrl.send(json.dumps({"stop": run_id}).encode())
        except OSError:
            self.healthy = False

    def _result(
        self,
        streams: Streams,
        report: dict[str, Any] | None,
        stop: str,
        peak: float,
        wall: float,
        limits: SandboxLimits,
    ) -> SandboxResult:
        code: int | None = None
        sig: int | None = None
        cpu = 0.0
        if report is None:  # the worker died or was killed: the run is reported as killed
            sig = signal.SIGKILL
            reason = stop or "killed"
            self.healthy = False
        else:
            status, cpu = int(report["status"]), float(report["cpu_s"])
            peak = max(peak, self.overhead_mb + int(report["maxrss_kb"]) / 1024)
            if os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
            else:
                code = os.WEXITSTATUS(status)
            if stop:
                reason = stop
            elif report["timeout"]:
                reason = "timeout"
            elif sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= limits.cpu_s):
                reason = "cpu_limit"
            elif sig is not None:
                reason = "killed"
            elif code == 0:
                reason = "exited"
            elif code == harness.EXIT_MEMORY:
                reason = "memory_limit"
            else:
                reason = "error"
        assert reason in STOP_REASONS
        out, out_cut, out_n = streams.text(streams.fds[0])
        err, err_cut, err_n = streams.text(streams.fds[1])
        return SandboxResult(
            stdout=out,
            stderr=err,
            exit_code=code,
            signal=sig,
            wall_s=round(wall, 4),
            cpu_s=round(cpu, 4),
            stop_reason=reason,
            stdout_truncated=out_cut,
            stderr_truncated=err_cut,
            stdout_bytes=out_n,
            stderr_bytes=err_n,
            memory_mb=round(peak, 1),
        )


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _vm_size_mb(pid: int) -> float:
    """A process's mapped address space in MiB (its resident memory when /proc hides the size)."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
    except (OSError, ValueError, IndexError):
        return resident_mb(pid)
