"""TRL's loops the way users launch them: TRL's command line, two processes under ``torchrun`` (gloo on
CPU), γ_g in the trainer's own logs (TensorBoard event files, ``trainer_state.json``), ``run.json``,
and ``--resume`` for SFT.

The two-process runs are compared with one-process runs of the same seed. The γ evaluation is
sharded by batches (``gf2env.train.distributed``), so at the same weights it answers the same; SFT's
updates are the same too up to floating-point rounding (the same global batch, its loss averaged over
the tokens of both processes), so its loss curve matches to 1e-4 and its γ table here; a sampled
reply after step 0 may follow the last bits of the weights. GRPO's rollouts are sampled on each process
from that process's random stream, so after the first update its weights, and γ, may differ: only
its step-0 evaluation is compared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

from gf2env.train.gamma_log import read_gamma_csv  # noqa: E402
from gf2env.train.tiny_lm import build_tiny_model  # noqa: E402
from gf2env.version import __version__  # noqa: E402
from tests.paths import REPO

BIN = Path(sys.executable).parent
GRPO_SMOKE = REPO / "configs" / "train" / "grpo" / "smoke.yaml"
SFT_SMOKE = REPO / "configs" / "train" / "sft" / "smoke.yaml"
GAMMA_COLUMNS = ("step", "g", "trials", "gamma_mean", "gamma_lo", "gamma_hi")


def gf2(*args: str, processes: int = 1, timeout: int = 900) -> subprocess.CompletedProcess:
    """``gf2 ARGS`` as users run it: the installed script, under ``torchrun`` for several processes."""
    cmd = [str(BIN / "gf2"), *args]
    if processes > 1:
        cmd = [str(BIN / "torchrun"), "--standalone", f"--nproc_per_node={processes}", *cmd]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env)
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-5000:])
    return run


def gamma_table(out: Path) -> list[tuple]:
    return sorted(tuple(row[c] for c in GAMMA_COLUMNS) for row in read_gamma_csv(out / "gamma.csv"))


def replies(out: Path) -> dict[tuple[str, str], str]:
    lines = (out / "gamma_queries.jsonl").read_text().splitlines()
    return {(e["model"], e["key"]): e["response"] for e in map(json.loads, lines)}


def losses(out: Path, step: int) -> dict[int, float]:
    state = json.loads((out / f"checkpoint-{step}" / "trainer_state.json").read_text())
    return {e["step"]: e["loss"] for e in state["log_history"] if "loss" in e}


def tensorboard_scalars(out: Path) -> dict[str, list[int]]:
    """Every scalar tag of the run's TensorBoard event files, and the steps it was written at."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags: dict[str, list[int]] = {}
    for events in sorted(out.rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events.parent), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            tags.setdefault(tag, []).extend(e.step for e in acc.Scalars(tag))
    return {tag: sorted(set(steps)) for tag, steps in tags.items()}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def grpo_runs(tiny, tmp_path_factory) -> dict[int, Path]:
    """The GRPO smoke run of the tiny model in one process and in two, reporting to TensorBoard."""
    root = tmp_path_factory.mktemp("grpo")
    for processes in (1, 2):
        out = root / f"p{processes}"
        gf2("train", "grpo", "--config", str(GRPO_SMOKE), "--model-path", str(tiny), "--output_dir", str(out),
            "--report_to", "tensorboard", processes=processes)  # fmt: skip
    return {1: root / "p1", 2: root / "p2"}


@pytest.mark.slow
def test_grpo_in_two_processes_evaluates_gamma_once_as_one_process_does(grpo_runs):
    one, two = grpo_runs[1], grpo_runs[2]
    # one γ log: evaluations at the start, every 2 steps and at the end, each (step, depth) once
    assert [(r[0], r[1]) for r in gamma_table(two)] == [(s, g) for s in (0, 2, 3) for g in (0, 1)]
    assert [r for r in gamma_table(two) if r[0] == 0] == [r for r in gamma_table(one) if r[0] == 0]
    at_start = {k: v for k, v in replies(one).items() if k[0].endswith("@step0")}
    assert len(at_start) == 8 and at_start == {
        k: v for k, v in replies(two).items() if k[0].endswith("@step0")
    }
    assert len(replies(two)) == 24  # 8 queries an evaluation, none asked twice
    # the main process alone writes: the checkpoints, the curriculum's state in them, the final model
    assert json.loads((two / "checkpoint-2" / "curriculum.json").read_text())["step"] == 2
    assert (two / "final" / "config.json").is_file() and (two / "checkpoint-3").is_dir()


