"""A tiny, randomly initialised Qwen3 causal LM with a per-character tokenizer, built offline.

No model hub is reachable here, so tests that need a real model (a vLLM or ``transformers serve``
server, the local transformers backend) build this one (about 1.3 MB) into a temporary folder:

    python -m gf2env.train.tiny_lm OUTDIR

The tokenizer is a ``tokenizers`` WordLevel model over ``string.printable`` plus ChatML special
tokens, split into single characters, wrapped in :class:`transformers.PreTrainedTokenizerFast` with
a ChatML chat template. The model is ``qwen3`` (not ``qwen2``: transformers 5 swaps a byte-level
tokenizer in for qwen2) with head_dim 32 (vLLM's CPU backend rejects 16). ``do_sample=True`` is
saved in the generation config, or servers that read it ignore the request's temperature. Only
torch, tokenizers and transformers are needed; nothing of gf2env.
"""

from __future__ import annotations

import argparse
import string
from pathlib import Path

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>")
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
MAX_POSITIONS = 32768


def build_tokenizer():  # -> transformers.PreTrainedTokenizerFast
    """The per-character ChatML tokenizer: special tokens first, then ``string.printable``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in string.printable:
        vocab.setdefault(ch, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token="<unk>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        additional_special_tokens=["<|im_start|>"],
        model_max_length=MAX_POSITIONS,
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def build_tiny_model(path: str | Path, seed: int = 0) -> Path:
    """Build the tiny model and tokenizer, save both (and the generation config) to ``path``.

    The weights depend only on ``seed`` (torch's CPU generator is seeded and then restored).
    Returns ``path`` as a :class:`Path`.
    """
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer()
    eos_id = tok.convert_tokens_to_ids("<|im_end|>")
    pad_id = tok.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        dtype="float32",
    )
    rng_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config).float().eval()
    finally:
        torch.random.set_rng_state(rng_state)
    model.generation_config = GenerationConfig(
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python -m gf2env.train.tiny_lm OUTDIR [--seed N]``."""
    parser = argparse.ArgumentParser(
        prog="python -m gf2env.train.tiny_lm", description=__doc__.splitlines()[0]
    )
    parser.add_argument("outdir", type=Path, help="folder to save the model and tokenizer into")
    parser.add_argument("--seed", type=int, default=0, help="weight-initialisation seed (default 0)")
    args = parser.parse_args(argv)
    out = build_tiny_model(args.outdir, seed=args.seed)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
