"""The hostile corpus's shared pieces: its headers, the host context of a run, the header checks, and
the outside measurements (process tree, its memory) that test_sandbox.py and test_sandbox_outside.py use.

One idea: how a hostile snippet's run is judged (its header, the host around it, the tree from outside).

Every file in tests/agents/sandbox_corpus/ is one snippet whose header says what must happen::

    # expect: ok; stdout_contains=...; no_secret          (items separated by ';'; may repeat)
    # limits: wall_s=2 cpu_s=1                            (SandboxLimits fields, optional)
    # modes: bwrap unsafe                                  (isolation modes to run it under)
    # outside: stop_reason=timeout|cpu_limit              (optional: what holds at DEFAULT_LIMITS instead
                                                           of ``expect``, when ``expect`` needs ``limits``)

``@NAME@`` placeholders in the code are filled from the test's context (the secret file's path,
the listener's port, a unique token, ...); ``@SECRET@`` is allowed only in the header.
``stop_reason`` may list alternatives (``a|b``); ``exit_code`` and ``signal`` may be ``none``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gf2env.agents.sandbox import UNSAFE, Sandbox, SandboxLimits, SandboxResult, detect_isolation
from gf2env.agents.sandbox import inside as harness
from gf2env.records.record import Record, generate_record
from gf2env.task.oracle import TaskConfig
from tests.agents.host_state import in_jail, read_ids, restore_sysctls, sysctl_snapshot
from tests.paths import REPO

CORPUS = Path(__file__).with_name("sandbox_corpus")
INFO = detect_isolation()
HAVE_BWRAP = bool(INFO["bwrap"])
needs_bwrap = pytest.mark.skipif(
    not HAVE_BWRAP,
    reason=f"bubblewrap cannot run here ({INFO['bwrap_error']}); apt-get install -y bubblewrap",
)
MODES = {"bwrap": "bwrap", "unsafe": UNSAFE}
SANDBOX_PACKAGE = Path(harness.__file__).parent

CHECKS = {
    "ok",
    "stop_reason",
    "exit_code",
    "signal",
    "stdout_contains",
    "stdout_not_contains",
    "stderr_contains",
    "stdout_truncated",
    "stderr_truncated",
    "wall_max",
    "no_secret",
    "target_absent",
    "host_unchanged",
    "listener_idle",
    "no_leftover",
    "canary_alive",
}
Expects = tuple[tuple[str, str], ...]


# ---------------------------------------------------------------------------- corpus headers
@dataclass(frozen=True)
class Case:
    path: Path
    expects: Expects
    limits: dict[str, float]
    modes: tuple[str, ...]
    outside: Expects | None = None  # what holds at DEFAULT_LIMITS, when it differs from ``expects``

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def outside_expects(self) -> Expects:
        return self.expects if self.outside is None else self.outside


def _parse_expects(path: Path, text: str) -> Expects:
    expects = []
    for item in text.split(";"):
        key, _, value = item.strip().partition("=")
        if key not in CHECKS:
            raise ValueError(f"{path.name}: unknown check {key!r}; known: {sorted(CHECKS)}")
        expects.append((key, value.strip()))
    return tuple(expects)


def parse_case(path: Path) -> Case:
    """Read a corpus file's header; a typo in it fails loudly rather than checking nothing."""
    headers: dict[str, str] = {}
    for line in path.read_text().splitlines():
        m = re.match(r"#\s*(expect|limits|modes|outside):\s*(.*)$", line)
        if not m:
            break
        joiner = {"expect": ";", "limits": " ", "modes": " ", "outside": ";"}[m.group(1)]
        headers[m.group(1)] = joiner.join(filter(None, (headers.get(m.group(1), ""), m.group(2).strip())))
    if "expect" not in headers:
        raise ValueError(f"{path.name} starts with no '# expect:' line")
    limits: dict[str, float] = {}
    for item in headers.get("limits", "").split():
        key, _, value = item.partition("=")
        limits[key] = float(value) if key == "wall_s" else int(value)
    modes = tuple(headers.get("modes", "bwrap").split())
    if not modes or set(modes) - set(MODES):
        raise ValueError(f"{path.name}: modes {modes} must be among {sorted(MODES)}")
    outside = _parse_expects(path, headers["outside"]) if "outside" in headers else None
    return Case(path, _parse_expects(path, headers["expect"]), limits, modes, outside)


def corpus_cases() -> list[Case]:
    return [parse_case(p) for p in sorted(CORPUS.glob("*.py"))]


def corpus_params(cases: Sequence[Case]) -> list:
    """One pytest param ``(case, mode)`` a mode the case's header names (bwrap ones skip without it)."""
    return [
        pytest.param(case, mode, id=f"{case.name}-{mode}", marks=[needs_bwrap] if mode == "bwrap" else [])
        for case in cases
        for mode in case.modes
    ]