@pytest.mark.slow
def test_gamma_is_in_the_trainers_logs(grpo_runs):
    two = grpo_runs[2]
    scalars = tensorboard_scalars(two)
    for g in (0, 1):
        for tag in (f"train/gamma/g{g}", f"train/gamma/g{g}_lo", f"train/gamma/g{g}_hi"):
            assert scalars.get(tag) == [0, 2, 3], (tag, sorted(scalars))
    assert scalars["train/gamma/g0_completion_tokens"] == [0, 2, 3]
    assert 1 in scalars["train/reward"] and 3 in scalars["train/loss"]  # the step's own log is still there
    history = json.loads((two / "checkpoint-3" / "trainer_state.json").read_text())["log_history"]
    logged = [(e["step"], e["gamma/g1"]) for e in history if "gamma/g1" in e]
    csv = [(r["step"], r["gamma_mean"]) for r in read_gamma_csv(two / "gamma.csv") if r["g"] == 1]
    assert logged == csv[:2]  # the checkpoint at step 3 is written before the end's evaluation


def wandb_history(run_file: Path) -> list[dict]:
    """The history rows of a W&B offline run file (``run-*.wandb``: a 7-byte header, then records of
    ``wandb_internal_pb2.Record`` in 32 KiB blocks, each chunk with a checksum, a length and a kind)."""
    import struct

    from wandb.proto import wandb_internal_pb2

    data = run_file.read_bytes()
    assert data[:4] == b":W&B", run_file
    rows, pos, record = [], 7, b""
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # no room for a chunk's header: the block is padded
            pos += 32768 - pos % 32768
            continue
        _checksum, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        record = chunk if kind in (1, 2) else record + chunk  # 1 whole, 2 first, 3 middle, 4 last
        if kind in (1, 4):
            parsed = wandb_internal_pb2.Record()
            parsed.ParseFromString(record)
            if parsed.WhichOneof("record_type") == "history":
                items = parsed.history.item
                rows.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in items})
    return rows


