"""A memory cgroup per warm worker, where this machine lets the host make one (root, or a delegated
cgroup v2 subtree): the kernel then holds the worker's whole tree (its processes, the scratch tmpfs,
page cache and kernel memory it causes) under the budget, and reports the tree's exact peak.

Found by trying (:func:`cgroup_support`): cgroup v2 where the memory controller can be enabled below
this process's own cgroup, else cgroup v1's memory hierarchy where it is writable, else none (the
sandbox then relies on the address-space partition and the host's watch; see :mod:`.workers`).
"""

from __future__ import annotations

import functools
import itertools
import os
import signal
import subprocess
import time
import warnings
from pathlib import Path

V1, V2 = "cgroup-v1", "cgroup-v2"
# per version: the limit, the swap limit, the peak (v1: resettable), where OOM kills are counted
FILES = {
    V1: (
        "memory.limit_in_bytes",
        "memory.memsw.limit_in_bytes",
        "memory.max_usage_in_bytes",
        "memory.oom_control",
    ),
    V2: ("memory.max", "memory.swap.max", "memory.peak", "memory.events"),
}
_count = itertools.count()
EMPTY_S = 10.0  # how long a worker's processes may take to go (a killed tree freeing a full scratch)


def _own_path(version: str) -> str:
    """This process's cgroup path in the hierarchy of ``version`` ('' when there is none)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if version == V2 and number == "0" and controllers == "":
            return path
        if version == V1 and "memory" in controllers.split(","):
            return path
    return ""


def _mount(version: str) -> str:
    """Where the hierarchy of ``version`` is mounted ('' when it is not)."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fstype, _, options = right.split(" ", 2)
        point = left.split()[4]
        if version == V2 and fstype == "cgroup2":
            return point
        if version == V1 and fstype == "cgroup" and "memory" in options.split()[-1].split(","):
            return point
    return ""


def _parent(version: str) -> Path:
    """The cgroup below which the workers' groups go; raises OSError when none can be used."""
    mount, own = _mount(version), _own_path(version)
    if not mount or not own:
        raise OSError(f"no {version} memory hierarchy for this process")
    base = Path(mount) / own.lstrip("/")
    if version == V2:
        controllers = (base / "cgroup.controllers").read_text().split()
        if "memory" not in controllers:
            raise OSError(f"the memory controller is not delegated to {base}")
        if "memory" not in (base / "cgroup.subtree_control").read_text().split():
            (base / "cgroup.subtree_control").write_text("+memory")  # refused if base holds processes
    return base


@functools.lru_cache(maxsize=1)
def cgroup_support() -> tuple[str, str]:
    """``(version, '')`` for the cgroup version the workers can use, or ``('', why not)``, by making
    a group with a memory limit, moving a short-lived process into it as a worker's wrapper does, and
    removing it (cached)."""
    reasons = []
    for version in (V2, V1):
        try:
            group = MemoryCgroup(version, 64)
        except (OSError, ValueError) as err:
            reasons.append(f"{version}: {err}")
            continue
        try:
            joined = subprocess.run(
                ["/bin/sh", "-c", 'echo $$ > "$1"', "sh", group.procs], capture_output=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            joined = subprocess.CompletedProcess([], 1, b"", str(err).encode())
        group.remove()
        if joined.returncode == 0:
            _remove_stale(group.path.parent)
            return version, ""
        reasons.append(f"{version}: a process cannot join {group.path}: {joined.stderr.decode().strip()}")
    return "", "; ".join(reasons)


def _remove_stale(parent: Path) -> None:
    """Remove the empty groups that hosts killed before they could (``gf2-sandbox-<pid>-<n>`` of a
    pid that is gone); a group that still holds a process stays."""
    for path in parent.glob("gf2-sandbox-*-*"):
        pid = path.name.split("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            try:
                path.rmdir()
            except OSError:
                pass


class MemoryCgroup:
    """One worker's memory cgroup, limited to ``limit_mb`` with no swap; the worker's wrapper joins it
    by writing its pid to :attr:`procs` before it starts anything."""

    def __init__(self, version: str, limit_mb: int) -> None:
        self.version = version
        limit, swap, self._peak, self._events = FILES[version]
        self.path = _parent(version) / f"gf2-sandbox-{os.getpid()}-{next(_count)}"
        self._limit, self._swap = limit, swap
        self.procs = str(self.path / "cgroup.procs")
        self.path.mkdir()
        try:
            self.set_limit(limit_mb)
        except OSError:
            self.remove()
            raise

    def set_limit(self, limit_mb: int) -> None:
        """Hold the group to ``limit_mb`` MiB, swap included (v1 wants memory+swap at least the memory
        limit: raised in the order that keeps that true)."""
        memory = self.path / self._limit
        swap = self.path / self._swap
        if self.version == V2:
            memory.write_text(str(limit_mb << 20))
            if swap.exists():
                swap.write_text("0")
            return
        value = str(limit_mb << 20)
        current = int(memory.read_text())
        order = [memory, swap] if (limit_mb << 20) <= current else [swap, memory]
        for path in order:
            if path.exists():
                path.write_text(value)

    def reset_peak(self) -> None:
        """Start a new peak (v1; cgroup v2's peak runs from the group's start, an upper bound)."""
        if self.version == V1:
            (self.path / self._peak).write_text("0")

    def peak_mb(self) -> float:
        """The group's peak memory in MiB (0 when unreadable)."""
        try:
            return int((self.path / self._peak).read_text()) / (1 << 20)
        except (OSError, ValueError):
            return 0.0

    def oom_kills(self) -> int:
        """How many processes the kernel has killed in the group for want of memory."""
        try:
            for line in (self.path / self._events).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def pids(self) -> list[int]:
        """The processes in the group now (none once it is gone)."""
        try:
            return [int(pid) for pid in Path(self.procs).read_text().split()]
        except (OSError, ValueError):
            return []

    def empty(self, seconds: float = EMPTY_S) -> bool:
        """SIGKILL every process in the group until none is left (a tree the host could not see whole,
        one still freeing a large scratch), for at most ``seconds``; True when it is empty."""
        end = time.monotonic() + seconds
        while pids := self.pids():
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if time.monotonic() >= end:
                return False
            time.sleep(0.01)
        return True

    def remove(self) -> None:
        """Empty the group (:meth:`empty`) and remove it; a group that cannot go is warned about, not
        hidden."""
        self.empty()
        end = time.monotonic() + EMPTY_S
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as err:
                error = err
            if time.monotonic() >= end:
                break
            time.sleep(0.01)
        warnings.warn(
            f"could not remove the sandbox's cgroup {self.path}: {error}", RuntimeWarning, stacklevel=2
        )
