"""Watching a process tree from the host: its members and resident memory (read from /proc), killing
all of it, and a run's stdout and stderr read without blocking up to the output cap."""

from __future__ import annotations

import os
import selectors
import signal
import time

PAGE_MB = os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def tree_pids(root: int) -> list[int]:
    """``root`` and every process below it (an empty list once ``root`` is gone)."""
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        found.append(pid)
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children") as fh:
                    stack += [int(c) for c in fh.read().split()]
            except (OSError, ValueError):
                continue
    return found


def resident_mb(pid: int) -> float:
    """The resident memory of one process in MiB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * PAGE_MB
    except (OSError, ValueError, IndexError):
        return 0.0


def tree_resident_mb(root: int, skip: int | None = None) -> float:
    """The summed resident memory of ``root``'s tree (less the process ``skip``), in MiB: pages that
    processes share count once per process, so this is an upper bound of what the tree holds."""
    return sum(resident_mb(pid) for pid in tree_pids(root) if pid != skip)


def kill_tree(root: int) -> None:
    """SIGKILL ``root`` and everything below it, parents first (nothing can fork meanwhile: the
    sandbox's seccomp filter allows threads only)."""
    for pid in tree_pids(root):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class Streams:
    """stdout and stderr of one run (the read ends of two pipes), read without blocking and kept up
    to a byte cap each; ``selector`` may hold other descriptors too (the caller handles those)."""

    def __init__(self, out_fd: int, err_fd: int, cap: int) -> None:
        self.cap = cap
        self.fds = (out_fd, err_fd)
        self.kept = {fd: bytearray() for fd in self.fds}
        self.seen = dict.fromkeys(self.fds, 0)
        self.selector = selectors.DefaultSelector()
        for fd in self.fds:
            os.set_blocking(fd, False)
            self.selector.register(fd, selectors.EVENT_READ)

    @property
    def open(self) -> int:
        return sum(1 for key in self.selector.get_map().values() if key.fd in self.fds)

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

    def drain(self, seconds: float) -> None:
        """Read until both pipes close (the run's process is gone) or ``seconds`` pass."""
        end = time.monotonic() + seconds
        while self.open and time.monotonic() < end:
            for key, _ in self.selector.select(max(end - time.monotonic(), 0.0)):
                if key.fd in self.fds:
                    self.read(key.fd)

    def close(self) -> None:
        self.selector.close()
        for fd in self.fds:
            os.close(fd)

    def text(self, fd: int) -> tuple[str, bool, int]:
        return self.kept[fd].decode("utf-8", errors="replace"), self.seen[fd] > self.cap, self.seen[fd]