@pytest.mark.slow
def test_gamma_reaches_weights_and_biases_offline(tiny, tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")  # no account, no network: the run stays in WANDB_DIR
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    gf2("train", "grpo", "--config", str(GRPO_SMOKE), "--model-path", str(tiny), "--output_dir", str(out),
        "--report_to", "wandb", "--max_steps", "2")  # fmt: skip
    (run_file,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    rows = [r for r in wandb_history(run_file) if "train/gamma/g1" in r]
    csv = [
        (r["step"], r["gamma_mean"], r["gamma_hi"]) for r in read_gamma_csv(out / "gamma.csv") if r["g"] == 1
    ]
    assert [(r["train/global_step"], r["train/gamma/g1"], r["train/gamma/g1_hi"]) for r in rows] == csv
    assert any("train/loss" in r for r in wandb_history(run_file))


@pytest.mark.slow
def test_the_run_is_recorded_in_run_json(grpo_runs):
    record = json.loads((grpo_runs[2] / "run.json").read_text())
    assert record["status"] == "ok" and record["command"] == "train grpo" and record["version"] == __version__
    assert record["ended"] >= record["started"] and record["seeds"] == {"seed": 0, "eval_seed": 1_000_003}
    config = record["config"]
    assert config["processes"] == 2 and config["gamma"]["every"] == 2 and config["task"]["p"] == 6
    assert config["trainer"]["max_steps"] == 3 and config["trainer"]["report_to"] == ["tensorboard"]
    assert {"torch", "trl", "transformers", "gymnasium", "numpy"} <= set(record["packages"])
    assert record["host"] and "--report_to" in record["argv"]


@pytest.mark.slow
def test_sft_in_two_processes_matches_one_process_resumed(tiny, tmp_path):
    """SFT to step 6 in two processes, against one process stopped at step 3 and resumed to 6."""
    flags = ["--config", str(SFT_SMOKE), "--model-path", str(tiny), "--save_steps", "3"]
    one, two = tmp_path / "one", tmp_path / "two"
    gf2(
        "train",
        "sft",
        *flags,
        "--output_dir",
        str(one),
        "--max_steps",
        "3",
        "--per_device_train_batch_size",
        "4",
    )
    gf2("train", "sft", *flags, "--output_dir", str(one), "--per_device_train_batch_size", "4", "--resume")
    gf2("train", "sft", *flags, "--output_dir", str(two), "--per_device_train_batch_size", "2", processes=2)
    # the resumed run continues the step count and the γ log, no step twice
    assert [(r[0], r[1]) for r in gamma_table(one)] == [(s, g) for s in (0, 3, 6) for g in (0, 1)]
    assert [r for r in gamma_table(one) if r[0] == 0] == [r for r in gamma_table(two) if r[0] == 0]
    # the same weights at step 0; later the all-reduced gradients differ from one process's in the last
    # bits, and a sampled token may follow them: only step 0's replies are the same by construction
    at_start = [{k: v for k, v in replies(out).items() if k[0].endswith("@step0")} for out in (one, two)]
    assert len(at_start[0]) == 8 and at_start[0] == at_start[1]
    first, second = losses(one, 6), losses(two, 6)
    # every step logged once; the losses are not compared: the first part's learning-rate schedule was
    # built for max_steps 3, the resumed one's is restored from it (TRL's rule), so from step 3 they differ
    assert sorted(first) == list(range(1, 7)) and sorted(second) == list(range(1, 7))
    record = json.loads((one / "run.json").read_text())
    assert record["command"] == "train sft" and len(record["previous"]) == 1  # the first part, kept


@pytest.mark.slow
def test_lora_on_smollm2_trains_in_two_processes(smollm2, tmp_path):
    """GRPO and SFT with LoRA on a real pretrained model, two processes, at a smoke size."""
    small = ["--model-path", smollm2, "--model.lora", "{r: 4, lora_alpha: 8}", "--gamma.depths", "[0]",
             "--gamma.trials", "2", "--gamma.max_tokens", "8", "--gamma.every", "5"]  # fmt: skip
    grpo, sft = tmp_path / "grpo", tmp_path / "sft"
    gf2("train", "grpo", "--config", str(GRPO_SMOKE), *small, "--output_dir", str(grpo), "--max_steps", "1",
        "--per_device_train_batch_size", "2", "--max_completion_length", "8", processes=2)  # fmt: skip
    gf2("train", "sft", "--config", str(SFT_SMOKE), *small, "--output_dir", str(sft), "--max_steps", "2",
        "--per_device_train_batch_size", "2", "--sft.records", "4", processes=2)  # fmt: skip
    for out, last in ((grpo, 1), (sft, 2)):
        assert [(r[0], r[1]) for r in gamma_table(out)] == [(0, 0), (last, 0)]
        assert json.loads((out / "final" / "adapter_config.json").read_text())["r"] == 4
        assert json.loads((out / "run.json").read_text())["config"]["processes"] == 2


def test_the_command_line_is_trls_with_the_runs_sections(tmp_path):
    # from another folder than the repository's: the installed script finds its training loops
    run = subprocess.run([str(BIN / "gf2"), "train", "grpo", "--help"], capture_output=True, text=True,
                         cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    for flag in ("--learning_rate", "--num_generations", "--report_to", "--use_vllm", "--gamma.every",
                 "--task.p", "--model.lora", "--curriculum", "--resume", "--config"):  # fmt: skip
        assert flag in run.stdout, flag
    sft = subprocess.run([str(BIN / "gf2"), "train", "sft", "--help"], capture_output=True, text=True,
                         cwd=tmp_path)  # fmt: skip
    assert (
        "--max_length" in sft.stdout
        and "--sft.records" in sft.stdout
        and "--num_generations" not in sft.stdout
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ([], "--config is required"),
        (["--config", str(GRPO_SMOKE), "--gamma.every", "0"], "gamma.every=0 is less than the minimum 1"),
        (["--config", str(GRPO_SMOKE), "--task.sampling", "random"], "sampling"),
        (["--config", str(GRPO_SMOKE), "--seed", "1000003"], "held-out records would be the training ones"),
        (["--config", str(GRPO_SMOKE), "--learning_rat", "1e-5"], "--learning_rat"),
        (["--config", str(GRPO_SMOKE), "--resume", "--output_dir", "/nonexistent/run"], "no checkpoint-"),
    ],
)
def test_bad_runs_are_refused_with_the_fix(flags, message, capsys):
    from gf2env.cli import main

    try:
        code = main(["train", "grpo", *flags])
    except SystemExit as stop:  # argparse's own refusals
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2 and message in err, err[-2000:]
    assert "Traceback" not in err and "internal error" not in err


def test_an_unknown_trainer_key_names_the_closest_trl_option(tmp_path, capsys):
    from gf2env.cli import main

    config = tmp_path / "bad.yaml"
    config.write_text(GRPO_SMOKE.read_text().replace("learning_rate:", "learnin_rate:"))
    assert main(["train", "grpo", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "learnin_rate" in err and "learning_rate" in err and "internal error" not in err


def test_a_new_run_into_another_runs_folder_is_refused(tiny, tmp_path, capsys):
    """Its γ steps would be skipped and the other run's answers reused: --resume, or another folder."""
    from gf2env.cli import main

    (tmp_path / "gamma.csv").write_text("step\n")
    flags = ["--config", str(GRPO_SMOKE), "--model-path", str(tiny), "--output_dir", str(tmp_path)]
    assert main(["train", "grpo", *flags]) == 2
    err = capsys.readouterr().err
    assert "holds another run's gamma.csv; pass --resume" in err and "internal error" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gamma.csv"]  # nothing written, no run.json
