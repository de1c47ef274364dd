"""SB3 training with the γ_g callback, checkpoints as agents, and gf2 compare mixing them with estimators."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from gf2env.agents.harness.grid import Grid, grid_cells  # noqa: E402
from gf2env.agents.sb3_agent import SB3Agent, SB3Spec, check_algorithm, observations  # noqa: E402
from gf2env.envs.env import GF2ReconEnv  # noqa: E402
from gf2env.errors import GF2ConfigError  # noqa: E402
from gf2env.records.record import Record  # noqa: E402
from gf2env.train.gamma_log import read_gamma_csv  # noqa: E402
from gf2env.train.sb3 import load_sb3_config  # noqa: E402
from tests.paths import REPO as ROOT

SMALL = ROOT / "configs" / "train/sb3/small.yaml"
CONFIG = """\
env: {{p: 6, d: 3, n: 4, K: 8, sampling: adversarial, step_mode: reveal}}
num_envs: 4
algo: ppo
ppo: {{policy: MultiInputPolicy, n_steps: 32, batch_size: 64, n_epochs: 1, gamma: 0.0}}
dqn: {{policy: MultiInputPolicy, learning_starts: 64, buffer_size: 1000, batch_size: 32, gamma: 0.0}}
total_timesteps: 384
gamma: {{depths: [0, 1], trials: 20, every: 128, eval_seed: 99}}
checkpoint_every: 256
seed: 0
output_dir: {out}
"""


def sb3_command(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "gf2env", "train", "sb3", "--config", str(config), *extra]


def train_sb3(config: Path, *extra: str) -> str:
    """Run ``gf2 train sb3``; its stdout."""
    run = subprocess.run(sb3_command(config, *extra), capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    """A run of each algorithm (with the progress bar); its config and stdout beside its folder."""
    root = tmp_path_factory.mktemp("sb3")
    out = {}
    for algo in ("ppo", "dqn"):
        config = root / f"{algo}.yaml"
        config.write_text(CONFIG.format(out=root / algo))
        (root / f"{algo}.stdout").write_text(train_sb3(config, "--algo", algo))
        out[algo] = root / algo
    return out


def gamma_steps(out: Path) -> list[int]:
    """The steps of ``gamma.csv``, checking that each has one row a depth (none twice)."""
    rows = read_gamma_csv(out / "gamma.csv")
    steps = sorted({r["step"] for r in rows})
    assert sorted((r["step"], r["g"]) for r in rows) == [(s, g) for s in steps for g in (0, 1)]
    return steps


def scalars(out: Path, algo: str) -> dict[str, list[tuple[int, float]]]:
    """SB3's TensorBoard scalars of a run (all its event files, a resumed run's included) by tag."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(out / "tensorboard" / f"{algo.upper()}_1"))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def num_timesteps(path: Path, algo: str) -> int:
    import stable_baselines3 as sb3

    return getattr(sb3, algo.upper()).load(str(path), device="cpu").num_timesteps


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_training_writes_gamma_rows_checkpoints_and_plots(trained, algo):
    out = trained[algo]
    rows = read_gamma_csv(out / "gamma.csv")
    steps = sorted({r["step"] for r in rows})
    assert steps[0] == 0 and steps[-1] >= 384 and len(steps) >= 4  # start, every 128 timesteps, end
    assert all(len([r for r in rows if r["step"] == s]) == 2 for s in steps)  # one row a (step, depth)
    assert all(0 <= r["gamma_lo"] <= r["gamma_mean"] <= r["gamma_hi"] <= 1 for r in rows)
    assert {r["trials"] for r in rows} == {20}
    assert (out / "final.zip").exists() and list((out / "checkpoints").glob(f"{algo}_*_steps.zip"))
    assert (out / "gamma_vs_step.png").exists() and list((out / "tensorboard").iterdir())
    record = json.loads((out / "run.json").read_text())
    assert record["command"] == "train sb3" and record["status"] == "ok"
    assert record["config"]["algo"] == algo and record["config"]["total_timesteps"] == 384


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_gamma_is_printed_and_logged_through_sb3s_logger_at_the_csv_steps(trained, algo):
    out = trained[algo]
    rows = read_gamma_csv(out / "gamma.csv")
    steps = gamma_steps(out)
    stdout = (out.parent / f"{algo}.stdout").read_text()
    printed = [line for line in stdout.splitlines() if line.startswith("γ at step ")]
    assert [int(line.split()[3].rstrip(":")) for line in printed] == steps  # one line an evaluation
    first = {r["g"]: r for r in rows if r["step"] == 0}
    assert f"g1 {first[1]['gamma_mean']:.3f} [{first[1]['gamma_lo']:.3f}, " in printed[0]
    assert "384/384" in stdout  # the progress bar's last state
    logged = scalars(out, algo)
    for g in (0, 1):
        for suffix, column in (("", "gamma_mean"), ("_lo", "gamma_lo"), ("_hi", "gamma_hi")):
            expected = [(r["step"], r[column]) for r in rows if r["g"] == g]
            got = logged[f"gamma/g{g}{suffix}"]
            assert [s for s, _ in got] == [s for s, _ in expected]
            assert np.allclose([v for _, v in got], [v for _, v in expected], atol=1e-6)
    # VecMonitor's episodes: SB3 logs their mean return and length
    assert {"rollout/ep_rew_mean", "rollout/ep_len_mean"} <= set(logged)
    assert all(1 <= v <= 4 for _, v in logged["rollout/ep_len_mean"])  # episodes of at most n=4 steps


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_resume_continues_from_the_last_checkpoint_without_rows_twice(trained, tmp_path, algo):
    run = tmp_path / "run"
    shutil.copytree(trained[algo], run)  # a run that ended at 384, its last checkpoint at 256
    config = trained[algo].parent / f"{algo}.yaml"
    stdout = train_sb3(config, "--algo", algo, "--output-dir", str(run), "--total-timesteps", "512",
                       "--resume", "--no-progress")  # fmt: skip
    buffer = " and its replay buffer (64 steps of 4 envs)" if algo == "dqn" else ""
    assert stdout.startswith(f"resuming from {run / 'checkpoints' / f'{algo}_256_steps.zip'}{buffer} at "
                             "timestep 256\n")  # fmt: skip
    assert [line for line in stdout.splitlines() if line.startswith("γ")] == [stdout.split("\n")[1]]
    assert stdout.split("\n")[1].startswith("γ at step 512: ")  # 384 is in gamma.csv already
    assert "/512" not in stdout  # --no-progress
    assert gamma_steps(run) == [0, 128, 256, 384, 512]
    assert [s for s, _ in scalars(run, algo)["gamma/g0"]] == [0, 128, 256, 384, 512]
    assert num_timesteps(run / "final.zip", algo) == 512
    record = json.loads((run / "run.json").read_text())  # the resumed run's, the first one's under previous
    assert "--resume" in record["argv"] and [r["status"] for r in record["previous"]] == ["ok"]


