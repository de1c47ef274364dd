"""The outside judge (test_sandbox_outside.py) run by an unprivileged user: the sandbox as most machines
run it, where bubblewrap gets no help from root (no cgroup, no host uid of its own, no staged binds).

As root, the judge runs as an unused uid (no passwd entry, no process) through ``setpriv``, inside a
private mount namespace (``unshare --mount``) in which the directories that uid needs (the Python
install, the repository) are made reachable: a tmpfs over each ancestor it cannot traverse (``/root`` is
0700), with the needed directories bound back into it. Nothing on the host changes: the mounts go with
the namespace, and the only files written are in a temporary directory made for that uid and removed.
As any other user, the judge runs as that user.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.agents.sandbox_judge import needs_bwrap
from tests.paths import REPO

CANDIDATE_UIDS = range(2_090_000_000, 2_090_000_010)  # below the jails' own (2_100_000_000 + a pid)
SELECTION = "(bwrap and not workspace) or carries_over or carry_nothing"  # ~50 cases, under a minute
JUDGE_TIMEOUT_S = 240


def _unused_uid() -> int | None:
    """A uid with no passwd entry and no process on this machine (None if all candidates are taken)."""
    taken = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("Uid:"):
                    taken.update(int(v) for v in line.split()[1:])
        except (OSError, ValueError):
            continue
    for uid in CANDIDATE_UIDS:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if uid not in taken:
                return uid
    return None


def _blocked_ancestor(path: Path) -> Path | None:
    """The highest ancestor of ``path`` that others may not traverse (None: all of them may)."""
    for ancestor in reversed(path.parents):
        if not ancestor.stat().st_mode & stat.S_IXOTH:
            return ancestor
    return None


def reach_script(needed: list[Path], stage: Path) -> list[str]:
    """Shell lines (run as root in a private mount namespace) that make each of ``needed`` reachable by
    any uid: its directory is bound aside, a tmpfs (0755) covers its highest untraversable ancestor, and
    it is bound back at its own path in that tmpfs."""
    outer = [p for p in needed if not any(p != q and p.is_relative_to(q) for q in needed)]
    by_ancestor: dict[Path, list[Path]] = {}
    for path in outer:
        ancestor = _blocked_ancestor(path)
        if ancestor is not None:
            by_ancestor.setdefault(ancestor, []).append(path)
    lines, q = [], shlex.quote
    for n, (ancestor, paths) in enumerate(sorted(by_ancestor.items())):
        aside = [stage / f"{n}-{i}" for i in range(len(paths))]
        for path, spot in zip(paths, aside, strict=True):
            lines += [f"mkdir -p {q(str(spot))}", f"mount --bind {q(str(path))} {q(str(spot))}"]
        lines.append(f"mount -t tmpfs -o mode=0755,size=1m gf2-nonroot-judge {q(str(ancestor))}")
        for path, spot in zip(paths, aside, strict=True):
            lines += [f"mkdir -p {q(str(path))}", f"mount --bind {q(str(spot))} {q(str(path))}"]
    return lines


def judge_command(basetemp: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--basetemp={basetemp}",
        "tests/agents/test_sandbox_outside.py",
        "-k",
        SELECTION,
    ]


def judge_env(home: Path) -> dict[str, str]:
    """A clean environment for the judge (nothing of root's, nor the sandbox's host-uid override)."""
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "TMPDIR": str(home / "tmp"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }


@pytest.mark.slow
@needs_bwrap
def test_outside_judge_as_an_unprivileged_user() -> None:
    """The bwrap half of the outside corpus, and the carry-over tests, pass for an unprivileged user."""
    work = Path(tempfile.mkdtemp(prefix="gf2-nonroot-judge-", dir="/tmp"))
    try:
        home = work / "home"
        (home / "tmp").mkdir(parents=True)
        env = judge_env(home)
        command = judge_command(work / "basetemp")
        if os.geteuid() == 0:
            uid = _unused_uid()
            tools = [shutil.which(name) for name in ("unshare", "setpriv", "mount")]
            if uid is None or not all(tools):
                pytest.skip(f"no unused uid in {CANDIDATE_UIDS} or no unshare/setpriv/mount ({tools})")
            needed = sorted({Path(os.path.realpath(p)) for p in (sys.base_prefix, sys.prefix, REPO)})
            for path in needed:
                if not path.stat().st_mode & stat.S_IXOTH:
                    pytest.skip(f"{path} itself is closed to other users: binding it back would not help")
            for path in (work, home, home / "tmp"):
                os.chown(path, uid, uid)
            drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", "env", "-i"]
            drop += [f"{k}={v}" for k, v in env.items()]
            script = [*reach_script(needed, work / "stage"), f"exec {shlex.join([*drop, *command])}"]
            argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-euc", "\n".join(script)]
            who = f"uid {uid} (via setpriv, in a private mount namespace)"
        else:
            argv, who = command, f"uid {os.geteuid()}"
        started = time.monotonic()
        done = subprocess.run(
            argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=JUDGE_TIMEOUT_S + 60
        )
        took = time.monotonic() - started
    finally:
        shutil.rmtree(work, ignore_errors=True)
    tail = (done.stdout + done.stderr)[-4000:]
    summary = done.stdout.strip().splitlines()[-1:] or ["(no output)"]
    print(f"the outside judge as {who}: {summary[0]} in {took:.0f} s")
    assert done.returncode == 0, f"the judge as {who} failed (exit {done.returncode}, {took:.0f} s):\n{tail}"
    assert " passed" in summary[0] and "skipped" not in summary[0], tail  # it ran, and ran everything
    assert took < JUDGE_TIMEOUT_S, f"the judge as {who} took {took:.0f} s"
