"""Isolation: the bubblewrap command line (namespaces, read-only filesystem, no network, clearenv), the
host identity a jail runs as (:func:`host_uid`: never root), and what this machine supports, found by
trying (:func:`detect_isolation`: bwrap, seccomp, user namespaces)."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from gf2env.agents.sandbox import inside as harness
from gf2env.agents.sandbox.cgroups import cgroup_support
from gf2env.agents.sandbox.errors import SandboxConfigError
from gf2env.agents.sandbox.limits import SCRATCH_INODES, jail_rlimits

BWRAP = "bwrap"
UNSAFE = "UNSAFE-rlimits-only"
ISOLATIONS = (BWRAP, UNSAFE)
HARNESS_PATH = Path(harness.__file__).resolve()
SANDBOX_UID = 65534  # the uid a run has inside its jail
# The host uid of a jail when gf2env runs as root: bubblewrap started by root would map the jail's uid
# to host root (whose files include every global sysctl), so the wrapper becomes an unprivileged uid
# first: HOST_UID_BASE plus the worker's host pid (its wrapper's, which bwrap keeps for the worker's
# life), so that no two live jails share a uid, nor the kernel's per-uid counts (tasks, pipe buffers,
# queued signals). The range is nobody's: above the uids that systemd gives containers (up to
# 0x6FFFFFFF), below 2**31 for every pid up to the kernel's largest pid_max (2**22).
HOST_UID_BASE = harness.HOST_UID_BASE
WORKER_UID = harness.WORKER_UID  # what the wrapper is told: become HOST_UID_BASE + its own pid
# One fixed uid for every jail instead, where that range is not mapped (a container with a short uid
# map); the jails then share that uid's per-user counts.
HOST_UID_ENV = "GF2_SANDBOX_HOST_UID"
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
# every namespace (user, pid, net, ipc, uts, cgroup), no nested user namespaces, SIGKILL with the parent,
# a new session (no terminal to inject into), an empty environment but SANDBOX_ENV, and no bwrap init:
# the fork server is the jail's pid 1 itself (not dumpable, so no run can open its memory or fds)
BWRAP_FLAGS = (
    "--unshare-all",
    "--unshare-user",
    "--disable-userns",
    "--die-with-parent",
    "--new-session",
    "--clearenv",
    "--as-pid-1",
)
# The fork server keeps one capability, in the jail's own user namespace only: mounting, to give every
# run and episode a new scratch tmpfs and to make /proc/sys read-only (inside.py); each run drops it.
SERVER_CAPS = ("CAP_SYS_ADMIN",)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("/etc/ld.so.cache",)


def interpreter() -> tuple[str, str]:
    """The base Python binary (inside ``sys.base_prefix``) and that prefix."""
    prefix = os.path.realpath(sys.base_prefix)
    v = sys.version_info
    for name in (f"python{v.major}.{v.minor}", f"python{v.major}", "python"):
        candidate = os.path.join(prefix, "bin", name)
        if os.access(candidate, os.X_OK):
            return candidate, prefix
    executable = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    return executable, prefix


def numpy_site() -> str:
    """The site-packages directory holding numpy ('' when numpy is not installed)."""
    spec = importlib.util.find_spec("numpy")
    if spec is None or spec.origin is None:
        return ""
    return str(Path(spec.origin).resolve().parent.parent)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def host_uid() -> str | None:
    """The host uid (and gid) the wrapper makes a jail: None when this process is not root (the jail is
    then this user, unprivileged already), else :data:`WORKER_UID` (a uid of the worker's own:
    HOST_UID_BASE plus its pid) or the fixed uid ``$GF2_SANDBOX_HOST_UID``."""
    if os.geteuid() != 0:
        return None
    raw = os.environ.get(HOST_UID_ENV, "")
    if not raw:
        return WORKER_UID
    if not raw.isdigit() or not 0 < int(raw) < 2**32 - 1:
        raise SandboxConfigError(
            f"{HOST_UID_ENV}={raw!r}: give an unused uid other than 0 (a positive integer below 2**32 - 1)."
        )
    return raw


def scratch_spec(scratch_mb: int) -> str:
    """How the fork server makes each new scratch: a tmpfs of ``scratch_mb`` MiB and SCRATCH_INODES."""
    return f"tmpfs:{scratch_mb}:{SCRATCH_INODES}"


def bwrap_argv(bwrap: str) -> list[str]:
    """bwrap and its options, up to the command: the harness at /sandbox/harness.py, numpy's
    site-packages at /sandbox/site-packages, a mount point at /scratch (/tmp links to it) on which the
    fork server mounts each run's scratch (:func:`scratch_spec`)."""
    python, prefix = interpreter()
    uid = str(SANDBOX_UID)
    argv = [bwrap, *BWRAP_FLAGS, "--cap-drop", "ALL"]
    for cap in SERVER_CAPS:
        argv += ["--cap-add", cap]
    argv += ["--uid", uid, "--gid", uid, "--hostname", "gf2-sandbox"]
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
    site = numpy_site()
    if site:
        argv += ["--ro-bind", site, "/sandbox/site-packages"]
    argv += ["--ro-bind", str(HARNESS_PATH), "/sandbox/harness.py"]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", "4096", "--perms", "0700", "--tmpfs", "/scratch"]  # covered by the server's
    argv += ["--symlink", "/scratch", "/tmp"]  # one tmpfs: the memory budget counts it once
    # the root (bwrap's tmpfs) and /dev read-only: only /scratch can be written
    argv += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/scratch"]
    assert python.startswith(prefix) or any(_within(python, d) for d in SYSTEM_DIRS), python
    return argv


