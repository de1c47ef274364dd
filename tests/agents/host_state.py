"""The host around a sandbox run, as the judge sees it from outside: its global settings (sysctls), the
host-wide resources a run could exhaust (probed while it is in flight), the memory cgroups a Sandbox
leaves behind, and who the jail's processes are on the host.

One idea: what a run may not change or use up on the machine (as opposed to in its own tree).

Nothing here changes a host setting, but :func:`restore_sysctls` puts back one that a run did change,
so that a failing test still leaves the machine as it found it.
"""

from __future__ import annotations

import ctypes
import errno
import os
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path

SYSCTL_ROOTS = ("/proc/sys/kernel", "/proc/sys/fs", "/proc/sys/vm", "/proc/sys/user")
# Entries that change on their own while the host runs (each one's reason); everything else under
# SYSCTL_ROOTS must read the same after a run as before it.
SYSCTL_VOLATILE = {
    "kernel/ns_last_pid": "the last pid handed out: moves with every fork on the host",
    "kernel/random/uuid": "a new random UUID at every read",
    "kernel/random/entropy_avail": "the entropy estimate (constant since Linux 5.18, not before)",
    "kernel/pty/nr": "how many ptys are open on the host now",
    "fs/dentry-state": "dentry cache counters",
    "fs/inode-nr": "inode cache counters",
    "fs/inode-state": "inode cache counters",
    "fs/file-nr": "open file handles on the host now",
    "fs/dquot-nr": "quota cache counters (older kernels)",
    "fs/aio-nr": "AIO contexts in use now: compared as 'back to at most before' (see sysctl_changes)",
}
SYSCTL_VOLATILE_DIRS = ("fs/quota/",)  # quota cache statistics (lookups, reads, hits, ...)
AIO_NR = "fs/aio-nr"
# What the corpus writes (core_pattern_pipe_abort a new value, sysctl_write_kernel the current one): the
# only settings put back after a run. Any other change is reported, never undone: it may be the host's.
RESTORABLE = ("kernel/core_pattern", "kernel/pid_max", "fs/pipe-max-size")

NR_IO_SETUP, NR_IO_DESTROY = 206, 207  # x86_64
IN_MODIFY = 0x2


# ---------------------------------------------------------------------------- sysctls
def sysctl_snapshot(roots: Iterable[str] = SYSCTL_ROOTS) -> dict[str, bytes]:
    """Every readable file below ``roots`` (``kernel/pid_max`` -> its bytes); unreadable ones (write-only,
    refused) are left out. About 250 files, a few ms."""
    found: dict[str, bytes] = {}
    for root in roots:
        for directory, _, names in os.walk(root):
            if "binfmt_misc" in directory:  # a file system of its own, mounted there on some hosts
                continue
            for name in names:
                path = os.path.join(directory, name)
                try:
                    with open(path, "rb") as fh:
                        found[os.path.relpath(path, "/proc/sys")] = fh.read()
                except OSError:
                    continue
    return found


def _volatile(key: str) -> bool:
    return key in SYSCTL_VOLATILE or key.startswith(SYSCTL_VOLATILE_DIRS)


def _aio_nr(value: bytes | None) -> int:
    try:
        return int(value or b"0")
    except ValueError:
        return 0


