"""gf2env.agents.sandbox against real hostile code, in real processes.

Every file in tests/agents/sandbox_corpus/ is one snippet whose header says what must happen (the
format: :mod:`tests.agents.sandbox_judge`); here each runs at the limits its header names and is judged
by the sandbox's own report. test_sandbox_outside.py judges the same corpus at the default limits,
from outside.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from gf2env.agents.sandbox import (
    EMPTY_VIEW,
    STOP_REASONS,
    UNSAFE,
    Sandbox,
    SandboxConfigError,
    SandboxLimits,
    SandboxPool,
    SandboxResult,
    SandboxUnavailableError,
    detect_isolation,
    record_view,
)
from gf2env.agents.sandbox import inside as harness
from gf2env.agents.sandbox import sandbox as sandbox_mod
from gf2env.agents.sandbox.limits import LIMIT_RANGES, MAX_WALL_S
from gf2env.errors import GF2ConfigError
from gf2env.records.record import Record
from tests.agents.sandbox_judge import (
    HAVE_BWRAP,
    INFO,
    MODE_PARAMS,
    Case,
    Context,
    check_expects,
    corpus_cases,
    corpus_params,
    fill,
    make_sandbox,
    needs_bwrap,
    parse_case,
    processes_mentioning,
    target_strings,
)
from tests.paths import REPO


def test_bubblewrap_is_here_where_ci_requires_it() -> None:
    """``make test`` sets GF2_REQUIRE_BWRAP: there, a machine without bubblewrap fails instead of skipping."""
    if os.environ.get("GF2_REQUIRE_BWRAP") and not HAVE_BWRAP:
        pytest.fail(f"GF2_REQUIRE_BWRAP is set but bubblewrap cannot run: {INFO['bwrap_error']}")


CASES = corpus_cases()
PARAMS = corpus_params(CASES)


# ---------------------------------------------------------------------------- the corpus (conftest.py: ctx)
@pytest.mark.parametrize(("case", "mode"), PARAMS)
def test_corpus(case: Case, mode: str, ctx: Context) -> None:
    code = case.path.read_text()
    assert "@SECRET@" not in code, "the secret must be found by the code, not given to it"
    code = fill(code, ctx.fill)
    limits = SandboxLimits(**case.limits)
    sandbox = make_sandbox(limits, mode)
    started = time.monotonic()
    with sandbox:  # its warm worker (and in UNSAFE mode its scratch) lives until the Sandbox closes
        result = sandbox.run_record(code, ctx.record)
        elapsed = time.monotonic() - started
    where = f"{case.name} [{mode}] -> {result.stop_reason} exit={result.exit_code} signal={result.signal}"
    detail = f"{where}\nstdout: {result.stdout[-1500:]!r}\nstderr: {result.stderr[-1500:]!r}"

    # what holds for every run
    assert result.stop_reason in STOP_REASONS, detail
    assert len(result.stdout) <= limits.output_bytes and len(result.stderr) <= limits.output_bytes, detail
    assert len(result.stdout) <= result.stdout_bytes and len(result.stderr) <= result.stderr_bytes, detail
    assert elapsed <= limits.wall_s + 3, detail
    assert list(ctx.work_tmp.iterdir()) == [], f"{where}: the run's temp files were left behind"
    assert processes_mentioning(str(ctx.work_tmp)) == [], f"{where}: a process of the run is still alive"

    check_expects(case.expects, result, ctx, limits.output_bytes, elapsed, where)


def test_corpus_is_complete(tmp_path: Path) -> None:
    names = {case.name for case in CASES}
    for needed in (
        "timeout_busy_loop",
        "cpu_c_level_pow",
        "memory_bytes_bomb",
        "memory_numpy_50gb",
        "fork_storm",
        "daemon_double_fork",
        "network",
        "read_host_files",
        "write_outside_scratch",
        "introspection_frames",
        "ctypes_syscalls",
        "output_flood_stdout",
        "kill_parent",
        "benign_solver",
    ):
        assert needed in names
    bad = tmp_path / "bad.py"
    bad.write_text("# expect: stdout_contain=x\npass\n")
    with pytest.raises(ValueError, match="unknown check 'stdout_contain'"):
        parse_case(bad)


def test_target_check_can_fail(ctx: Context) -> None:
    """The corpus's target_absent check would see the answer if it were printed."""
    sandbox = make_sandbox(SandboxLimits(), "unsafe")
    leaked = sandbox.run(f"print({list(ctx.record.target)})", record_view(ctx.record))
    assert any(s in leaked.stdout for s in target_strings(ctx.record))