def limit_command(program: list[str], cgroup_procs: str = "-", uid: str | None = None) -> list[str]:
    """The host's command line for ``program`` under the trusted wrapper (``harness.py limit``): join
    the cgroup whose ``cgroup.procs`` is ``cgroup_procs``, set the jail's rlimits, and with a ``uid``
    (:func:`host_uid`) stage what bwrap binds and become that uid."""
    python, _ = interpreter()
    limits = harness.format_rlimits(jail_rlimits(own_host_uid=uid == WORKER_UID))
    return [
        python,
        *PYTHON_FLAGS,
        str(HARNESS_PATH),
        "limit",
        limits,
        cgroup_procs,
        uid or "-",
        "--",
        *program,
    ]


def jail_command(bwrap: str, command: list[str], cgroup_procs: str = "-") -> list[str]:
    """The host's command line for ``harness.py COMMAND...`` in a jail: the wrapper
    (:func:`limit_command`, as :func:`host_uid` on a root host), then bwrap, then the harness."""
    python, _ = interpreter()
    jailed = [*bwrap_argv(bwrap), python, *PYTHON_FLAGS, "/sandbox/harness.py", *command]
    return limit_command(jailed, cgroup_procs, host_uid())


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
    python, prefix = interpreter()
    info: dict[str, bool | str] = {
        "machine": platform.machine(),
        "python": python,
        "python_prefix": prefix,
        "numpy_site": numpy_site(),
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
    info["memory_cgroup"], info["memory_cgroup_error"] = cgroup_support()
    uid = host_uid()
    own = f"{HOST_UID_BASE} + the worker's pid" if uid == WORKER_UID else uid
    info["jail_host_uid"] = own or str(os.geteuid())  # never 0: see host_uid
    found = shutil.which(bwrap) or ""
    info["bwrap_path"] = found
    if not found:
        info["bwrap"], info["bwrap_error"] = False, f"no executable {bwrap!r} on PATH"
    else:
        report, error = _probe(jail_command(found, ["probe", "jail", "/scratch", scratch_spec(1)]))
        if not error and report.get("uid") != SANDBOX_UID:
            error = f"the sandboxed probe ran as uid {report.get('uid')}, not {SANDBOX_UID}"
        elif not error and report.get("mounts") is not True:
            error = (
                "the jail's fork server cannot mount its scratch tmpfs or make /proc read-only "
                f"({report.get('mounts')}); a security module may deny mounts in bwrap's user namespace"
            )
        info["bwrap"], info["bwrap_error"] = not error, error
    return tuple(info.items())


def detect_isolation(bwrap: str = BWRAP) -> dict[str, bool | str]:
    """What this machine supports, found by trying (cached): bwrap, seccomp, user namespaces, a
    memory cgroup per worker (``memory_cgroup``: ``cgroup-v2``, ``cgroup-v1`` or ''), paths."""
    return dict(_detect(bwrap))
