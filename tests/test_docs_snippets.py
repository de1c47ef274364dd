"""Every fenced Python block of README.md (and docs/*.md) runs as written, and every ``gf2`` command
line in a bash block parses: a snippet cannot rot.

A block runs in a fresh folder with this interpreter. An HTML comment on the lines just before its
fence (invisible on the rendered page) says what it needs:

- ``<!-- snippet setup: CMD -->``: a shell command run first in that folder (e.g. ``gf2 generate``);
- ``<!-- snippet server: CMD -->``: a server started first and stopped after (its port 8000 is
  replaced, in CMD and in the block, by a free one);
- ``<!-- snippet python: .venv-verifiers -->``: the interpreter of another venv of the repository;
- ``<!-- snippet opt-in: WHY -->``: a block that needs a GPU or a long run, run only where
  ``GF2_SNIPPETS_ALL=1``.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gf2env.cli import build_parser
from tests.paths import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("**/*.md"))]
MARKER = re.compile(r"^<!-- snippet (setup|server|python|opt-in): (.*) -->$")


@dataclass
class Snippet:
    page: Path
    line: int  # of the opening fence
    lang: str
    code: str
    needs: list[tuple[str, str]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.page.name}:{self.line}"


def snippets(lang: str) -> list[Snippet]:
    found = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        i = 0
        while i < len(lines):
            fence = re.match(r"^```(\w+)\s*$", lines[i])
            if not fence:
                i += 1
                continue
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            needs, k = [], i - 1
            while k >= 0 and (m := MARKER.match(lines[k])):
                needs.insert(0, (m[1], m[2]))
                k -= 1
            if fence[1] == lang:
                found.append(Snippet(page, i + 1, lang, "\n".join(lines[i + 1 : end]) + "\n", needs))
            i = end + 1
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the snippet's server exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"the snippet's server did not listen on {port} within {seconds} s")


@pytest.mark.parametrize("snippet", snippets("python"), ids=lambda s: s.id)
def test_python_blocks_run_as_written(snippet, tmp_path):
    needs = dict(snippet.needs)
    if "opt-in" in needs and not os.environ.get("GF2_SNIPPETS_ALL"):
        pytest.skip(f"opt-in ({needs['opt-in']}); GF2_SNIPPETS_ALL=1 runs it")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "MPLBACKEND": "Agg"}
    code, python, server = snippet.code, sys.executable, None
    if "python" in needs:
        python = str(REPO / needs["python"] / "bin" / "python")
        if not Path(python).exists():
            pytest.skip(f"{needs['python']} is not built here (make {needs['python']}/.ready builds it)")
    try:
        for kind, command in snippet.needs:
            if kind == "setup":
                done = subprocess.run(
                    command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
                )
                assert done.returncode == 0, f"setup {command!r}: {done.stderr[-2000:]}"
            elif kind == "server":
                port = free_port()
                code = code.replace("8000", str(port))
                words = shlex.split(command.replace("8000", str(port)))
                server = subprocess.Popen(
                    words, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
                wait_for_port(port, server)
        run = subprocess.run([python, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=600)  # fmt: skip
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    assert run.returncode == 0, f"{snippet.id} failed:\n{code}\n{run.stderr[-3000:]}"


def gf2_lines() -> list[tuple[str, str]]:
    """``(where, command line)`` of every ``gf2 ...`` line of the bash blocks (continuations joined)."""
    found = []
    for snippet in snippets("bash"):
        joined = re.sub(r"\\\n\s*", " ", snippet.code)
        for offset, line in enumerate(joined.splitlines()):
            if line.startswith("gf2 "):
                found.append((f"{snippet.id}+{offset + 1}", line.split(" #")[0].strip()))
    return found


@pytest.mark.parametrize(("where", "line"), gf2_lines(), ids=[w for w, _ in gf2_lines()])
def test_gf2_command_lines_parse(where, line):
    words = shlex.split(line)[1:]
    if words[:1] == ["train"]:  # the script's own flags are its parser's: check the script exists
        assert words[1] in ("grpo", "sft", "sb3") and (REPO / "train" / f"{words[1]}.py").exists(), line
        return
    try:
        args = build_parser().parse_args(words)
    except SystemExit as exit_:
        raise AssertionError(f"{where}: {line!r} does not parse (exit {exit_.code})") from None
    assert callable(args.func)
