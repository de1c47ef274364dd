"""``gf2 compare --executor ray``: the same rows, bytes and fit as the local run, on a real Ray cluster.

The module's cluster is a real one, started by ``ray start --head --block`` (2 CPUs, a small object
store, token authentication with a token of its own) in a temporary directory, and stopped by its
PID at the end; no process of it may outlive the module.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gf2env.agents.harness.compare import load_config
from gf2env.agents.harness.evaluate import evaluate, make_agents
from gf2env.agents.harness.executors import ExecutorSpec, RayExecutor
from gf2env.agents.harness.grid import Grid, grid_cells
from gf2env.errors import GF2ConfigError
from gf2env.report.results import read_results_csv
from tests.extras import require_extra
from tests.measured import unmeasured, unmeasured_csv
from tests.paths import REPO as ROOT

GRID_FLAGS = ["--p", "8,12", "--depths", "0,1,3,7", "--trials", "40", "--seed", "3"]
CSVS = ("results.csv", "summary.csv", "fit.csv")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _processes_of(marker: str) -> list[int]:
    """PIDs whose command line names ``marker`` (the cluster's temporary directory)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                pids.append(int(entry.name))
    return pids


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[str, str]]:
    """A 2-CPU Ray head on 127.0.0.1; yields the address and the environment that reaches it."""
    require_extra("ray", "ray")
    temp = tempfile.mkdtemp(prefix="gf2ray", dir="/tmp")  # short: Ray's socket paths live under it
    token = Path(temp) / "token"
    token.write_text(secrets.token_hex(32))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),  # workers import this checkout, as the driver does
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(token),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    port = _free_port()
    ray_cli = Path(sys.executable).parent / "ray"
    cmd = [
        str(ray_cli), "start", "--head", "--block", "--num-cpus", "2", "--port", str(port),
        "--node-ip-address", "127.0.0.1", "--include-dashboard=false", "--disable-usage-stats",
        "--object-store-memory", str(200 * 1024**2), "--temp-dir", temp,
        "--dashboard-port", str(_free_port()), "--dashboard-agent-listen-port", str(_free_port()),
        "--ray-client-server-port", str(_free_port()),
    ]  # fmt: skip
    log = open(Path(temp) / "ray-start.log", "w")  # noqa: SIM115 (closed at teardown)
    head = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in (Path(temp) / "ray-start.log").read_text():
            if head.poll() is not None or time.monotonic() > deadline:
                pytest.fail("ray start failed:\n" + (Path(temp) / "ray-start.log").read_text()[-3000:])
            time.sleep(0.5)
        yield {"address": f"127.0.0.1:{port}", **{k: v for k, v in env.items() if k.startswith("RAY_")}}
    finally:
        head.send_signal(signal.SIGTERM)  # --block: ray start stops every process it started
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        log.close()
        deadline = time.monotonic() + 30
        while _processes_of(temp) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = _processes_of(temp)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)
        assert not left, f"processes of the Ray cluster outlived it: {left}"


def _gf2_compare(out: Path, *flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "gf2env", "compare", "--agents", "A,B,B-exact,C", *GRID_FLAGS]
    cmd += ["--out", str(out), "--no-plots", "--quiet", *flags]
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env=full_env)


def test_gf2_compare_on_a_ray_cluster_writes_the_local_runs_bytes(cluster, tmp_path):
    local = _gf2_compare(tmp_path / "local")
    assert local.returncode == 0, local.stderr[-3000:]
    ray_env = {k: v for k, v in cluster.items() if k != "address"}
    remote = _gf2_compare(tmp_path / "ray", "--executor", "ray", "--address", cluster["address"], env=ray_env)
    assert remote.returncode == 0, remote.stderr[-3000:]
    assert "Connecting to existing Ray cluster" in remote.stderr  # its own cluster, not a new local one
    for name in CSVS:  # the same bytes but for the measured compute columns
        assert unmeasured_csv(tmp_path / "ray" / name) == unmeasured_csv(tmp_path / "local" / name), name
    assert all(float(r["wall_ms"]) > 0 for r in read_results_csv(tmp_path / "ray" / "results.csv"))
    # 2 settings x 4 depths x 40 trials, 4 agents less B-exact past its depth limit; skips reported alike
    assert "B-exact skipped at g = 7" in remote.stdout and "B-exact skipped at g = 7" in local.stdout


@pytest.fixture
def sb3_checkpoint(tmp_path) -> Path:
    """A real (untrained, seeded) PPO checkpoint of GF2Recon-v1 at p=6, d=3, K=8, n=4."""
    sb3 = require_extra("stable_baselines3", "sb3")
    from gf2env.envs.env import GF2ReconEnv

    model = sb3.PPO("MultiInputPolicy", GF2ReconEnv(p=6, d=3, n=4, K=8), seed=0, device="cpu", n_steps=64)
    path = tmp_path / "ppo.zip"
    model.save(path)
    return path


