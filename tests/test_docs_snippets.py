"""Every fenced Python block of README.md and docs/**/*.md runs as written, every ``gf2`` command line
and every ``python -m MODULE`` in their bash blocks parses or imports, and every relative link leads to
a file (and a heading) of the repository: a page cannot rot.

A block runs in a fresh folder with this interpreter. An HTML comment on the lines just before its
fence (invisible on the rendered page) says what it needs:

- ``<!-- snippet setup: CMD -->``: a shell command run first in that folder (e.g. ``gf2 generate``);
- ``<!-- snippet server: CMD -->``: a server started first and stopped after (its port 8000 is
  replaced, in CMD and in the block, by a free one);
- ``<!-- snippet python: .venv-verifiers -->``: the interpreter of another venv of the repository;
- ``<!-- snippet opt-in: WHY -->``: a block that needs a GPU or a long run, run only where
  ``GF2_SNIPPETS_ALL=1``.

Bash blocks are not run; their ``gf2 ...`` lines are parsed by ``gf2``'s own parser (``gf2 train``
lines: the script must exist), and their ``python -m MODULE`` lines must name a module that imports
(``gf2env.agents``, not the folder name ``agents``). Links: a relative link (``[x](path#anchor)``,
outside code) must resolve inside the repository to a file that exists, and an anchor into a Markdown
page must be one of its headings, slugged as GitHub does. The pages stand alone: no page names files
outside the repository (``../shared``), a tracker's issue numbers or "this machine"; and every
section reference of the code (the section sign, in agents/, gf2env/, train/, tests/, bench/) reads
``docs/design.md`` and a section number that docs/design.md has.
"""

from __future__ import annotations

import importlib.util
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


def bash_lines() -> list[tuple[str, str]]:
    """``(where, line)`` of every line of the bash blocks (continuations joined, comments dropped)."""
    found = []
    for snippet in snippets("bash"):
        joined = re.sub(r"\\\n\s*", " ", snippet.code)
        for offset, line in enumerate(joined.splitlines()):
            found.append((f"{snippet.id}+{offset + 1}", line.split(" #")[0].strip()))
    return found


def python_m_modules() -> list[tuple[str, str]]:
    """``(where, module)`` of every ``python -m MODULE`` of the bash blocks (any interpreter path)."""
    return [
        (where, m[1]) for where, line in bash_lines() for m in re.finditer(r"python\S* -m ([\w.]+)", line)
    ]


@pytest.mark.parametrize(("where", "module"), python_m_modules(), ids=[w for w, _ in python_m_modules()])
def test_python_m_modules_import(where, module):
    top = module.split(".")[0]
    assert top not in ("agents", "train"), f"{where}: python -m {module}: the package is gf2env.{module}"
    if top not in ("gf2env", "gf2_recon"):
        return  # another project's module (vllm, pip, ...): its own venv may not be built here
    assert importlib.util.find_spec(module) is not None, f"{where}: python -m {module}: no such module"


def prose(page: Path) -> str:
    """A page's text outside fenced blocks and inline code: where its links live."""
    text = re.sub(r"^(`{3,})[^`\n]*\n.*?^\1\s*$", "", page.read_text(), flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"(`+).+?\1", "", text)


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown page."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", prose_with_code(page), flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def prose_with_code(page: Path) -> str:
    """A page's text outside fenced blocks (headings keep their inline code)."""
    return re.sub(r"^(`{3,})[^`\n]*\n.*?^\1\s*$", "", page.read_text(), flags=re.MULTILINE | re.DOTALL)


def links() -> list[tuple[str, Path, str]]:
    """``(where, page, target)`` of every relative link of the pages."""
    found = []
    for page in PAGES:
        for n, line in enumerate(prose(page).splitlines(), 1):
            for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
                if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
                    found.append((f"{page.relative_to(REPO)}:{n}", page, target))
    return found


@pytest.mark.parametrize(("where", "page", "target"), links(), ids=[f"{w}:{t}" for w, _, t in links()])
def test_relative_links_resolve(where, page, target):
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    assert dest.is_relative_to(REPO), f"{where}: {target} leads outside the repository"
    assert dest.exists(), f"{where}: {target}: {dest.relative_to(REPO)} does not exist"
    if anchor and dest.suffix == ".md":
        assert anchor in anchors(dest), f"{where}: {target}: no heading #{anchor} in {dest.relative_to(REPO)}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_pages_stand_alone(page):
    for n, line in enumerate(page.read_text().splitlines(), 1):
        for bad in (r"\.\./shared", r"\bissues? #?[0-9]+", r"\bthis machine\b"):
            assert not re.search(bad, line, flags=re.IGNORECASE), f"{page.name}:{n}: {line.strip()!r}"


SECTION = "\N{SECTION SIGN}"


def section_references() -> list[tuple[str, str]]:
    """``(where, line)`` of every line of the code that holds the section sign."""
    found = []
    for folder in ("agents", "gf2env", "train", "tests", "bench"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if SECTION in line:
                    found.append((f"{path.relative_to(REPO)}:{n}", line))
    return found


def test_section_references_resolve():
    design = (REPO / "docs" / "design.md").read_text()
    sections = set(re.findall(r"^## (\d+)\. ", design, flags=re.MULTILINE))
    for where, line in section_references():
        for m in re.finditer(f"(\\S*) {SECTION}(\\d+)?", line):
            assert m[1].endswith("docs/design.md") and m[2] in sections, f"{where}: {line.strip()!r}"