# ---------------------------------------------------------------------------- the record view
def test_record_view_fields(record: Record) -> None:
    view = record_view(record)
    assert set(view) == {"n", "p", "d", "g", "K", "prefix", "samples"}
    assert (view["n"], view["p"], view["d"], view["g"], view["K"]) == (
        record.n,
        record.p,
        record.d,
        record.g,
        record.K,
    )
    assert view["prefix"] == [list(t) for t in record.prefix]
    hexes = [s["x"] for s in record.to_json()["samples"]]
    for s, hx, a, v, y in zip(
        view["samples"], hexes, record.address, record.payload, record.labels, strict=True
    ):
        assert set(s) == {"x", "bits", "address", "payload", "y"}
        assert s["x"] == int(hx, 16) and s["bits"] == format(s["x"], f"0{record.n + record.p}b")
        assert s["address"] == "".join(map(str, a)) and s["payload"] == "".join(map(str, v))
        assert s["y"] == int(y)
    json.dumps(view)


def test_record_view_never_holds_the_target(record: Record) -> None:
    view = record_view(record)
    assert "target" not in view and "target" not in json.dumps(view)
    other = record.target[::-1] if len(record.target) > 1 else (record.target[0] + 1,)
    twin = dataclasses.replace(record, target=tuple(sorted({*other, 63})))
    assert twin.target != record.target
    assert record_view(twin) == view  # nothing in the view depends on the target


def test_record_view_refuses_non_records() -> None:
    with pytest.raises(SandboxConfigError, match="needs a gf2env.records.record.Record, got dict"):
        record_view({"n": 1})  # type: ignore[arg-type]


def test_run_refuses_a_view_with_the_answer(record: Record) -> None:
    sandbox = make_sandbox(SandboxLimits(), "unsafe")
    view = {**record_view(record), "target": list(record.target)}
    with pytest.raises(SandboxConfigError, match="'target' key"):
        sandbox.run("print(1)", view)
    with pytest.raises(SandboxConfigError, match=r"lacks the keys \['samples'\]"):
        sandbox.run("print(1)", {k: v for k, v in record_view(record).items() if k != "samples"})
    with pytest.raises(SandboxConfigError, match="code must be a str"):
        sandbox.run(b"print(1)")  # type: ignore[arg-type]


def test_empty_view_and_shortcuts() -> None:
    sandbox = make_sandbox(SandboxLimits(), "unsafe")
    result = sandbox.run(
        "print(n, p, d, g, K, prefix, samples, record == dict(n=0, p=0, d=0, g=0, K=0, "
        "prefix=[], samples=[]))"
    )
    assert result.ok and result.stdout == "0 0 0 0 0 [] [] True\n", result
    assert EMPTY_VIEW["samples"] == []


# ---------------------------------------------------------------------------- limits and results
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"wall_s": 0}, "wall_s=0"),
        ({"wall_s": float("inf")}, "wall_s=inf"),
        ({"wall_s": "5"}, "wall_s='5'"),
        ({"cpu_s": 0}, "cpu_s=0: give an integer >= 1"),
        ({"cpu_s": 2.5}, "cpu_s=2.5"),
        ({"memory_mb": 32}, "memory_mb=32: give an integer >= 256"),
        ({"open_files": 3}, "open_files=3"),
        ({"output_bytes": True}, "output_bytes=True"),
        ({"file_size_mb": -1}, "file_size_mb=-1"),
        ({"scratch_mb": 0}, "scratch_mb=0"),
        ({"wall_s": 1e10}, "wall_s=10000000000.0: give a finite number of seconds > 0 and <= 3600"),
        ({"wall_s": 2.2e6}, "wall_s=2200000.0"),  # past the worker's poll: every run killed its worker
        ({"open_files": 4097}, "open_files=4097: give an integer >= 16 and <= 4096"),  # setup failed
        ({"cpu_s": 10**9}, "cpu_s=1000000000"),
        ({"output_bytes": 1 << 40}, "output_bytes=1099511627776"),
        ({"recursion_limit": 10**9}, "recursion_limit=1000000000"),
        ({"scratch_mb": 1024}, "scratch_mb=1024: the scratch is part of memory_mb=1024"),
    ],
)
def test_limits_validation_names_the_value(kwargs: dict, message: str) -> None:
    with pytest.raises(SandboxConfigError, match=re.escape(message)) as info:
        SandboxLimits(**kwargs)
    assert isinstance(info.value, GF2ConfigError)


