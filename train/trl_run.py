"""What the two TRL loops (:mod:`gf2env.train.grpo`, :mod:`gf2env.train.sft`) share around their trainer:
the policy from a local folder, the checkpoint a ``--resume`` continues from, and the run itself
(its ``run.json``, training, the final model) with the main process alone writing files.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from gf2env.agents.models.catalog import resolve_model
from gf2env.errors import GF2ConfigError
from gf2env.train.config import TrainConfig
from gf2env.train.distributed import is_main_process, num_processes


def load_policy(config: TrainConfig) -> tuple[Any, Any, Any]:
    """(model, tokenizer, peft config or None) from the config's model folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(resolve_model(config.model.path))
    if not path.is_dir():
        raise GF2ConfigError(
            f"model.path={config.model.path} is not a folder; give a local model folder or a name from "
            "`gf2 models list` (no model hub is used)."
        )
    if not (path / "config.json").is_file():
        raise GF2ConfigError(
            f"model.path={config.model.path} holds no config.json, so it is no Hugging Face model folder; "
            "give the folder a model was saved to (e.g. by python -m gf2env.train.tiny_lm) or a name from "
            "`gf2 models list`."
        )
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, config.model.dtype))
    peft_config = None
    if config.model.lora is not None:
        from peft import LoraConfig

        peft_config = LoraConfig(task_type="CAUSAL_LM", **config.model.lora)
    return model, tokenizer, peft_config


def last_checkpoint(out: Path) -> Path:
    """The ``checkpoint-*`` folder a ``--resume`` continues from (else GF2ConfigError with the fix)."""
    from transformers.trainer_utils import get_last_checkpoint

    last = get_last_checkpoint(str(out)) if out.is_dir() else None
    if last is None:
        raise GF2ConfigError(
            f"--resume: no checkpoint-* folder in {out}; set save_steps (--save_steps N) and train first, "
            "or leave out --resume."
        )
    return Path(last)


def run_trainer(loop: str, config: TrainConfig, trainer: Any, checkpoint: Path | None) -> None:
    """Train (from ``checkpoint`` if given) and save the final model in ``output_dir/final``, recording
    the run in ``output_dir/run.json`` (the run's config and the TRL config it resolved to); every
    process trains, the main process alone writes the record and the model."""
    from contextlib import nullcontext

    from gf2env.run_record import run_record

    resolved = {**dataclasses.asdict(config), "trainer": trainer.args.to_dict(), "processes": num_processes()}
    seeds = {"seed": config.seed, "eval_seed": config.gamma.eval_seed}
    main = is_main_process()
    with run_record(config.output_dir, f"train {loop}", resolved, seeds) if main else nullcontext():
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        final = config.output_dir / "final"
        trainer.save_model(str(final))  # the main process writes (Trainer.save_model's own rule)
        if main:
            trainer.processing_class.save_pretrained(str(final))
            print(f"wrote {final}, {config.output_dir / 'gamma.csv'} and {config.output_dir / 'run.json'}")


__all__ = ["last_checkpoint", "load_policy", "run_trainer"]