def sysctl_changes(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    """What differs between two snapshots, but for :data:`SYSCTL_VOLATILE`; AIO contexts in use
    (``fs/aio-nr``) must be back to at most what they were (a run's contexts go with its process)."""
    changed = []
    for key in sorted(before.keys() | after.keys()):
        if _volatile(key):
            continue
        old, new = before.get(key), after.get(key)
        if old != new:
            changed.append(f"sysctl {key}: {old!r} -> {new!r}")
    if _aio_nr(after.get(AIO_NR)) > _aio_nr(before.get(AIO_NR)):
        changed.append(f"sysctl {AIO_NR} still raised: {before.get(AIO_NR)!r} -> {after.get(AIO_NR)!r}")
    return changed


def restore_sysctls(before: dict[str, bytes]) -> list[str]:
    """Write back, as they were in ``before``, those of :data:`RESTORABLE` that changed (none, unless a
    run got through; for the host's sake even when its test fails); the ones put back."""
    restored = []
    for key in RESTORABLE:
        old = before.get(key)
        if old is None:
            continue
        path = Path("/proc/sys", key)
        try:
            if path.read_bytes() == old:
                continue
            path.write_bytes(old)
            restored.append(key)
        except OSError:
            continue
    return restored


# ---------------------------------------------------------------------------- host-wide resources
def available_kib() -> int:
    """The host's ``MemAvailable`` in KiB."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    raise OSError("no MemAvailable in /proc/meminfo")


class HostProber:
    """While a run is in flight, checks every ``interval`` seconds that the host itself can still fork,
    set up an AIO context, make an inotify instance with a watch, and an eventfd (the host-wide pools a
    run could drain: pids, ``fs.aio-max-nr``, the inotify limits of the jail's host uid, file handles),
    and how far the host's available memory (``MemAvailable``) fell below where it was at the start.

    ``with HostProber() as probe: ...`` then ``probe.failures`` (what failed, when), ``probe.rounds``
    and ``probe.memory_drop_mib``."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.failures: list[str] = []
        self.rounds = 0
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._dir = tempfile.mkdtemp(prefix="gf2-prober-")
        self._stop = threading.Event()
        self._started = 0.0
        self._available_kib = self._lowest_kib = available_kib()
        self._thread = threading.Thread(target=self._loop, name="host-prober", daemon=True)

    def _fork(self) -> None:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

    def _aio(self) -> None:
        context = ctypes.c_ulong(0)
        if self._libc.syscall(NR_IO_SETUP, ctypes.c_long(1), ctypes.byref(context)) != 0:
            raise OSError(ctypes.get_errno(), "io_setup")
        self._libc.syscall(NR_IO_DESTROY, context)

    def _inotify(self) -> None:
        fd = self._libc.inotify_init1(os.O_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        try:
            if self._libc.inotify_add_watch(fd, self._dir.encode(), IN_MODIFY) < 0:
                raise OSError(ctypes.get_errno(), "inotify_add_watch")
        finally:
            os.close(fd)

    def _eventfd(self) -> None:
        os.close(os.eventfd(0))

    def probe(self) -> None:
        """One round of every check; a failure is recorded, not raised."""
        for name, check in (
            ("fork", self._fork),
            ("io_setup", self._aio),
            ("inotify", self._inotify),
            ("eventfd", self._eventfd),
        ):
            try:
                check()
            except OSError as err:
                code = errno.errorcode.get(err.errno or 0, err.errno)
                when = time.monotonic() - self._started
                self.failures.append(f"host {name} failed at {when:.2f} s: {code}")
        self._lowest_kib = min(self._lowest_kib, available_kib())
        self.rounds += 1

    @property
    def memory_drop_mib(self) -> float:
        """How far the host's available memory fell below its level at the start, at the lowest seen."""
        return max(0, self._available_kib - self._lowest_kib) / 1024

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.probe()
            self._stop.wait(self.interval)

    def __enter__(self) -> HostProber:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        os.rmdir(self._dir)


# ---------------------------------------------------------------------------- cgroups
def _cgroup_mounts() -> list[Path]:
    """Where cgroup hierarchies (v1 and v2) are mounted."""
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] in ("cgroup", "cgroup2"):
            mounts.append(Path(left.split()[4]))
    return mounts


def sandbox_cgroups(pid: int | None = None) -> list[str]:
    """Every cgroup named ``gf2-sandbox-<pid>-*`` (this process's by default), in any hierarchy."""
    prefix = f"gf2-sandbox-{os.getpid() if pid is None else pid}-"
    found = []
    for mount in _cgroup_mounts():
        for directory, subdirs, _ in os.walk(mount):
            found += [os.path.join(directory, d) for d in subdirs if d.startswith(prefix)]
    return sorted(found)


# ---------------------------------------------------------------------------- identities
def read_ids(pid: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """``(uids, gids)`` of ``pid`` on the host (real, effective, saved, filesystem); None when gone."""
    ids: dict[str, tuple[int, ...]] = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(("Uid:", "Gid:")):
                    ids[line[:3]] = tuple(int(v) for v in line.split()[1:])
    except (OSError, ValueError):
        return None
    if "Uid" not in ids or "Gid" not in ids:
        return None
    return ids["Uid"], ids["Gid"]


_OWN_PID_NS = os.readlink("/proc/self/ns/pid")


def in_jail(pid: int, argv: list[str]) -> bool:
    """Whether ``pid`` (running ``argv``) is bubblewrap or inside a jail: in a pid namespace other than
    this process's, or running the jail's harness (``/sandbox/harness.py``; not the host's wrapper,
    ``inside.py limit ... -- bwrap ... /sandbox/harness.py``, which is root until it becomes bwrap)."""
    if argv and os.path.basename(argv[0]) == "bwrap":
        return True
    try:
        if os.readlink(f"/proc/{pid}/ns/pid") != _OWN_PID_NS:
            return True
    except OSError:  # not ours to read (a non-dumpable process of another uid): go by its command line
        pass
    for arg in argv:
        if arg.endswith(".py") and not arg.startswith("-"):  # the script python runs
            return arg == "/sandbox/harness.py"
    return False