def test_a_killed_run_resumes_to_the_same_end(tmp_path):
    """A run killed after its first checkpoint, resumed: every multiple of gamma.every evaluated once,
    and the run ends at total_timesteps as an uninterrupted one does."""
    out = tmp_path / "run"
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG.format(out=out).replace("total_timesteps: 384", "total_timesteps: 2048")
                      .replace("every: 128", "every: 256"))  # fmt: skip
    first = out / "checkpoints" / "ppo_256_steps.zip"
    killed = subprocess.Popen(sb3_command(config, "--no-progress"), cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while killed.poll() is None and time.monotonic() < deadline and not first.exists():
            time.sleep(0.01)
    finally:
        killed.kill()
        killed.wait()
    assert killed.returncode < 0, "the run ended before it could be killed"
    assert not (out / "final.zip").exists()
    stdout = train_sb3(config, "--resume", "--no-progress")
    assert stdout.startswith(f"resuming from {out / 'checkpoints' / 'ppo_'}")
    assert gamma_steps(out) == list(range(0, 2049, 256))
    assert num_timesteps(out / "final.zip", "ppo") == 2048


def test_resume_without_a_checkpoint_names_the_folder(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG.format(out=tmp_path / "run"))
    run = subprocess.run(sb3_command(config, "--resume"), capture_output=True, text=True, timeout=300,
                         cwd=ROOT)  # fmt: skip
    assert run.returncode == 2, run.stderr[-3000:]
    assert run.stderr.startswith(
        f"gf2: error: --resume: {tmp_path / 'run' / 'checkpoints'} holds no ppo_<N>_steps.zip checkpoint"
    )
    assert "run without --resume to start it" in run.stderr and not (tmp_path / "run").exists()


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_a_checkpoint_reloads_as_an_agent_with_the_same_actions(trained, algo):
    import stable_baselines3 as sb3

    path = trained[algo] / "final.zip"
    agent = SB3Agent(SB3Spec(str(path), algo))
    live = getattr(sb3, algo.upper()).load(str(path), device="cpu")
    cell = next(grid_cells(Grid(depths=(1,), trials=30, p=(6,), d=(3,), K=(8,), seed=5)))
    first, again = agent.answer(cell), SB3Agent(SB3Spec(str(path), algo)).answer(cell)
    assert np.array_equal(first.action, again.action) and np.allclose(first.gamma, again.gamma)
    # The observation built from a record is the env's own at that step: same actions on the env.
    env = GF2ReconEnv(p=6, d=3, n=4, K=8, start_depth=1)
    obs, _ = env.reset(seed=11)
    record = Record.from_step(env.instance, env.evidence)
    built = observations([record], 4)
    for key, value in obs.items():
        np.testing.assert_array_equal(built[key][0], value)
    assert live.predict(obs, deterministic=True)[0] == agent.model.predict(built, deterministic=True)[0][0]
    if algo == "ppo":  # γ is the policy's probability of the truth; its rows sum to one
        probs = agent.action_probabilities(built)
        assert probs.shape == (1, 15) and np.isclose(probs.sum(), 1.0)
    with pytest.raises(GF2ConfigError, match="trained at p=6"):
        agent.check(12, 4, 32, 0)
    with pytest.raises(GF2ConfigError, match="n=4 terms"):
        agent.check(6, 3, 8, 4)


def test_gf2_compare_runs_an_sb3_checkpoint_next_to_estimators(trained, tmp_path):
    config = tmp_path / "compare.yaml"
    config.write_text(
        f"agents: [A, C, {{sb3: {{path: {trained['ppo'] / 'final.zip'}, algo: ppo, name: ppo}}}}]\n"
        "grid: {p: [6], d: [3], K: [8], depths: [0, 1, 2], trials: 30, seed: 4}\n"
        f"out: {tmp_path / 'out'}\n"
    )
    run = subprocess.run([sys.executable, "-m", "gf2env", "compare", "--config", str(config), "--quiet"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    out = tmp_path / "out"
    for name in ("results.csv", "summary.csv", "fit.csv", "gamma_vs_depth_p6_adversarial.png"):
        assert (out / name).stat().st_size > 0, name
    fitted = {line.split(",")[0] for line in (out / "fit.csv").read_text().splitlines()[1:]}
    assert fitted == {"A", "C", "ppo"}
    assert "ppo" in run.stdout and "effective-prefix fit" in run.stdout


def test_sb3_config_errors_name_the_fix(tmp_path):
    assert load_sb3_config(SMALL).algo == "ppo" and load_sb3_config(SMALL, algo="dqn").hyper["buffer_size"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("env: {n: 2}\ngamma: {depths: [0, 3]}\n")
    with pytest.raises(GF2ConfigError, match="evaluate at depths below n"):
        load_sb3_config(bad)
    bad.write_text("env: {}\nppo_hyper: {}\n")
    with pytest.raises(GF2ConfigError, match=r"unknown keys \['ppo_hyper'\]"):
        load_sb3_config(bad)
    assert load_sb3_config(SMALL).progress and not load_sb3_config(SMALL, progress=False).progress
    bad.write_text("env: {}\nprogress: maybe\n")
    with pytest.raises(GF2ConfigError, match="progress"):
        load_sb3_config(bad)


def test_a_checkpoint_of_another_algorithm_is_a_config_error(trained, tmp_path):
    dqn = trained["dqn"] / "final.zip"
    config = tmp_path / "compare.yaml"
    config.write_text(
        f"agents: [A, {{sb3: {{path: {dqn}, algo: ppo}}}}]\n"
        f"grid: {{p: [6], d: [3], K: [8], depths: [0], trials: 5}}\nout: {tmp_path / 'out'}\n"
    )
    run = subprocess.run([sys.executable, "-m", "gf2env", "compare", "--config", str(config), "--quiet"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)  # fmt: skip
    assert run.returncode == 2, run.stderr[-3000:]
    assert run.stderr.startswith(
        f"gf2: error: SB3 checkpoint {dqn} holds a MultiInputPolicy policy, trained by dqn"
    )
    assert "not algo='ppo'" in run.stderr and "(algo: dqn)" in run.stderr
    with pytest.raises(GF2ConfigError, match=r"trained by ppo or a2c, not algo='dqn'"):
        SB3Agent(SB3Spec(str(trained["ppo"] / "final.zip"), "dqn"))
    (tmp_path / "not.zip").write_text("not a zip")
    with pytest.raises(GF2ConfigError, match="could not be read"):
        SB3Agent(SB3Spec(str(tmp_path / "not.zip"), "ppo"))


def test_the_algorithm_check_reads_only_the_data_entry(trained, tmp_path):
    damaged = tmp_path / "damaged.zip"  # a PPO checkpoint whose parameter files are not torch files
    with zipfile.ZipFile(trained["ppo"] / "final.zip") as src, zipfile.ZipFile(damaged, "w") as dst:
        names = src.namelist()
        for name in names:
            dst.writestr(name, b"not a torch file" if name.endswith(".pth") else src.read(name))
    assert "data" in names and any(name.endswith(".pth") for name in names)
    check_algorithm(damaged, "ppo")  # the parameters are not read by the check
    with pytest.raises(GF2ConfigError, match=r"trained by ppo or a2c, not algo='dqn'"):
        check_algorithm(damaged, "dqn")
    with pytest.raises(GF2ConfigError, match=r"damaged\.zip could not be read \(.*\); pass the \.zip"):
        SB3Agent(SB3Spec(str(damaged), "ppo"))  # SB3's load reads them: still a typed error


SAVE_UNDER_OLD_NAMES = """
import sys
import gf2env.agents, gf2env.agents.set_policy as set_policy
from stable_baselines3 import PPO
from gf2env.integrations.sb3_vec_env import SB3VecEnv

# before the rename, agents/ was the top-level package `agents`: a checkpoint pickled its classes so
sys.modules["agents"], sys.modules["agents.set_policy"] = gf2env.agents, set_policy
for name in ("GF2SetPolicy", "GF2SetExtractor"):
    getattr(set_policy, name).__module__ = "agents.set_policy"
model = PPO(set_policy.GF2SetPolicy, SB3VecEnv(2, p=6, d=3, n=4, K=8), n_steps=8, batch_size=16,
            policy_kwargs={"d": 3, "hidden": 16, "bit_hidden": 8}, device="cpu", seed=0)
model.save(sys.argv[1])
"""


def test_a_checkpoint_that_names_the_old_module_paths_still_loads(tmp_path):
    """Checkpoints saved while agents/ installed as the top-level ``agents`` name ``agents.set_policy``;
    they load as agents now that it is ``gf2env.agents``, without putting ``agents`` back in sys.modules."""
    path = tmp_path / "old.zip"
    run = subprocess.run([sys.executable, "-c", SAVE_UNDER_OLD_NAMES, str(path)], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    with zipfile.ZipFile(path) as archive:
        data = archive.read("data").decode()
    import base64

    pickled = base64.b64decode(json.loads(data)["policy_class"][":serialized:"])
    assert b"agents.set_policy" in pickled and b"gf2env" not in pickled
    agent = SB3Agent(SB3Spec(str(path), "ppo"))
    assert type(agent.model.policy).__module__ == "gf2env.agents.set_policy"
    estimate = agent.answer(next(grid_cells(Grid(depths=(1,), trials=5, p=(6,), d=(3,), K=(8,), seed=5))))
    assert estimate.action.shape == (5,) and np.all((0 <= estimate.gamma) & (estimate.gamma <= 1))
    assert "agents" not in sys.modules and "agents.set_policy" not in sys.modules