def corpus_record() -> Record:
    """The record every corpus run gets (its target is what the answer checks look for)."""
    return generate_record(TaskConfig(p=64, d=4, n=8, K=16), 3, 0, seed=5)


MODE_PARAMS = [pytest.param("bwrap", marks=[needs_bwrap]), pytest.param("unsafe")]  # both modes


def make_sandbox(limits: SandboxLimits, mode: str, workers: int | None = None) -> Sandbox:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the UNSAFE mode's warning has its own test
        return Sandbox(limits, isolation=MODES[mode], workers=workers)


# ---------------------------------------------------------------------------- context
@dataclass
class Context:
    """What the host side of one corpus run holds: secrets, listeners, canaries, the record."""

    secret: str
    secret_file: Path
    canary_dir: Path
    token: str
    work_tmp: Path
    tcp: socket.socket
    udp: socket.socket
    canary: subprocess.Popen
    record: Record
    record_json: str  # the record as the host saw it before the run
    host_digest: str  # the sandbox package's files and the canary dir, before the run
    tmp_path: Path  # the test's own temp directory (secret, canaries and the run's temp files are in it)
    sysctls: dict[str, bytes]  # the host's settings before the run (put back after it, should it get through)
    fill: dict[str, str] = field(default_factory=dict)

    @property
    def tokenized_name(self) -> str:
        """The name a snippet gives what it tries to create outside its scratch."""
        return f"gf2_sbx_{self.token}"


def _tree_digest(*roots: Path) -> str:
    """sha256 over every path, mode and content below ``roots`` (symlinks by their target)."""
    h = hashlib.sha256()
    for root in roots:
        for path in sorted([root, *root.rglob("*")]):
            if "__pycache__" in path.parts:
                continue
            st = path.lstat()
            h.update(f"{path}\0{st.st_mode:o}\0".encode())
            if path.is_symlink():
                h.update(os.readlink(path).encode())
            elif path.is_file():
                h.update(path.read_bytes())
    return h.hexdigest()


def host_digest(ctx: Context) -> str:
    return _tree_digest(SANDBOX_PACKAGE, ctx.canary_dir)