def test_constructor_validation() -> None:
    with pytest.raises(SandboxConfigError, match="isolation='docker' is not one of"):
        Sandbox(isolation="docker")
    with pytest.raises(SandboxConfigError, match="limits must be a SandboxLimits"):
        Sandbox(limits={"wall_s": 1})  # type: ignore[arg-type]
    sandbox = make_sandbox(SandboxLimits(), "unsafe")
    for size in (0, -2, 1.5, True):
        with pytest.raises(SandboxConfigError, match=f"size={size!r}"):
            SandboxPool(sandbox, size)  # type: ignore[arg-type]
    with pytest.raises(SandboxConfigError, match="give \\(code, view\\) pairs"):
        SandboxPool(sandbox, 1).map(["print(1)"])  # type: ignore[list-item]


def test_missing_bwrap_is_refused_with_the_fix() -> None:
    with pytest.raises(SandboxUnavailableError) as info:
        Sandbox(isolation="bwrap", bwrap="/nonexistent/bwrap")
    message = str(info.value)
    assert "/nonexistent/bwrap" in message
    assert "apt-get install -y bubblewrap" in message and UNSAFE in message
    assert isinstance(info.value, GF2ConfigError)
    assert detect_isolation("/nonexistent/bwrap")["bwrap"] is False