def test_llm_and_sb3_agents_beside_ray_tasks_give_the_local_rows(cluster, server, sb3_checkpoint, tmp_path):
    """A YAML comparison naming the executor: an LLM (answering in the driver, from the fault server's
    ok mode) and an SB3 checkpoint (loaded on the workers) beside estimators; the local run's bytes."""
    agents = (
        f"[A, C, {{llm: {{model: tiny, backend: vllm, base_url: '{server.url}/ok', name: llm}}}}, "
        f"{{sb3: {{path: {sb3_checkpoint}, algo: ppo, name: ppo}}}}]"
    )
    grid = "{p: [6], d: [3], K: [8], depths: [0, 1, 2, 3, 4], trials: 12, seed: 2}"
    ray_env = {k: v for k, v in cluster.items() if k != "address"}
    for kind in ("local", "ray"):
        config = tmp_path / f"{kind}.yaml"
        run_on = f"executor: ray\naddress: '{cluster['address']}'\n" if kind == "ray" else ""
        config.write_text(f"agents: {agents}\ngrid: {grid}\nout: {tmp_path / kind}\nplots: false\n{run_on}")
        cmd = [sys.executable, "-m", "gf2env", "compare", "--config", str(config), "--quiet"]
        env = {**os.environ, "PYTHONPATH": str(ROOT), **(ray_env if kind == "ray" else {})}
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
        assert run.returncode == 0, run.stderr[-3000:]
        assert "ppo skipped at g = 4" in run.stdout  # trained with n=4 terms: reported, not lost
    for name in CSVS:  # the same bytes but for the measured compute columns
        assert unmeasured_csv(tmp_path / "ray" / name) == unmeasured_csv(tmp_path / "local" / name), name
    rows = (tmp_path / "ray" / "results.csv").read_text().splitlines()
    assert {row.split(",")[0] for row in rows[1:]} == {"A", "C", "llm", "ppo"}
    # The LLM's queries went from the driver, each run from its own log (its out folder).
    local_log = (tmp_path / "local" / "queries.jsonl").read_text().splitlines()
    assert len((tmp_path / "ray" / "queries.jsonl").read_text().splitlines()) == len(local_log) > 0


def test_in_process_with_a_local_ray_of_its_own(monkeypatch):
    """No address: the executor starts a Ray of its own (no token: this test's choice) and stops it;
    the rows, skips included, are the local executor's, however few cells are in flight at once."""
    ray = require_extra("ray", "ray")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # no ~/.ray/auth_token written by the test
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    agents = make_agents(["A", "B-exact", "D(g//2)"])
    grid = Grid(depths=(0, 1, 3, 5), trials=30, p=(8, 12), seed=7)
    local = evaluate(agents, grid_cells(grid), seed=7, progress=False)
    remote = evaluate(agents, grid_cells(grid), seed=7, progress=False, executor=RayExecutor(window=2))
    assert not ray.is_initialized()  # it stopped the Ray it started
    assert (
        unmeasured(remote.rows) == unmeasured(local.rows)
        and remote.skipped == local.skipped
        and local.skipped
    )
    skips = sum(len(cases) for cases in local.skipped.values())  # B-exact past its limit (g = 5, p = 12)
    assert len(local.rows) == 30 * (3 * 8 - skips)


@pytest.mark.parametrize(
    ("kind", "address", "fragment"),
    [
        ("dask", None, "executor='dask' is not one of ('local', 'ray')"),
        ("local", "auto", "add --executor ray"),
        ("ray", "head-node", "is not a Ray address; pass auto"),
        ("ray", "10.0.0.1:99999", "is not a Ray address"),
    ],
)
def test_executor_errors_name_the_fix(kind, address, fragment):
    with pytest.raises(GF2ConfigError) as err:
        ExecutorSpec(kind, address)
    assert fragment in str(err.value)


def test_addresses_and_the_config_file(tmp_path):
    for address in ("auto", "local", "10.0.0.1:6379", "ray://head.example:10001", "[::1]:6379"):
        assert ExecutorSpec("ray", address).address == address
    config = tmp_path / "c.yaml"
    config.write_text("agents: [A]\ngrid: {depths: [0], trials: 2}\nexecutor: ray\naddress: 10.0.0.1:6379\n")
    assert load_config(config).executor == ExecutorSpec("ray", "10.0.0.1:6379")
    config.write_text("agents: [A]\ngrid: {depths: [0], trials: 2}\nexecutor: spark\n")
    with pytest.raises(GF2ConfigError, match="executor='spark'"):
        load_config(config)


def test_cli_executor_errors_are_one_line_and_local_needs_no_ray(tmp_path):
    bad = _gf2_compare(tmp_path / "bad", "--executor", "ray", "--address", "nowhere")
    assert bad.returncode != 0 and "is not a Ray address" in bad.stderr and "Traceback" not in bad.stderr
    # Without Ray importable: the local default runs, --executor ray names the extra to install.
    block_ray = (
        "import sys, runpy; sys.modules['ray'] = None; sys.argv[0] = 'gf2'; runpy.run_module('gf2env')"
    )
    base = [sys.executable, "-c", block_ray, "compare", "--agents", "A", "--depths", "0,1", "--trials", "5"]
    base += ["--no-plots", "--no-fit", "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = [*base, "--out", str(tmp_path / "local")]
    local = subprocess.run(run, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert local.returncode == 0, local.stderr[-2000:]
    run = [*base, "--out", str(tmp_path / "ray"), "--executor", "ray"]
    missing = subprocess.run(run, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert missing.returncode != 0 and "pip install -e '.[ray]'" in missing.stderr
    assert "Traceback" not in missing.stderr
