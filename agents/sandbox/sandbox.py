"""Run untrusted, model-written Python against one task record, behind several independent layers.

Each :meth:`Sandbox.run` runs the code in a fresh process forked for it alone by a warm worker
(:mod:`~gf2env.agents.sandbox.workers`: a fork server that imported numpy once, inside the jail), with an
empty scratch:

1. ``process-group`` (:mod:`~gf2env.agents.sandbox.workers`): the run's process cannot fork, so it is the
   whole of the run; it is SIGKILLed at its end (with every thread it started), and a worker the
   host has to stop from outside is killed as a tree (under bwrap its pid namespace dies with it);
2. ``bwrap-namespaces``, ``read-only-fs``, ``no-network`` (:mod:`~gf2env.agents.sandbox.isolation`):
   bubblewrap with every namespace unshared, uid 65534, no capabilities for runs, a read-only root
   holding only ``/usr``, the Python installation and numpy's site-packages; the fork server is the
   jail's pid 1 and not dumpable (no run can read or write its memory or descriptors);
3. ``own-host-uid`` (:func:`~gf2env.agents.sandbox.isolation.host_uid`, a root host only): the jail's uid
   is an unprivileged host uid of its own, never host root, so nothing in it can write a host-wide
   kernel setting, and the kernel counts its tasks (``RLIMIT_NPROC``) where root's are not;
4. ``proc-read-only`` and ``fresh-scratch`` (:mod:`~gf2env.agents.sandbox.inside`): /proc's host-wide parts
   (``/proc/sys``, ``/proc/sysrq-trigger``, ...) read-only and its kernel-information files masked;
   every run (every workspace episode) gets a new tmpfs at ``/scratch`` (the working directory;
   ``/tmp`` links to it), of ``scratch_mb`` and at most SCRATCH_INODES files, so nothing of one run,
   not even the directory's extended attributes, times or inode numbers, reaches the next;
5. ``clearenv`` (:mod:`~gf2env.agents.sandbox.isolation`): none of the host's environment reaches the
   sandbox (not even bwrap's own, which a sandboxed process could read from ``/proc/1/environ``);
6. ``rlimits`` (:mod:`~gf2env.agents.sandbox.limits`, set in :mod:`~gf2env.agents.sandbox.inside`): CPU
seconds,
   address space (the memory budget less the worker and the scratch), file size, open files, tasks,
   queued signals, no core dumps and no locked memory, set in the run's process before the code runs;
7. ``seccomp`` (:mod:`~gf2env.agents.sandbox.inside`): a classic-BPF filter (x86_64) installed in the run's
   process before the code runs: no sockets, no new processes or programs (threads still work), no
   signals, rlimits or priorities aimed at other processes, no ptrace, mounts, namespaces, keyrings,
   bpf, modules, io_uring, AIO, inotify, System V or POSIX IPC, memory files, ``PR_SET_DUMPABLE``;
8. ``timeout``, ``output-cap`` and ``memory-watch`` (:mod:`~gf2env.agents.sandbox.workers`): the worker
   kills the run after ``wall_s``; the host has it killed once stdout or stderr passes
   ``output_bytes`` or the whole tree's resident memory passes ``memory_mb``, and kills the whole
   worker if it does not report within BACKSTOP_S of the wall clock;
9. ``memory-cgroup-v2`` or ``memory-cgroup-v1`` (:mod:`~gf2env.agents.sandbox.cgroups`, where this machine
   lets the host make one): the worker's whole tree in a memory cgroup of ``memory_mb``, no swap.

The code sees ``record`` (:func:`~gf2env.agents.sandbox.view.record_view`, never the target) and the
shortcuts ``n, p, d, g, K, prefix, samples``; what it prints is returned as text, to be parsed and
graded by the caller. This module holds :class:`Sandbox`, which composes the layers, and
:class:`SandboxPool`.

    python -m gf2env.agents.sandbox --check        # what this machine supports, and the active layers
"""

from __future__ import annotations

import os
import threading
import warnings
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gf2env.agents.sandbox.errors import SandboxConfigError, SandboxUnavailableError
from gf2env.agents.sandbox.isolation import BWRAP, ISOLATIONS, UNSAFE, detect_isolation, host_uid
from gf2env.agents.sandbox.limits import DEFAULT_LIMITS, SandboxLimits, SandboxResult
from gf2env.agents.sandbox.view import check_view, record_view
from gf2env.agents.sandbox.workers import ATTEMPTS, Jail, Worker, WorkerGoneError
from gf2env.agents.sandbox.workspace import Workspace
from gf2env.records.record import Record

_unsafe_warned = False
_warn_lock = threading.Lock()


def _warn_unsafe() -> None:
    global _unsafe_warned
    with _warn_lock:
        if _unsafe_warned:
            return
        _unsafe_warned = True
    warnings.warn(
        f"Sandbox(isolation={UNSAFE!r}): no namespaces and no read-only filesystem; the code can read and "
        "write every file this process can. Use it only where bubblewrap cannot run.",
        RuntimeWarning,
        stacklevel=3,
    )


