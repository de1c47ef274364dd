"""Run untrusted, model-written Python against one task record, behind several independent layers.

Each :meth:`Sandbox.run` starts a fresh process tree in its own session and process group:

1. ``process-group`` (:mod:`~agents.sandbox.supervise`): the tree is SIGKILLed as a group at the end
   (and under bwrap its pid namespace dies with it), so nothing the code started outlives the run;
2. ``bwrap-namespaces``, ``read-only-fs``, ``no-network`` (:mod:`~agents.sandbox.isolation`):
   bubblewrap with every namespace unshared, uid 65534, no capabilities, a read-only root holding
   only ``/usr``, the Python installation and numpy's site-packages, size-capped tmpfs ``/tmp`` and
   ``/scratch`` (the working directory);
3. ``clearenv`` (:mod:`~agents.sandbox.isolation`): none of the host's environment reaches the
   sandbox (not even bwrap's own, which a sandboxed process could read from ``/proc/1/environ``);
4. ``rlimits`` (:mod:`~agents.sandbox.limits`, set in :mod:`~agents.sandbox.inside`): CPU seconds,
   address space, file size, open files, no core dumps, set by a trusted wrapper before bwrap or
   Python start;
5. ``seccomp`` (:mod:`~agents.sandbox.inside`): a classic-BPF filter (x86_64) the harness installs
   before the code runs: no sockets, no new processes or programs (threads still work), no signals
   to other processes, no ptrace, mounts, namespaces, keyrings, bpf, modules, io_uring;
6. ``timeout`` and ``output-cap`` (:mod:`~agents.sandbox.supervise`): the parent kills the group
   after ``wall_s`` or once stdout or stderr passes ``output_bytes``.

The code sees ``record`` (:func:`~agents.sandbox.view.record_view`, never the target) and the
shortcuts ``n, p, d, g, K, prefix, samples``; what it prints is returned as text, to be parsed and
graded by the caller. This module holds :class:`Sandbox`, which composes the layers, and
:class:`SandboxPool`.

    python -m agents.sandbox --check        # what this machine supports, and the active layers
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from agents.sandbox import inside as harness
from agents.sandbox.errors import SandboxConfigError, SandboxUnavailableError
from agents.sandbox.isolation import (
    BWRAP,
    HARNESS_PATH,
    HOST_ENV,
    ISOLATIONS,
    PYTHON_FLAGS,
    SANDBOX_ENV,
    UNSAFE,
    bwrap_argv,
    detect_isolation,
    interpreter,
    numpy_site,
)
from agents.sandbox.limits import DEFAULT_LIMITS, STOP_REASONS, SandboxLimits, SandboxResult
from agents.sandbox.supervise import Streams, supervise
from agents.sandbox.view import check_view, record_view
from gf2env.records import Record

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
    """Runs code in a fresh, limited process tree; see the module docstring for the layers."""

    def __init__(
        self, limits: SandboxLimits = DEFAULT_LIMITS, isolation: str = BWRAP, bwrap: str = BWRAP
    ) -> None:
        if not isinstance(limits, SandboxLimits):
            raise SandboxConfigError(f"limits must be a SandboxLimits, got {type(limits).__name__}.")
        if isolation not in ISOLATIONS:
            raise SandboxConfigError(f"isolation={isolation!r} is not one of {ISOLATIONS}.")
        self.limits = limits
        self.isolation = isolation
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
        layers = ["process-group", "rlimits", "timeout", "output-cap", "clearenv"]
        if isolation == BWRAP:
            layers[4:4] = ["bwrap-namespaces", "read-only-fs", "no-network"]
        else:
            _warn_unsafe()
        if self.seccomp:
            layers.append("seccomp")
        self.layers: tuple[str, ...] = tuple(layers)

    def run_record(self, code: str, record: Record) -> SandboxResult:
        """Run ``code`` with ``record_view(record)``."""
        return self.run(code, record_view(record))

    def run(self, code: str, view: dict[str, Any] | None = None) -> SandboxResult:
        """Run ``code`` against ``view`` (from :func:`record_view`; None: an empty record)."""
        if not isinstance(code, str):
            raise SandboxConfigError(f"code must be a str of Python source, got {type(code).__name__}.")
        try:
            code_bytes = code.encode("utf-8")
        except UnicodeEncodeError as err:
            raise SandboxConfigError(f"code is not encodable as UTF-8 ({err}); pass valid text.") from err
        view_json = check_view(view)
        tmp = tempfile.mkdtemp(prefix="gf2-sandbox-")
        try:
            return self._run_in(tmp, code_bytes, view_json)
        finally:
            _remove_tree(tmp)

    def _command(
        self, tmp: str, code: bytes, view_json: str, report_fd: int
    ) -> tuple[list[str], dict[str, str], str]:
        python, _ = interpreter()
        site = numpy_site()
        host = {
            "code.py": os.path.join(tmp, "code.py"),
            "record.json": os.path.join(tmp, "record.json"),
            "job.json": os.path.join(tmp, "job.json"),
        }
        Path(host["code.py"]).write_bytes(code)
        Path(host["record.json"]).write_text(view_json)
        if self.isolation == BWRAP:
            inside = {name: f"/sandbox/{name}" for name in host}
            sites = ["/sandbox/site-packages"] if site else []
            script, env, cwd = "/sandbox/harness.py", HOST_ENV, tmp
            prefix = bwrap_argv(self.bwrap, self.limits, host)
        else:
            inside, sites, script = host, [site] if site else [], str(HARNESS_PATH)
            cwd = os.path.join(tmp, "scratch")
            os.mkdir(cwd, 0o700)
            env, prefix = {**SANDBOX_ENV, "HOME": cwd}, []
        job = {
            "code": inside["code.py"],
            "record": inside["record.json"],
            "site": sites,
            "seccomp": self.seccomp,
            "imports": None if self.limits.imports is None else list(self.limits.imports),
            "denied_builtins": list(self.limits.denied_builtins),
        }
        Path(host["job.json"]).write_text(json.dumps(job))
        limits = harness.format_rlimits(self.limits.rlimits())
        wrapper = [python, *PYTHON_FLAGS, str(HARNESS_PATH), "limit", limits, str(report_fd), "--"]
        return [*wrapper, *prefix, python, *PYTHON_FLAGS, script, "run", inside["job.json"]], env, cwd

    def _run_in(self, tmp: str, code: bytes, view_json: str) -> SandboxResult:
        def command(report_fd: int) -> tuple[list[str], dict[str, str], str]:
            return self._command(tmp, code, view_json, report_fd)

        return self._result(*supervise(command, self.limits))

    def _result(self, streams: Streams, status: int, cpu: float, wall: float, stop: str) -> SandboxResult:
        code: int | None = None
        sig: int | None = None
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
        else:
            code = os.WEXITSTATUS(status)
            if self.isolation == BWRAP and 128 < code < 128 + signal.NSIG:  # bwrap's report of a signal
                sig, code = code - 128, None
        if stop:
            reason = stop
        elif sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= self.limits.cpu_s):
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
        fds = list(streams.files)
        out, out_cut, out_n = streams.text(fds[0])
        err, err_cut, err_n = streams.text(fds[1])
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
        )


def _remove_tree(path: str) -> None:
    """Delete a run's temp directory; what cannot be deleted is warned about, not hidden."""

    def complain(func: Any, name: str, exc: Any) -> None:
        error = exc[1] if isinstance(exc, tuple) else exc
        warnings.warn(
            f"could not remove the sandbox's temporary {name}: {error}", RuntimeWarning, stacklevel=2
        )

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=complain)
    else:
        shutil.rmtree(path, onerror=complain)


class SandboxPool:
    """Runs many jobs on one :class:`Sandbox`, ``size`` at a time (default: one per CPU), in order."""

    def __init__(self, sandbox: Sandbox, size: int | None = None) -> None:
        if not isinstance(sandbox, Sandbox):
            raise SandboxConfigError(f"SandboxPool needs a Sandbox, got {type(sandbox).__name__}.")
        size = (os.cpu_count() or 1) if size is None else size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise SandboxConfigError(
                f"SandboxPool size={size!r}: give an integer >= 1 (or None for one per CPU)."
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
