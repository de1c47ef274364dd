"""GGUF to a Hugging Face folder that ``from_pretrained``, vLLM and TRL load like any other.

transformers reads a GGUF file (it dequantises the weights as it loads them) but will not
``save_pretrained`` the result. The weights of the loaded model are plain tensors, though, so the
folder is written piece by piece: the config without its GGUF ``quantization_config`` and with
the model's class in ``architectures`` (vLLM chooses its model by it: without one, Gemma 3 would
load as an embedding model), the generation config, the tokenizer (with its chat template, or the
catalog's where the GGUF file has none) and the weights as one bfloat16 safetensors file. Tied
weights are stored once, under the first name the model gives them (the input embedding, not
``lm_head``): vLLM loads a tied model from its embedding and ignores ``lm_head``.
Needs the ``models`` extra (gguf, transformers, torch).
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from gf2env.agents.models.catalog import ModelError


def convert_gguf(gguf: Path, out: Path, chat_template: str = "") -> dict[str, str]:
    """Write ``gguf`` as a bfloat16 Hugging Face folder at ``out``; returns the versions used.

    ``chat_template`` is given to a tokenizer that has none (a base model's GGUF file)."""
    try:
        import torch
        from safetensors.torch import save_file
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as err:
        raise ModelError(
            f"Converting a GGUF model needs the models extra: pip install -e '.[models]' ({err})."
        ) from None
    try:
        importlib.metadata.version("gguf")
    except importlib.metadata.PackageNotFoundError:
        raise ModelError(
            "transformers reads GGUF files with the gguf package: pip install -e '.[models]'."
        ) from None
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # its note on packed GGUF kernels is about inference, not this copy
    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    if chat_template and not tokenizer.chat_template:
        tokenizer.chat_template = chat_template
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16)
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = torch.bfloat16
    config.architectures = [type(model).__name__]
    out.mkdir(parents=True)
    config.save_pretrained(out)
    model.generation_config.save_pretrained(out)
    tokenizer.save_pretrained(out)
    tensors, seen = {}, set()
    for key, tensor in model.state_dict().items():
        storage = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        if storage not in seen:  # a tied weight: keep its first name only
            seen.add(storage)
            tensors[key] = tensor.contiguous()
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    return {p: importlib.metadata.version(p) for p in ("transformers", "torch", "gguf", "safetensors")}


__all__ = ["convert_gguf"]