class Sandbox:
    """Runs code in a fresh, limited process on a warm worker; see the module docstring for the layers.

    Up to ``workers`` (default: one per CPU) warm jails are started as concurrent runs need them, or
    ahead of time with :meth:`start`, and reused while they stay clean. :meth:`close` (or leaving a
    ``with`` block, garbage collection, or the end of the process) stops them."""

    def __init__(
        self,
        limits: SandboxLimits = DEFAULT_LIMITS,
        isolation: str = BWRAP,
        bwrap: str = BWRAP,
        workers: int | None = None,
    ) -> None:
        if not isinstance(limits, SandboxLimits):
            raise SandboxConfigError(f"limits must be a SandboxLimits, got {type(limits).__name__}.")
        if isolation not in ISOLATIONS:
            raise SandboxConfigError(f"isolation={isolation!r} is not one of {ISOLATIONS}.")
        workers = (os.cpu_count() or 1) if workers is None else workers
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise SandboxConfigError(
                f"Sandbox workers={workers!r}: give an integer >= 1 (or None for one per CPU)."
            )
        self.limits = limits
        self.isolation = isolation
        self.workers = workers
        info = detect_isolation(bwrap)
        self.info = info
        if isolation == BWRAP and not info["bwrap"]:
            raise SandboxUnavailableError(
                f"bubblewrap cannot run a sandbox here: {info['bwrap_error']}. Install it with "
                "`apt-get install -y bubblewrap` (unprivileged users also need user namespaces: "
                "`sysctl -w kernel.unprivileged_userns_clone=1`), or opt in to the weaker "
                f"Sandbox(isolation={UNSAFE!r})."
            )
        self.bwrap = str(info["bwrap_path"]) if isolation == BWRAP else ""
        self.seccomp = bool(info["seccomp"])
        layers = ["process-group", "rlimits", "timeout", "output-cap", "memory-watch", "clearenv"]
        if isolation == BWRAP:
            layers[5:5] = [
                "bwrap-namespaces",
                "read-only-fs",
                "no-network",
                "proc-read-only",
                "fresh-scratch",
            ]
            if host_uid() is not None:
                layers.insert(5, "own-host-uid")
        else:
            _warn_unsafe()
        if self.seccomp:
            layers.append("seccomp")
        cgroup = str(info["memory_cgroup"])
        if cgroup:
            layers.append(f"memory-{cgroup}")
        self.layers: tuple[str, ...] = tuple(layers)
        self._jail = Jail(isolation, self.bwrap, self.seccomp, limits.scratch_mb, cgroup, limits.memory_mb)
        self._idle: list[Worker] = []
        self._all: set[Worker] = set()
        self._starting = 0
        self._held = 0  # workers held by open workspaces: they do not count against ``workers``
        self._cond = threading.Condition()
        self._closed = False
        self.workers_started = 0  # warm workers started so far
        self.workers_retired = 0  # and stopped after a run (scratch not wiped, killed, or dead)
        self._finalizer = weakref.finalize(self, _stop_workers, self._all)

    # ------------------------------------------------------------------------ workers
    def start(self, count: int | None = None) -> None:
        """Start warm workers now, in parallel, up to ``count`` (default: ``workers``) in all, so
        that the first runs do not wait for them."""
        with self._cond:
            self._check_open()
            wanted = self.workers if count is None else min(count, self.workers)
            new = max(0, wanted - len(self._all) - self._starting)
            self._starting += new
        if not new:
            return
        started: list[Worker] = []
        try:
            with ThreadPoolExecutor(max_workers=new, thread_name_prefix="sandbox-start") as pool:
                futures = [pool.submit(Worker, self._jail) for _ in range(new)]
                started = [f.result() for f in futures]
        finally:
            with self._cond:
                self._starting -= new
                self.workers_started += len(started)
                for worker in started:
                    self._all.add(worker)
                    self._idle.append(worker)
                self._cond.notify_all()

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxConfigError("this Sandbox is closed; make a new one.")

    def _acquire(self, beyond_workers: bool = False) -> Worker:
        """An idle worker, else a new one if fewer than ``workers`` exist (or ``beyond_workers``: a
        workspace's, which may hold it across a whole episode), else wait for one to come back."""
        with self._cond:
            for _ in range(ATTEMPTS):
                self._check_open()
                for worker in [w for w in self._all if w.owner != os.getpid()]:  # inherited by a fork
                    self._all.discard(worker)
                    if worker in self._idle:
                        self._idle.remove(worker)
                if self._idle:
                    self._held += beyond_workers
                    return self._idle.pop()
                if beyond_workers or len(self._all) - self._held + self._starting < self.workers:
                    self._starting += 1
                    break
                self._cond.wait()
        new: Worker | None = None
        try:
            new = Worker(self._jail)
            return new
        finally:
            with self._cond:
                self._starting -= 1
                if new is not None:
                    self.workers_started += 1
                    self._held += beyond_workers
                    self._all.add(new)
                self._cond.notify_all()

    def _release(self, worker: Worker, held: bool = False) -> None:
        with self._cond:
            self._held -= held
            keep = worker.healthy and not self._closed and len(self._idle) < self.workers
            if keep:
                self._idle.append(worker)
            else:
                self._all.discard(worker)
                self.workers_retired += not (self._closed or worker.healthy)
            self._cond.notify_all()
        if not keep:
            worker.stop()

    def close(self) -> None:
        """Stop every worker (runs in flight finish first and their workers stop then); later runs
        are refused."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            for worker in idle:
                self._all.discard(worker)
        for worker in idle:
            worker.stop()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def workspace(self) -> Workspace:
        """A workspace for one episode: a worker of its own whose scratch persists from run to run
        (files, modules to import), emptied when the workspace closes (:class:`Workspace`). It takes
        an idle worker or starts one, even beyond ``workers``, so that open workspaces never wait on
        each other; a worker beyond ``workers`` is stopped when its workspace closes."""
        return Workspace(self)

    # ------------------------------------------------------------------------ runs
    def run_record(self, code: str, record: Record, *, limits: SandboxLimits | None = None) -> SandboxResult:
        """Run ``code`` with ``record_view(record)``."""
        return self.run(code, record_view(record), limits=limits)

    def run(
        self, code: str, view: dict[str, Any] | None = None, *, limits: SandboxLimits | None = None
    ) -> SandboxResult:
        """Run ``code`` against ``view`` (from :func:`record_view`; None: an empty record), under the
        Sandbox's limits or this run's ``limits`` (any field but ``scratch_mb``, which sizes the jail)."""
        code_bytes, view_json, limits = self._job(code, view, limits)
        while True:
            worker = self._acquire()
            try:
                return worker.run(code_bytes, view_json, limits)
            except WorkerGoneError:  # found dead while idle: the run goes to a fresh worker
                continue
            except BaseException:
                worker.healthy = False
                raise
            finally:
                self._release(worker)
        raise SandboxUnavailableError(f"{ATTEMPTS} sandbox workers in a row died before the run started.")

    def _job(
        self, code: str, view: dict[str, Any] | None, limits: SandboxLimits | None
    ) -> tuple[bytes, str, SandboxLimits]:
        """A run's checked inputs: the code as UTF-8, the view as JSON, the limits that apply."""
        if not isinstance(code, str):
            raise SandboxConfigError(f"code must be a str of Python source, got {type(code).__name__}.")
        try:
            code_bytes = code.encode("utf-8")
        except UnicodeEncodeError as err:
            raise SandboxConfigError(f"code is not encodable as UTF-8 ({err}); pass valid text.") from err
        limits = self.limits if limits is None else limits
        if not isinstance(limits, SandboxLimits):
            raise SandboxConfigError(f"limits must be a SandboxLimits, got {type(limits).__name__}.")
        if limits.scratch_mb != self.limits.scratch_mb:
            raise SandboxConfigError(
                f"a run's limits.scratch_mb={limits.scratch_mb} differs from the Sandbox's "
                f"{self.limits.scratch_mb}: the scratch size is the jail's; make a Sandbox with it."
            )
        return code_bytes, check_view(view), limits


