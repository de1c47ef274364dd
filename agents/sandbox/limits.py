"""What one run may use (:class:`SandboxLimits`, including the rlimits the wrapper sets) and what it did
(:class:`SandboxResult`, with its ``stop_reason`` among :data:`STOP_REASONS`)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from gf2env.agents.sandbox.errors import SandboxConfigError

# Tasks (processes and threads). A run's count is its jail's own (the jail is a user namespace of its
# own, where the kernel counts tasks per uid): a thread storm stops at RUN_TASKS, under 1% of a default
# pid_max of 32768. Host root ignores RLIMIT_NPROC, so a root host gives each jail a host uid of its own
# (:func:`gf2env.agents.sandbox.isolation.host_uid`), whose tasks JAIL_TASKS bounds (the run's, the fork
# server, bwrap); a non-root host keeps its own limit there (its other processes count against it too).
RUN_TASKS = 256
JAIL_TASKS = 2 * RUN_TASKS
JAIL_OPEN_FILES = 4096  # the worker's own; each run lowers it to its ``open_files``
SCRATCH_INODES = 16384  # files and directories a scratch tmpfs may hold (and its xattrs' room: 1 KiB each)
# The documented range of each limit. Beyond an hour a tool call is no tool call (and the worker's
# poll takes milliseconds in a C int: ~24 days); a run's open files cannot pass the worker's own; the
# host keeps a run's output in memory; Python's C stack ends recursion long before 10**6 frames.
MAX_WALL_S = 3600.0
LIMIT_RANGES = {
    "cpu_s": (1, 3600),
    "memory_mb": (256, 1 << 20),
    "file_size_mb": (1, 1 << 20),
    "open_files": (16, JAIL_OPEN_FILES),
    "output_bytes": (1, 64 << 20),
    "scratch_mb": (1, 1 << 20),
    "recursion_limit": (100, 1_000_000),
}
STOP_REASONS = ("exited", "error", "timeout", "cpu_limit", "memory_limit", "output_limit", "killed")


@dataclass(frozen=True)
class SandboxLimits:
    """Per-run limits. The defaults fit RL rollouts: a tool call ends within 4 s of wall clock and
    the whole jailed process tree stays within 1 GiB.

    ``memory_mb`` is the budget of the whole tree: the warm worker's processes (bubblewrap and the
    fork server), the run's process and the scratch tmpfs. The run's address space gets what is left
    (about 1024 - 45 - 64 = 915 MiB by default; :attr:`SandboxResult.memory_mb` reports the peak).
    ``scratch_mb`` sizes the tmpfs at ``/scratch`` (``/tmp`` is the same place; bwrap only: the
    UNSAFE mode writes to a host tempdir). ``recursion_limit`` caps ``sys.setrecursionlimit``, so
    runaway recursion fails fast with RecursionError.

    ``imports`` (``None``: any module the sandbox holds, the standard library and numpy) is the list of
    top-level modules the code's own ``import`` statements may name; the modules those import are
    not checked. ``denied_builtins`` are builtins the code does not get (e.g. ``eval``, ``open``).
    Both are rules of a protocol (the paper's: :data:`PAPER_LIMITS`), not isolation layers: the
    layers of :mod:`gf2env.agents.sandbox.sandbox` hold whatever the code imports.
    """

    wall_s: float = 4.0
    cpu_s: int = 5  # above the wall clock: a spinning thread ends at the wall, two threads at the CPU limit
    memory_mb: int = 1024
    file_size_mb: int = 16
    open_files: int = 64
    output_bytes: int = 65536
    scratch_mb: int = 64
    recursion_limit: int = 10_000
    imports: tuple[str, ...] | None = None
    denied_builtins: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("imports", "denied_builtins"):
            value = getattr(self, name)
            if value is None and name == "imports":
                continue
            if not isinstance(value, tuple) or not all(
                isinstance(v, str) and v.isidentifier() for v in value
            ):
                raise SandboxConfigError(
                    f"SandboxLimits.{name}={value!r}: give a tuple of names, e.g. ('re', 'math')."
                )
        wall = self.wall_s
        if (
            isinstance(wall, bool)
            or not isinstance(wall, (int, float))
            or not math.isfinite(wall)
            or not 0 < wall <= MAX_WALL_S
        ):
            raise SandboxConfigError(
                f"SandboxLimits.wall_s={wall!r}: give a finite number of seconds > 0 and <= {MAX_WALL_S}."
            )
        why = {
            "memory_mb": " (the worker, scratch and Python with numpy need about 200 MiB of it)",
            "open_files": " (Python needs a dozen descriptors to start)",
        }
        for name, (low, high) in LIMIT_RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                bounds = f">= {low} and <= {high}{why.get(name, '')}"
                raise SandboxConfigError(f"SandboxLimits.{name}={value!r}: give an integer {bounds}.")
        if self.scratch_mb >= self.memory_mb:
            raise SandboxConfigError(
                f"SandboxLimits.scratch_mb={self.scratch_mb}: the scratch is part of "
                f"memory_mb={self.memory_mb}; give it less."
            )

    def run_rlimits(self, address_space_mb: int) -> dict[str, tuple[int, int]]:
        """The ``resource`` limits (soft, hard) of a run's process, whose address space gets
        ``address_space_mb`` (the budget less the worker and scratch); CPU's hard limit is 1 s later."""
        mib = 1 << 20
        return {
            "RLIMIT_CPU": (self.cpu_s, self.cpu_s + 1),
            "RLIMIT_AS": (address_space_mb * mib,) * 2,
            "RLIMIT_FSIZE": (self.file_size_mb * mib,) * 2,
            "RLIMIT_NOFILE": (self.open_files,) * 2,
            "RLIMIT_CORE": (0, 0),
            "RLIMIT_NPROC": (RUN_TASKS,) * 2,
            "RLIMIT_SIGPENDING": (RUN_TASKS,) * 2,  # queued signals, counted per uid like tasks
            "RLIMIT_MEMLOCK": (0, 0),
            "RLIMIT_MSGQUEUE": (0, 0),
            "RLIMIT_RTPRIO": (0, 0),
        }


def jail_rlimits(own_host_uid: bool) -> dict[str, tuple[int, int]]:
    """The limits the wrapper sets on a whole warm worker (each run then lowers its own);
    ``own_host_uid``: the jail runs as a host uid of its own (a root host), whose tasks JAIL_TASKS
    bounds."""
    limits = {"RLIMIT_NOFILE": (JAIL_OPEN_FILES,) * 2, "RLIMIT_CORE": (0, 0)}
    if own_host_uid:
        limits["RLIMIT_NPROC"] = (JAIL_TASKS,) * 2
    return limits


DEFAULT_LIMITS = SandboxLimits()
PAPER_IMPORTS = (
    "re", "math", "itertools", "collections", "string", "json", "functools", "operator", "heapq",
    "bisect", "random", "fractions", "decimal", "statistics",
)  # fmt: skip
PAPER_DENIED_BUILTINS = ("eval", "exec", "compile", "open", "input", "breakpoint")
PAPER_LIMITS = SandboxLimits(
    wall_s=0.5, cpu_s=1, imports=PAPER_IMPORTS, denied_builtins=PAPER_DENIED_BUILTINS
)  # the paper's tool protocol: ~500 ms wall clock, these imports only, no eval/exec/files


@dataclass(frozen=True)
class SandboxResult:
    """What one run did. ``stdout``/``stderr`` hold at most ``output_bytes`` each (decoded with
    replacement); ``*_bytes`` count all that was seen before the run ended. ``memory_mb`` is the
    peak resident memory of the whole tree (MiB): the worker's processes plus the run's own peak,
    as seen from the host (an upper bound: pages the run shares with the worker count twice)."""

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
    memory_mb: float = 0.0

    @property
    def ok(self) -> bool:
        return self.stop_reason == "exited" and self.exit_code == 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}
