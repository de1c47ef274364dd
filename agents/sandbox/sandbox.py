"""Run untrusted, model-written Python against one task record, behind several independent layers.

Each :meth:`Sandbox.run` starts a fresh process tree in its own session and process group:

1. ``process-group``: the tree is SIGKILLed as a group at the end (and under bwrap its pid namespace
   dies with it), so nothing the code started outlives the run;
2. ``bwrap-namespaces``, ``read-only-fs``, ``no-network``: bubblewrap with every namespace unshared,
   uid 65534, no capabilities, a read-only root holding only ``/usr``, the Python installation and
   numpy's site-packages, size-capped tmpfs ``/tmp`` and ``/scratch`` (the working directory);
3. ``clearenv``: none of the host's environment reaches the sandbox (not even bwrap's own, which a
   sandboxed process could read from ``/proc/1/environ``);
4. ``rlimits``: CPU seconds, address space, file size, open files, no core dumps, set by a trusted
   wrapper before bwrap or Python start;
5. ``seccomp``: a classic-BPF filter (x86_64) the harness installs before the code runs: no sockets,
   no new processes or programs (threads still work), no signals to other processes, no ptrace,
   mounts, namespaces, keyrings, bpf, modules, io_uring;
6. ``timeout`` and ``output-cap``: the parent kills the group after ``wall_s`` or once stdout or
   stderr passes ``output_bytes``.

The code sees ``record`` (:func:`record_view`, never the target) and the shortcuts ``n, p, d, g, K,
prefix, samples``; what it prints is returned as text, to be parsed and graded by the caller.

    python -m agents.sandbox --check        # what this machine supports, and the active layers
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import math
import os
import platform
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agents.sandbox import inside as harness
from gf2env.errors import GF2ConfigError
from gf2env.records import Record

BWRAP = "bwrap"
UNSAFE = "UNSAFE-rlimits-only"
ISOLATIONS = (BWRAP, UNSAFE)
HARNESS_PATH = Path(harness.__file__).resolve()
SANDBOX_UID = 65534
NPROC_LIMIT = 512  # root ignores RLIMIT_NPROC; the seccomp clone check is what stops fork storms
VIEW_KEYS = ("n", "p", "d", "g", "K", "prefix", "samples")
EMPTY_VIEW: dict[str, Any] = {"n": 0, "p": 0, "d": 0, "g": 0, "K": 0, "prefix": [], "samples": []}
STOP_REASONS = ("exited", "error", "timeout", "cpu_limit", "memory_limit", "output_limit", "killed")
HOST_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}  # all bwrap itself gets from the host
SANDBOX_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/scratch",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "2",  # else each thread's 64 MiB malloc arena eats the address-space limit
}
# -S: no site; -s: no user site; -B: no bytecode. Not -I: it would ignore PYTHONHASHSEED; the
# environment is ours alone, and the harness drops its own directory from sys.path.
PYTHON_FLAGS = ("-S", "-s", "-B")
DRAIN_S = 1.0  # how long stragglers may hold the pipes once the child has exited or been killed
POLL_S = 0.02  # exit polling when pidfd_open is unavailable
# every namespace (user, pid, net, ipc, uts, cgroup), no nested user namespaces, SIGKILL with the parent,
# a new session (no terminal to inject into), and an empty environment but SANDBOX_ENV
BWRAP_FLAGS = (
    "--unshare-all",
    "--unshare-user",
    "--disable-userns",
    "--die-with-parent",
    "--new-session",
    "--clearenv",
)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("/etc/ld.so.cache",)


class SandboxConfigError(GF2ConfigError):
    """Bad sandbox limits, isolation mode, code or record view."""


class SandboxUnavailableError(GF2ConfigError):
    """The requested isolation cannot run on this machine."""


@dataclass(frozen=True)
class SandboxLimits:
    """Per-run limits. ``memory_mb`` is the address space of each process; ``scratch_mb`` sizes the
    tmpfs at ``/scratch`` and at ``/tmp`` (bwrap only; the UNSAFE mode writes to a host tempdir)."""

    wall_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 1024
    file_size_mb: int = 16
    open_files: int = 64
    output_bytes: int = 65536
    scratch_mb: int = 64

    def __post_init__(self) -> None:
        wall = self.wall_s
        if (
            isinstance(wall, bool)
            or not isinstance(wall, (int, float))
            or not math.isfinite(wall)
            or wall <= 0
        ):
            raise SandboxConfigError(f"SandboxLimits.wall_s={wall!r}: give a finite number of seconds > 0.")
        minimum = {
            "cpu_s": 1,
            "memory_mb": 128,
            "file_size_mb": 1,
            "open_files": 16,
            "output_bytes": 1,
            "scratch_mb": 1,
        }
        why = {
            "memory_mb": " (Python and numpy need about 100 MiB of address space to start)",
            "open_files": " (Python needs a dozen descriptors to start)",
        }
        for name, low in minimum.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise SandboxConfigError(
                    f"SandboxLimits.{name}={value!r}: give an integer >= {low}{why.get(name, '')}."
                )

    def rlimits(self) -> dict[str, tuple[int, int]]:
        """The ``resource`` limits (soft, hard) the wrapper sets; the CPU hard limit is a second later."""
        mib = 1 << 20
        return {
            "RLIMIT_CPU": (self.cpu_s, self.cpu_s + 1),
            "RLIMIT_AS": (self.memory_mb * mib,) * 2,
            "RLIMIT_FSIZE": (self.file_size_mb * mib,) * 2,
            "RLIMIT_NOFILE": (self.open_files,) * 2,
            "RLIMIT_CORE": (0, 0),
            "RLIMIT_NPROC": (NPROC_LIMIT,) * 2,
        }


DEFAULT_LIMITS = SandboxLimits()


@dataclass(frozen=True)
class SandboxResult:
    """What one run did. ``stdout``/``stderr`` hold at most ``output_bytes`` each (decoded with
    replacement); ``*_bytes`` count all that was seen before the run ended."""

    stdout: str
    stderr: str
    exit_code: int | None
    signal: int | None
    wall_s: float
    cpu_s: float
    stop_reason: str
    stdout_truncated: bool
    stderr_truncated: bool
    stdout_bytes: int
    stderr_bytes: int

    @property
    def ok(self) -> bool:
        return self.stop_reason == "exited" and self.exit_code == 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


# ---------------------------------------------------------------------------- the record view
def record_view(record: Record) -> dict[str, Any]:
    """What the sandboxed code may see of ``record``: everything but the target (the answer)."""
    if not isinstance(record, Record):
        raise SandboxConfigError(
            f"record_view needs a gf2env.records.Record, got {type(record).__name__}; "
            "load records with gf2env.records.read_records or Record.from_json."
        )
    bits = np.concatenate([record.address, record.payload], axis=1).astype(np.uint8)
    chars = bits + np.uint8(ord("0"))
    samples = []
    for row, y in zip(chars, record.labels, strict=True):
        s = row.tobytes().decode("ascii")
        samples.append(
            {
                "x": int(s, 2) if s else 0,
                "bits": s,
                "address": s[: record.n],
                "payload": s[record.n :],
                "y": int(y),
            }
        )
    return {
        "n": int(record.n),
        "p": int(record.p),
        "d": int(record.d),
        "g": int(record.g),
        "K": int(record.K),
        "prefix": [[int(i) for i in term] for term in record.prefix],
        "samples": samples,
    }


def _check_view(view: dict[str, Any] | None) -> str:
    """The view as JSON, after refusing one that is not a dict, lacks a key or carries a target."""
    if view is None:
        view = EMPTY_VIEW
    if not isinstance(view, dict):
        raise SandboxConfigError(
            f"view must be a dict from record_view(record) or None, got {type(view).__name__}."
        )
    if "target" in view:
        raise SandboxConfigError(
            "view has a 'target' key: the sandboxed code must never see the answer; "
            "build the view with record_view(record)."
        )
    missing = [key for key in VIEW_KEYS if key not in view]
    if missing:
        raise SandboxConfigError(f"view lacks the keys {missing}; build it with record_view(record).")
    try:
        return json.dumps(view)
    except (TypeError, ValueError) as err:
        raise SandboxConfigError(
            f"view is not JSON-serialisable ({err}); build it with record_view(record)."
        ) from err


# ---------------------------------------------------------------------------- what the machine has
def _interpreter() -> tuple[str, str]:
    """The base Python binary (inside ``sys.base_prefix``) and that prefix."""
    prefix = os.path.realpath(sys.base_prefix)
    v = sys.version_info
    for name in (f"python{v.major}.{v.minor}", f"python{v.major}", "python"):
        candidate = os.path.join(prefix, "bin", name)
        if os.access(candidate, os.X_OK):
            return candidate, prefix
    executable = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    return executable, prefix


def _numpy_site() -> str:
    """The site-packages directory holding numpy ('' when numpy is not installed)."""
    spec = importlib.util.find_spec("numpy")
    if spec is None or spec.origin is None:
        return ""
    return str(Path(spec.origin).resolve().parent.parent)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _bwrap_argv(bwrap: str, limits: SandboxLimits, files: dict[str, str]) -> list[str]:
    """bwrap and its options, up to the command; ``files`` maps names under /sandbox to host paths."""
    python, prefix = _interpreter()
    uid = str(SANDBOX_UID)
    argv = [bwrap, *BWRAP_FLAGS, "--cap-drop", "ALL", "--uid", uid, "--gid", uid, "--hostname", "gf2-sandbox"]
    for key, value in SANDBOX_ENV.items():
        argv += ["--setenv", key, value]
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    for path in ETC_FILES:
        argv += ["--ro-bind-try", path, path]
    if not any(_within(prefix, d) for d in SYSTEM_DIRS):
        argv += ["--ro-bind", prefix, prefix]
    site = _numpy_site()
    if site:
        argv += ["--ro-bind", site, "/sandbox/site-packages"]
    argv += ["--ro-bind", str(HARNESS_PATH), "/sandbox/harness.py"]
    for name, host in files.items():
        argv += ["--ro-bind", host, f"/sandbox/{name}"]
    size = str(limits.scratch_mb << 20)
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/tmp"]
    argv += ["--size", size, "--perms", "0700", "--tmpfs", "/scratch"]
    # the root (bwrap's tmpfs) and /dev read-only: only /tmp and /scratch can be written
    argv += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/scratch"]
    assert python.startswith(prefix) or any(_within(python, d) for d in SYSTEM_DIRS), python
    return argv


def _probe(argv: list[str]) -> tuple[dict[str, Any], str]:
    """Run a harness probe; its JSON report, or {} and why it failed."""
    try:
        done = subprocess.run(argv, env=HOST_ENV, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as err:
        return {}, f"{argv[0]} could not run: {err}"
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    if done.returncode != 0 or not lines:
        detail = done.stderr.decode(errors="replace").strip() or f"exit status {done.returncode}"
        return {}, f"{argv[0]} failed: {detail}"
    try:
        return json.loads(lines[-1]), ""
    except ValueError:
        return {}, f"the probe printed {lines[-1]!r}, not JSON"


@functools.lru_cache(maxsize=8)
def _detect(bwrap: str) -> tuple[tuple[str, bool | str], ...]:
    python, prefix = _interpreter()
    info: dict[str, bool | str] = {
        "machine": platform.machine(),
        "python": python,
        "python_prefix": prefix,
        "numpy_site": _numpy_site(),
    }
    max_userns = Path("/proc/sys/user/max_user_namespaces")
    info["user_namespaces"] = Path("/proc/self/ns/user").exists() and (
        not max_userns.exists() or max_userns.read_text().strip() not in ("", "0")
    )
    reason = harness.seccomp_supported()
    report: dict[str, Any] = {}
    if not reason:
        report, reason = _probe([python, *PYTHON_FLAGS, str(HARNESS_PATH), "probe", "seccomp"])
        if report and not report.get("seccomp"):
            reason = str(report.get("seccomp_error", "the filter did not install"))
        elif report and not all(report.get(f"{k}_blocked") for k in ("socket", "fork", "execve")):
            reason = f"the filter installed but did not block everything: {report}"
    info["seccomp"] = not reason
    info["seccomp_error"] = reason
    found = shutil.which(bwrap) or ""
    info["bwrap_path"] = found
    if not found:
        info["bwrap"], info["bwrap_error"] = False, f"no executable {bwrap!r} on PATH"
    else:
        argv = [
            *_bwrap_argv(found, DEFAULT_LIMITS, {}),
            python,
            *PYTHON_FLAGS,
            "/sandbox/harness.py",
            "probe",
        ]
        report, error = _probe(argv)
        if not error and report.get("uid") != SANDBOX_UID:
            error = f"the sandboxed probe ran as uid {report.get('uid')}, not {SANDBOX_UID}"
        info["bwrap"], info["bwrap_error"] = not error, error
    return tuple(info.items())


def detect_isolation(bwrap: str = BWRAP) -> dict[str, bool | str]:
    """What this machine supports, found by trying (cached): bwrap, seccomp, user namespaces, paths."""
    return dict(_detect(bwrap))


# ---------------------------------------------------------------------------- running
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


class _Streams:
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
        view_json = _check_view(view)
        tmp = tempfile.mkdtemp(prefix="gf2-sandbox-")
        try:
            return self._run_in(tmp, code_bytes, view_json)
        finally:
            _remove_tree(tmp)

    def _command(
        self, tmp: str, code: bytes, view_json: str, report_fd: int
    ) -> tuple[list[str], dict[str, str], str]:
        python, _ = _interpreter()
        site = _numpy_site()
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
            prefix = _bwrap_argv(self.bwrap, self.limits, host)
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
        }
        Path(host["job.json"]).write_text(json.dumps(job))
        limits = harness.format_rlimits(self.limits.rlimits())
        wrapper = [python, *PYTHON_FLAGS, str(HARNESS_PATH), "limit", limits, str(report_fd), "--"]
        return [*wrapper, *prefix, python, *PYTHON_FLAGS, script, "run", inside["job.json"]], env, cwd

    def _run_in(self, tmp: str, code: bytes, view_json: str) -> SandboxResult:
        report_r, report_w = os.pipe()
        try:
            argv, env, cwd = self._command(tmp, code, view_json, report_w)
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
        streams = _Streams(proc, self.limits.output_bytes)
        pidfd = None
        try:
            if hasattr(os, "pidfd_open"):
                try:
                    pidfd = os.pidfd_open(proc.pid)
                    streams.selector.register(pidfd, selectors.EVENT_READ)
                except OSError:
                    pidfd = None
            stop, tree_cpu = self._watch(proc, streams, pidfd, start)
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
        return self._result(streams, status, cpu, wall, stop)

    def _watch(
        self, proc: subprocess.Popen, streams: _Streams, pidfd: int | None, start: float
    ) -> tuple[str, float]:
        """Pump the pipes until the child exits (''), the deadline passes or the output cap is hit."""
        deadline = start + self.limits.wall_s
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

    def _result(self, streams: _Streams, status: int, cpu: float, wall: float, stop: str) -> SandboxResult:
        code: int | None = None
        sig: int | None = None
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
        else:
            code = os.WEXITSTATUS(status)
            if self.isolation == BWRAP and 128 < code < 128 + signal.NSIG:  # bwrap's report of a signal
                code, sig = None, code - 128
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


# ---------------------------------------------------------------------------- command line
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agents.sandbox", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="print what this machine supports and the layers"
    )
    parser.add_argument(
        "--run", metavar="FILE", help="run FILE's code in the sandbox (empty record), print the result"
    )
    parser.add_argument("--isolation", choices=ISOLATIONS, default=BWRAP)
    parser.add_argument("--bwrap", default=BWRAP, help="the bubblewrap executable")
    args = parser.parse_args(argv)
    if not (args.check or args.run):
        parser.error("give --check or --run FILE")
    if args.check:
        print(json.dumps({"isolation": detect_isolation(args.bwrap)}, indent=2))
        for mode in ISOLATIONS:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    layers: Any = list(Sandbox(isolation=mode, bwrap=args.bwrap).layers)
            except SandboxUnavailableError as err:
                layers = f"unavailable: {err}"
            print(json.dumps({"mode": mode, "layers": layers}))
    if args.run:
        sandbox = Sandbox(isolation=args.isolation, bwrap=args.bwrap)
        print(json.dumps(sandbox.run(Path(args.run).read_text()).to_dict(), indent=2))
    return 0
