"""Careless input to the task layer: wrong numbers and untyped crashes become typed errors."""

import json
import subprocess
import sys
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import pytest

import gf2env  # noqa: F401  (registers the envs)
from gf2env.config.yaml_files import (
    MAX_CONFIG_BYTES,
    check_scalar_types,
    dataclass_from_mapping,
    read_yaml_mapping,
)
from gf2env.envs.vector import GF2ReconVectorEnv
from gf2env.errors import GF2ConfigError, ResetNeededError
from gf2env.records.record import generate_record
from gf2env.task.oracle import TaskConfig
from tests.paths import REPO


def run_cli(*args):
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "gf2env", *args], capture_output=True, text=True, timeout=120, env=env
    )


@pytest.mark.parametrize("flag, key", [("--p", "p"), ("--d", "d"), ("--K", "K")])
def test_generate_zero_sizes_are_refused_not_replaced_by_defaults(tmp_path, flag, key):
    out = tmp_path / "zero.json"
    proc = run_cli("generate", "--trials", "1", flag, "0", "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("gf2: error: ") and f"{key}=0" in proc.stderr
    assert not out.exists()


def test_generate_given_sizes_are_written(tmp_path):
    out = tmp_path / "small.json"
    proc = run_cli("generate", "--trials", "1", "--p", "6", "--d", "2", "--K", "3", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    [obj] = json.loads(out.read_text())
    assert (obj["p"], obj["d_max"], len(obj["samples"])) == (6, 2, 3)


def test_generate_negative_seed_is_a_config_error(tmp_path):
    proc = run_cli("generate", "--trials", "1", "--seed", "-1", "--out", str(tmp_path / "neg.json"))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("gf2: error: --seed=-1"), proc.stderr
    with pytest.raises(GF2ConfigError, match="seed=-1"):
        generate_record(TaskConfig(n=4), 0, 0, -1)


def test_env_reset_negative_seed_raises_gymnasium_error():
    env = gym.make("GF2Recon-v1", n=4)
    with pytest.raises(gym.error.Error, match="-1"):
        env.reset(seed=-1)


def test_vector_step_before_reset_raises():
    env = GF2ReconVectorEnv(2, n=4)
    with pytest.raises(ResetNeededError, match=r"reset\(\)"):
        env.step(np.zeros(2, dtype=np.int64))
    env.reset(seed=0)
    env.step(np.zeros(2, dtype=np.int64))  # fine once reset


@pytest.mark.parametrize("env_id, action", [("GF2Recon-v1", 0), ("GF2ReconText-v1", "{0, 1, 2}")])
def test_single_and_text_env_step_before_reset_raise(env_id, action):
    env = gym.make(env_id, n=4).unwrapped  # past Gymnasium's order-enforcing wrapper
    with pytest.raises(ResetNeededError, match=r"reset\(\)"):
        env.step(action)
    assert isinstance(ResetNeededError("x"), gym.error.ResetNeeded)


@pytest.mark.parametrize("key", ["p", "d", "n", "K", "w"])
def test_numpy_integer_sizes_work_through_gym_make(key):
    sizes = {"p": 12, "d": 4, "n": 6, "K": 32, "w": 5}
    sizes[key] = np.int64(sizes[key])
    env = gym.make("GF2Recon-v1", **sizes)
    obs, _ = env.reset(seed=0)
    assert obs["labels"].shape == (32,) and obs["prefix"].shape == (6, 12)
    env.step(0)
    assert type(env.unwrapped.config.__dict__[key]) is int


def test_bayes_ceiling_too_many_candidates_refused_at_construction():
    with pytest.raises(GF2ConfigError, match=r"bayes_ceiling.*2035800.*2000000"):
        gym.make("GF2Recon-v1", p=30, d=8, n=8, bayes_ceiling=True)
    with pytest.raises(GF2ConfigError, match="bayes_ceiling"):
        GF2ReconVectorEnv(2, p=30, d=8, n=8, bayes_ceiling=True)
    gym.make("GF2Recon-v1", p=30, d=8, n=8)  # without the ceiling the size is fine


@dataclass(frozen=True)
class _Flags:  # annotations evaluated here (no `from __future__ import annotations`): real types
    plots: bool = True
    fit: bool | None = None
    name: str = ""


@pytest.mark.parametrize("key, value", [("plots", "no"), ("fit", "false"), ("fit", 0)])
def test_a_boolean_field_is_known_by_its_type_however_annotated(key, value):
    with pytest.raises(GF2ConfigError, match=f"{key}={value!r} is not a boolean; write {key}: true"):
        dataclass_from_mapping(_Flags, {key: value}, "f.yaml")
    with pytest.raises(GF2ConfigError, match=f"{key}={value!r} is not a boolean"):
        check_scalar_types({key: value}, _Flags, "f.yaml")
    assert dataclass_from_mapping(_Flags, {"plots": False, "fit": None}, "f.yaml") == _Flags(False, None)
    with pytest.raises(GF2ConfigError, match="plots=None is not a boolean"):  # not optional
        check_scalar_types({"plots": None}, _Flags, "f.yaml")


@pytest.mark.parametrize(
    "text, message",
    [
        ("trials: 3\ntrials: 5\n", "the key 'trials' is given twice"),
        ("grid:\n  p: [6]\n  p: [8]\n", "the key 'p' is given twice"),
        ("a: &x [1, 2]\nb: *x\n", "found the alias \\*x; aliases are not allowed"),
        ("description: " + "[" * 100_000, "not valid YAML"),
    ],
)
def test_config_yaml_refuses_duplicate_keys_aliases_and_deep_nesting(tmp_path, text, message):
    """A key given twice was the last one silently; an alias bomb took gigabytes."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(GF2ConfigError, match=message):
        read_yaml_mapping(path, "comparison")


def test_config_yaml_that_is_no_text_file_is_refused_at_once(tmp_path):
    import os
    import time

    (tmp_path / "latin1.yaml").write_bytes("description: caf\xe9\n".encode("latin-1"))
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "big.yaml").write_bytes(b"# " + b"x" * (MAX_CONFIG_BYTES + 1))
    cases = {
        "latin1.yaml": "is not UTF-8 text",
        "fifo.yaml": "is not a regular file",
        "big.yaml": "over 1048576",
        "dir": "is not a regular file",
    }
    (tmp_path / "dir").mkdir()
    for name, message in cases.items():
        started = time.monotonic()
        with pytest.raises(GF2ConfigError, match=message):
            read_yaml_mapping(tmp_path / name, "comparison")
        assert time.monotonic() - started < 1.0, name
    with pytest.raises(GF2ConfigError, match="is not a regular file"):
        read_yaml_mapping("/dev/zero", "comparison")


def test_compare_config_with_a_duplicate_key_is_one_line_exit_2(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("grid:\n  trials: 3\n  trials: 5\n")
    done = run_cli("compare", "--config", str(path), "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "the key 'trials' is given twice" in done.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["generate", "--depths", "0,0"], "repeats [0]; give each value once"),
        (["generate", "--depths", ""], "holds no value"),
        (["compare", "--agents", "A", "--depths", "0,0", "--trials", "2", "--p", "6"], "repeats [0]"),
        (["compare", "--agents", "A", "--depths", "0", "--p", "6,6"], "repeats [6]"),
    ],
)
def test_a_value_given_twice_is_refused_not_counted_twice(tmp_path, args, message):
    """``--depths 0,0`` counted each record twice (trials=4 for 2) and wrote every record twice."""
    done = run_cli(*args, "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert message in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


def test_a_grid_naming_a_setting_twice_is_refused(tmp_path):
    from gf2env.agents.harness.compare import load_config

    path = tmp_path / "c.yaml"
    for grid, message in (
        ("  p: [6, 6]\n  depths: [0]\n", "p=\\[6, 6\\] names 6 twice"),
        ("  depths: [0, 1, 0]\n", "depths=\\[0, 1, 0\\] names 0 twice"),
        ("  depths: [0]\n  sampling: [adversarial, adversarial]\n", "names 'adversarial' twice"),
    ):
        path.write_text("agents: [A]\ngrid:\n  trials: 2\n" + grid)
        with pytest.raises(GF2ConfigError, match=message):
            load_config(path)


def test_a_closed_env_raises_on_use():
    """The vector env kept stepping after close(); the single and text envs too."""
    from gymnasium.error import ClosedEnvironmentError

    for env in (GF2ReconVectorEnv(2), gym.make("GF2Recon-v1"), gym.make("GF2ReconText-v1")):
        env.reset(seed=1)
        env.close()
        with pytest.raises(ClosedEnvironmentError):
            env.step(env.action_space.sample())
        with pytest.raises(ClosedEnvironmentError):
            env.reset(seed=1)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: gym.make("GF2Recon-v1").reset(options=[1]), "options=\\[1\\] is not a mapping"),
        (lambda: GF2ReconVectorEnv(2).reset(seed=1.5), "seed=1.5 is neither an int"),
        (lambda: GF2ReconVectorEnv(2).reset(seed=[1, "x"]), "seed\\[1\\]='x' is not an integer"),
        (lambda: GF2ReconVectorEnv(2).reset(seed=-1), "seed=-1 is not an integer >= 0"),
        (lambda: gym.make("GF2Recon-v1", n=10**9), "n=1000000000 is more than the maximum"),
        (lambda: gym.make("GF2Recon-v1", K=10**9), "K=1000000000 is more than the maximum"),
    ],
)
def test_env_arguments_are_typed_errors(call, message):
    """Each was a TypeError, an AttributeError or a 30 GiB MemoryError."""
    with pytest.raises(GF2ConfigError, match=message):
        call()


def test_generate_with_a_huge_sample_count_is_one_line_exit_2(tmp_path):
    done = run_cli("generate", "--K", "100000000", "--out", str(tmp_path / "r.jsonl"))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "K=100000000 is more than the maximum" in done.stderr


@pytest.mark.parametrize(
    "out, said",
    [
        ("/dev/full", "--out /dev/full: No space left on device; nothing usable was written."),
        ("{tmp}/missing/r.json", "No such file or directory: {tmp}/missing/r.json"),
        (".", "Is a directory: ."),
    ],
)
def test_generate_into_an_output_it_cannot_write_is_one_line_naming_it(tmp_path, out, said):
    # Each was a traceback; /dev/full's error comes from the final flush, where no path is attached.
    done = run_cli("generate", "--depths", "0", "--trials", "2", "--quiet", "--out", out.format(tmp=tmp_path))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == f"gf2: error: {said.format(tmp=tmp_path)}\n"


def test_a_records_path_that_is_no_regular_file_is_refused_at_once(tmp_path):
    """``--records /dev/zero`` read until MemoryError and a FIFO hung forever."""
    import os
    import time

    os.mkfifo(tmp_path / "records.jsonl")
    for path in ("/dev/zero", "/dev/urandom", str(tmp_path / "records.jsonl")):
        started = time.monotonic()
        done = run_cli("compare", "--agents", "A", "--records", path, "--out", str(tmp_path / "out"))
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert "is not a regular file (nor a dataset folder)" in done.stderr, done.stderr
        assert time.monotonic() - started < 60


def test_a_records_file_over_the_cap_is_refused(tmp_path, monkeypatch):
    from gf2env.records import files as record_files

    path = tmp_path / "r.jsonl"
    path.write_text("{}\n" * 100)
    monkeypatch.setattr(record_files, "MAX_RECORDS_BYTES", 100)
    with pytest.raises(GF2ConfigError, match="holds 300 bytes, more than the 100"):
        record_files.read_records(path)


@pytest.mark.parametrize("name, text", [("a.json", "[" * 100_000), ("b.jsonl", '{"x": ' + "[" * 100_000)])
def test_json_nested_100000_deep_is_a_format_error(tmp_path, name, text):
    """A RecursionError traceback before."""
    from gf2env.errors import RecordFormatError
    from gf2env.records.files import read_records

    (tmp_path / name).write_text(text)
    with pytest.raises(RecordFormatError, match="nested too deeply to be a record"):
        read_records(tmp_path / name)