@contextmanager
def host_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record: Record) -> Iterator[Context]:
    """Plant the secrets (environment and file), the canaries and the listeners of one run."""
    token = f"TOKEN{uuid.uuid4().hex}"
    secret = f"SECRET-{uuid.uuid4().hex}"
    monkeypatch.setenv("GF2_SECRET", secret)
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    secret_file = secret_dir / "key.txt"
    secret_file.write_text(secret)
    canary_dir = tmp_path / "canary"
    canary_dir.mkdir()
    (canary_dir / "keep").write_text("keep me")
    (canary_dir / "sub").mkdir()
    (canary_dir / "sub" / "deep").write_text("deep canary")
    (canary_dir / "link").symlink_to("keep")
    work_tmp = tmp_path / f"sandbox-tmp-{token}"  # the sandbox's host-side temp files go here
    work_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(work_tmp))
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    canary = subprocess.Popen(["sleep", "60"], env={"PATH": "/usr/bin:/bin"}, start_new_session=True)
    c = Context(
        secret=secret,
        secret_file=secret_file,
        canary_dir=canary_dir,
        token=token,
        work_tmp=work_tmp,
        tcp=tcp,
        udp=udp,
        canary=canary,
        record=record,
        record_json=json.dumps(record.to_json(), sort_keys=True),
        host_digest="",
        tmp_path=tmp_path,
        sysctls=sysctl_snapshot(),
    )
    c.host_digest = host_digest(c)
    c.fill = {
        "TOKEN": c.token,
        "SECRET_FILE": str(secret_file),
        "SECRET_DIR": str(secret_dir),
        "REPO": str(REPO),
        "PORT": str(tcp.getsockname()[1]),
        "UDP_PORT": str(udp.getsockname()[1]),
        "CANARY_DIR": str(canary_dir),
        "PYTHON_PREFIX": str(INFO["python_prefix"]),
        "NUMPY_SITE": str(INFO["numpy_site"]),
        "HOST_PID": str(os.getpid()),
        "TMP_PATH": str(tmp_path),
        "PID_MAX_TENTH": str(int(Path("/proc/sys/kernel/pid_max").read_text()) // 10),
    }
    try:
        yield c
    finally:
        canary.kill()
        canary.wait()
        tcp.close()
        udp.close()
        restore_sysctls(c.sysctls)  # a no-op unless a snippet changed the host's settings
        for directory in outside_places(c):  # what a snippet that got out left there
            stray = Path(str(directory)) / c.tokenized_name
            if stray.is_file() or stray.is_symlink():
                stray.unlink()


def fill(text: str, values: dict[str, str]) -> str:
    def sub(m: re.Match) -> str:
        if m.group(1) not in values:
            raise KeyError(f"unknown placeholder @{m.group(1)}@")
        return values[m.group(1)]

    return re.sub(r"@([A-Z_]+)@", sub, text)


def processes_mentioning(needle: str) -> list[tuple[int, str]]:
    """Host processes whose command line or environment contains ``needle``."""
    hits, raw = [], needle.encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for what in ("cmdline", "environ"):
            try:
                data = Path(f"/proc/{pid}/{what}").read_bytes()
            except OSError:
                continue
            if raw in data:
                hits.append((int(pid), data.replace(b"\0", b" ").decode(errors="replace")[:200]))
    return hits


def target_strings(rec: Record) -> list[str]:
    t = list(rec.target)
    return [str(t), str(tuple(t)), json.dumps(t), '"target"']


def outside_places(ctx: Context) -> tuple[str | Path, ...]:
    """The host directories a snippet's tokenized file must never appear in."""
    home = Path(os.environ.get("HOME", "/root"))
    shared = ("/tmp", "/var/tmp", "/dev/shm", "/")
    return (INFO["python_prefix"], "/usr", REPO, INFO["numpy_site"], ctx.canary_dir, *shared, home)


def writes_outside(ctx: Context) -> list[str]:
    """Where a snippet's tokenized file appeared on the host, and whether the canaries changed."""
    found = []
    for directory in outside_places(ctx):
        if (Path(str(directory)) / ctx.tokenized_name).exists():
            found.append(f"wrote into {directory}")
    found += [f"wrote {path}" for path in ctx.tmp_path.rglob(ctx.tokenized_name)]
    if host_digest(ctx) != ctx.host_digest:
        found.append(f"changed {SANDBOX_PACKAGE} or the canaries in {ctx.canary_dir}")
    return found


def listener_idle(ctx: Context) -> None:
    """The TCP listener has no connection waiting and the UDP one no datagram."""
    ctx.tcp.setblocking(False)
    ctx.udp.setblocking(False)
    with pytest.raises(BlockingIOError):
        ctx.tcp.accept()
    with pytest.raises(BlockingIOError):
        ctx.udp.recvfrom(100)


# ---------------------------------------------------------------------------- header checks
def check_expects(
    expects: Expects, result: SandboxResult, ctx: Context, output_bytes: int, elapsed: float, where: str
) -> None:
    """Assert each of a snippet's header ``expects`` about ``result`` (``elapsed``: the test's own clock)."""
    detail = f"{where}\nstdout: {result.stdout[-1500:]!r}\nstderr: {result.stderr[-1500:]!r}"
    values = {**ctx.fill, "SECRET": ctx.secret}
    for key, raw in expects:
        value = fill(raw, values)
        if key == "ok":
            assert result.ok, detail
        elif key == "stop_reason":
            assert result.stop_reason in value.split("|"), detail
        elif key in ("exit_code", "signal"):
            assert getattr(result, key) == (None if value == "none" else int(value)), detail
        elif key == "stdout_contains":
            assert value in result.stdout, detail
        elif key == "stdout_not_contains":
            assert value not in result.stdout, detail
        elif key == "stderr_contains":
            assert value in result.stderr, detail
        elif key in ("stdout_truncated", "stderr_truncated"):
            stream = key.split("_")[0]
            assert getattr(result, key), detail
            assert getattr(result, f"{stream}_bytes") > output_bytes, detail
            assert len(getattr(result, stream)) <= output_bytes, detail
        elif key == "wall_max":
            assert result.wall_s <= float(value) and elapsed <= float(value) + 0.5, detail
        elif key == "no_secret":
            assert ctx.secret not in result.stdout + result.stderr, detail
        elif key == "target_absent":
            for s in target_strings(ctx.record):
                assert s not in result.stdout + result.stderr, f"{where}: {s} leaked"
        elif key == "host_unchanged":
            assert writes_outside(ctx) == [], where
            assert (ctx.canary_dir / "keep").read_text() == "keep me", where
        elif key == "listener_idle":
            listener_idle(ctx)
        elif key == "no_leftover":
            assert processes_mentioning(ctx.token) == [], f"{where}: a process outlived the run"
        elif key == "canary_alive":
            assert ctx.canary.poll() is None, f"{where}: the host's canary process died"
        else:  # pragma: no cover - parse_case refuses unknown keys
            raise AssertionError(key)


# ---------------------------------------------------------------------------- the process tree, from outside
def _start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (to tell it from a later process given the same pid); None
    when it is gone or a zombie (dead, holding nothing but its pid until its parent, or init, reaps it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return None if fields[0] in ("Z", "X") else int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` that still run (not gone, not zombies)."""
    return {pid for pid in pids if _start_time(pid) is not None}


def descendants(root: int) -> set[int]:
    """Every live descendant of ``root``, walking ``/proc/<pid>/task/*/children`` (its own walk, not
    the sandbox's ``supervise.tree_pids``: the judge does not rely on the code it judges)."""
    found: set[int] = set()
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.add(child)
                    stack.append(child)
    return found


def memory_kib(pid: int) -> tuple[int, int]:
    """``(VmRSS, VmHWM)`` of ``pid`` in KiB: its resident memory now and at its highest since its last
    exec ((0, 0) for a zombie or a process already gone)."""
    found = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                found[line[:5]] = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return found.get("VmRSS", 0), found.get("VmHWM", 0)


class TreeSampler:
    """Polls, every ``interval`` seconds, the summed VmRSS of all descendants of ``root`` but ``exclude``
    (and but copies of ``root`` between fork and exec, whose pages are root's).

    ``with TreeSampler() as tree: ...`` then ``tree.peak_mib`` (the highest sum seen), ``tree.peak_pids``
    (who made it up) and ``tree.seen`` (every pid seen, with its start time). A peak shorter than the
    polling gap (or than the sampler thread's wait for a CPU on a loaded machine) can be missed;
    ``tree.hwm_mib`` cannot miss it while the process lives: the highest sum, over the processes alive
    at one sample, of each one's own VmHWM (an upper bound: they may have peaked at different times).

    It also records who each process is on the host: ``tree.jailed`` maps every process seen in a jail
    (bubblewrap and below: :func:`~tests.agents.host_state.in_jail`) to its command and host
    ``(uids, gids)``, and ``tree.jailed_root`` lists those seen with a host uid or gid of 0."""

    def __init__(self, root: int | None = None, exclude: Iterable[int] = (), interval: float = 0.003) -> None:
        self.root = os.getpid() if root is None else root
        self.exclude = set(exclude)
        self.interval = interval
        self.peak_kib = 0
        self.hwm_kib = 0
        self.peak_pids: list[int] = []
        self.samples = 0
        self.seen: dict[int, int | None] = {}
        self.jailed: dict[int, tuple[str, tuple[tuple[int, ...], tuple[int, ...]]]] = {}
        self.jailed_root: list[str] = []
        self._root_cmdline = Path(f"/proc/{self.root}/cmdline").read_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tree-sampler", daemon=True)

    @property
    def peak_mib(self) -> float:
        return self.peak_kib / 1024

    @property
    def hwm_mib(self) -> float:
        return self.hwm_kib / 1024

    def sample(self) -> None:
        pids = {pid for pid in descendants(self.root) - self.exclude if not self._is_root_copy(pid)}
        for pid in pids:
            if pid not in self.seen:
                self.seen[pid] = _start_time(pid)
            self._identify(pid)
        memory = [memory_kib(pid) for pid in pids]
        total = sum(rss for rss, _ in memory)
        self.samples += 1
        self.hwm_kib = max(self.hwm_kib, sum(hwm for _, hwm in memory))
        if total > self.peak_kib:
            self.peak_kib, self.peak_pids = total, sorted(pids)

    def _identify(self, pid: int) -> None:
        """Record a jailed process's host identity. Its command line is read first: the host's wrapper
        becomes the jail's uid before it becomes bwrap, so an identity read after it is the jail's."""
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
        except OSError:
            return
        if not in_jail(pid, argv):
            return
        ids = read_ids(pid)
        if ids is None:
            return
        command = " ".join(argv)[:160]
        if self.jailed.get(pid) != (command, ids):
            self.jailed[pid] = (command, ids)
            if 0 in ids[0] or 0 in ids[1]:
                self.jailed_root.append(f"pid {pid} uids {ids[0]} gids {ids[1]}: {command}")

    def _is_root_copy(self, pid: int) -> bool:
        """A child forked from ``root`` that has not exec'ed yet: its memory is root's own (shared)."""
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes() == self._root_cmdline
        except OSError:
            return False

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def survivors(self) -> list[int]:
        """The pids seen during the sampling that still run (the same process, not a reused pid)."""
        return [pid for pid, t in self.seen.items() if t is not None and _start_time(pid) == t]


def wait_until(condition: Callable[[], bool], seconds: float) -> bool:
    """Poll ``condition()`` until it is true or ``seconds`` pass (a SIGKILLed tree takes a moment to go)."""
    end = time.monotonic() + seconds
    while True:
        if condition():
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.01)