def _stop_workers(workers: set[Worker]) -> None:
    for worker in list(workers):
        worker.stop()
    workers.clear()


class SandboxPool:
    """Runs many jobs on one :class:`Sandbox`, ``size`` at a time (default: its ``workers``), in order."""

    def __init__(self, sandbox: Sandbox, size: int | None = None) -> None:
        if not isinstance(sandbox, Sandbox):
            raise SandboxConfigError(f"SandboxPool needs a Sandbox, got {type(sandbox).__name__}.")
        size = sandbox.workers if size is None else size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise SandboxConfigError(
                f"SandboxPool size={size!r}: give an integer >= 1 (or None for the Sandbox's workers)."
            )
        self.sandbox = sandbox
        self.size = size

    def map(self, jobs: Sequence[tuple[str, dict[str, Any] | None]]) -> list[SandboxResult]:
        """Run every ``(code, view)`` job; the results come back in the jobs' order."""
        jobs = list(jobs)
        for i, job in enumerate(jobs):
            if not isinstance(job, tuple) or len(job) != 2:
                raise SandboxConfigError(
                    f"job {i} is {job!r:.80}; give (code, view) pairs, view None for none."
                )
        if not jobs:
            return []
        with ThreadPoolExecutor(max_workers=min(self.size, len(jobs)), thread_name_prefix="sandbox") as pool:
            return list(pool.map(lambda job: self.sandbox.run(job[0], job[1]), jobs))