def test_unsafe_mode_warns_and_lists_its_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_mod, "_unsafe_warned", False)
    with pytest.warns(RuntimeWarning, match="UNSAFE-rlimits-only"):
        sandbox = Sandbox(isolation=UNSAFE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Sandbox(isolation=UNSAFE)  # once only
    assert "bwrap-namespaces" not in sandbox.layers and "read-only-fs" not in sandbox.layers
    assert {"process-group", "rlimits", "timeout", "output-cap"} <= set(sandbox.layers)
    assert ("seccomp" in sandbox.layers) == bool(INFO["seccomp"])


@needs_bwrap
def test_bwrap_layers() -> None:
    sandbox = Sandbox()
    assert {
        "process-group",
        "rlimits",
        "timeout",
        "output-cap",
        "bwrap-namespaces",
        "read-only-fs",
        "no-network",
        "clearenv",
    } <= set(sandbox.layers)
    assert INFO["user_namespaces"] is True


def test_seccomp_is_detected_where_it_should_be() -> None:
    if harness.seccomp_supported():
        assert INFO["seccomp"] is False and INFO["seccomp_error"]
    else:
        assert INFO["seccomp"] is True, INFO["seccomp_error"]


def test_syscall_numbers_match_the_kernel_headers() -> None:
    header = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
    if not header.exists():
        header = Path("/usr/include/asm/unistd_64.h")
    if not header.exists():
        pytest.skip("no x86_64 kernel headers (apt-get install linux-libc-dev)")
    table = dict(re.findall(r"#define __NR_(\w+) (\d+)", header.read_text()))
    for name, nr in {
        **harness.DENIED_SYSCALLS,
        **harness.SELF_PID_SYSCALLS,
        "fcntl": harness.NR_FCNTL,
        "ioctl": harness.NR_IOCTL,
        "clone": harness.NR_CLONE,
        "clone3": harness.NR_CLONE3,
        "kill": harness.NR_KILL,
        "tgkill": harness.NR_TGKILL,
    }.items():
        assert int(table[name]) == nr, name


def test_seccomp_program_shape() -> None:
    prog = harness.seccomp_program(1234)
    assert prog[0] == (harness.LD_W_ABS, 0, 0, harness.OFF_ARCH) and prog[-1][0] == harness.RET_K
    assert len(prog) < 4096
    for i, (code, jt, jf, _) in enumerate(prog):  # every jump lands inside the program
        if code in (harness.JEQ_K, harness.JGE_K, harness.JSET_K):
            assert i + 1 + max(jt, jf) < len(prog)


def test_timeout_comes_back_promptly() -> None:
    sandbox = make_sandbox(SandboxLimits(wall_s=1.0), "unsafe")
    started = time.monotonic()
    result = sandbox.run("import time\nprint('begun', flush=True)\ntime.sleep(60)")
    elapsed = time.monotonic() - started
    assert result.stop_reason == "timeout" and result.signal == signal.SIGKILL
    assert 1.0 <= result.wall_s <= elapsed < 3.0
    assert result.stdout == "begun\n"  # what was printed before the kill is kept
    assert not result.ok


def test_result_to_dict_and_types() -> None:
    result = make_sandbox(SandboxLimits(), "unsafe").run("import sys\nprint('hi')\nsys.exit(3)")
    assert isinstance(result, SandboxResult)
    d = result.to_dict()
    assert d["stop_reason"] == "error" and d["exit_code"] == 3 and d["ok"] is False and d["stdout"] == "hi\n"
    assert set(d) == {f.name for f in dataclasses.fields(SandboxResult)} | {"ok"}
    assert result.cpu_s > 0 and result.wall_s > 0
    json.dumps(d)


def test_syntax_error_is_an_error() -> None:
    result = make_sandbox(SandboxLimits(), "unsafe").run("def broken(:\n")
    assert result.stop_reason == "error" and result.exit_code == 1 and "SyntaxError" in result.stderr


@needs_bwrap
def test_scratch_is_private_and_fresh(ctx: Context) -> None:
    sandbox = Sandbox(SandboxLimits())
    first = sandbox.run(f"open('/scratch/{ctx.token}', 'w').write('x')\nimport os\nprint(os.listdir('.'))")
    assert first.ok and ctx.token in first.stdout
    second = sandbox.run("import os\nprint(os.listdir('/scratch'), os.listdir('/tmp'))")
    assert second.ok and second.stdout == "[] []\n", second
    assert list(ctx.work_tmp.iterdir()) == []


@needs_bwrap
def test_bwrap_sees_a_minimal_world() -> None:
    code = (
        "import os, sys\n"
        "print(os.getuid(), os.getgid(), os.getpid(), sorted(os.listdir('/')))\n"
        "print(sorted(p for p in os.listdir('/proc') if p.isdigit()))\n"
        "print(open('/proc/self/status').read().count('0000000000000000'))\n"
        "import numpy; print('numpy', numpy.__version__)\n"
    )
    result = Sandbox().run(code)
    assert result.ok, result
    first, pids, _, last = result.stdout.splitlines()
    uid, gid, pid, *_ = first.split(" ", 3)
    assert (uid, gid) == ("65534", "65534") and int(pid) < 10
    assert "'work'" not in first and "'home'" not in first
    assert len(eval(pids)) <= 3  # bwrap's pid 1 and this process: its own pid namespace
    assert last == f"numpy {np.__version__}"


def test_pool_preserves_order() -> None:
    sandbox = make_sandbox(SandboxLimits(), "bwrap" if HAVE_BWRAP else "unsafe")
    jobs = [
        (f"import time\ntime.sleep({(8 - i) * 0.03})\nprint({i} * K)", {**EMPTY_VIEW, "K": 2})
        for i in range(8)
    ]
    results = SandboxPool(sandbox, size=4).map(jobs)
    assert [r.stdout for r in results] == [f"{2 * i}\n" for i in range(8)]
    assert all(r.ok for r in results)
    assert SandboxPool(sandbox).size == (os.cpu_count() or 1)
    assert SandboxPool(sandbox).map([]) == []


def test_check_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gf2env.agents.sandbox", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert '"bwrap":' in done.stdout and '"seccomp":' in done.stdout
    assert '"mode": "UNSAFE-rlimits-only"' in done.stdout and '"layers"' in done.stdout


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_the_largest_limits_allowed_still_run(mode: str) -> None:
    """Each documented maximum is one a run works under (beyond it, the worker's poll or the run's
    setup broke every run)."""
    largest = SandboxLimits(
        wall_s=MAX_WALL_S,
        cpu_s=LIMIT_RANGES["cpu_s"][1],
        open_files=LIMIT_RANGES["open_files"][1],
        output_bytes=LIMIT_RANGES["output_bytes"][1],
        recursion_limit=LIMIT_RANGES["recursion_limit"][1],
    )
    with make_sandbox(largest, mode, workers=1) as sandbox:
        result = sandbox.run("import resource\nprint(resource.getrlimit(resource.RLIMIT_NOFILE)[0])")
    assert result.ok and result.stdout == f"{LIMIT_RANGES['open_files'][1]}\n", result
