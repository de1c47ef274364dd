"""GRPO on GF2Recon with TRL, γ_g measured at every depth while it trains.

    python -m gf2env.train.grpo --config configs/train/grpo/smoke.yaml [--model-path DIR] [--output-dir DIR]
                         [--max-steps N] [--resume]
    gf2 train grpo --config ...            (the same)

Top to bottom: the policy (a local model folder, LoRA optional) → the prompt stream (depths from
the curriculum, prompt ``i`` a pure function of ``(seed, i)``) → rewards (the task's scorer: exact
next term, plus an optional format reward) → TRL's ``GRPOConfig`` (the config's ``trainer`` mapping;
on a machine without CUDA, CPU settings unless the config says otherwise) → callbacks (γ_g on the
held-out set every ``gamma.every`` steps; the curriculum's state saved with each checkpoint) →
``GRPOTrainer.train``. With ``tools: true`` the model may call ``run_python`` / ``submit`` of
:class:`gf2env.train.tool_env.GF2ToolEnvironment` (TRL's ``environment_factory``), the environment owns
the reward, and the tool calls per completion are logged (``rewards/tool_calls/mean``).

On GPU, set ``trainer: {use_vllm: true, vllm_mode: colocate}`` (or ``server`` with ``trl vllm-serve``)
for vLLM generation; several GPUs: ``accelerate launch -m gf2env.train.grpo --config ...``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gf2env.agents.models.catalog import resolve_model
from gf2env.errors import GF2ConfigError
from gf2env.train.config import TrainConfig, config_from_args, run_parser
from gf2env.train.gamma import GammaCallback
from gf2env.train.rewards import correct_term_reward, format_reward

CURRICULUM_FILE = "curriculum.json"


def cpu_defaults() -> dict[str, Any]:
    """GRPOConfig settings for a machine without CUDA (the config's ``trainer`` overrides them)."""
    import torch

    if torch.cuda.is_available():
        return {}
    return {"use_cpu": True, "bf16": False, "fp16": False, "activation_checkpointing": False}


def tool_calls(environments: Sequence[Any] | None = None, **_: Any) -> list[float]:
    """Tool calls each rollout made (weight 0: logged, not rewarded)."""
    return [float(env.tool_calls) for env in environments or ()]


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


class CurriculumCallback:
    """Saves the curriculum's state into each checkpoint, and logs the active depths (``curriculum.csv``)."""

    def __init__(self, curriculum: Any, out_dir: Path) -> None:
        from transformers import TrainerCallback

        self.curriculum, self.out_dir = curriculum, out_dir
        self._last: tuple[int, ...] | None = None
        self.callback = type("CurriculumState", (TrainerCallback,), {
            "on_save": lambda _s, args, state, control, **kw: self.save(state),
            "on_train_begin": lambda _s, args, state, control, **kw: self.advance(state.global_step),
            "on_step_end": lambda _s, args, state, control, **kw: self.advance(state.global_step),
        })()  # fmt: skip

    def save(self, state: Any) -> None:
        checkpoint = self.out_dir / f"checkpoint-{state.global_step}"
        checkpoint.mkdir(parents=True, exist_ok=True)
        (checkpoint / CURRICULUM_FILE).write_text(json.dumps(self.curriculum.state()))

    def advance(self, step: int) -> None:
        self.curriculum.advance(step)
        depths = tuple(self.curriculum.depths())
        if depths != self._last:
            new = not (self.out_dir / "curriculum.csv").exists()
            with open(self.out_dir / "curriculum.csv", "a") as fh:
                if new:
                    fh.write("step,kind,active_depths\n")
                fh.write(f"{step},{self.curriculum.kind},{' '.join(map(str, depths))}\n")
            self._last = depths


def build_trainer(config: TrainConfig, resume: bool = False) -> tuple[Any, Path | None]:
    """The GRPOTrainer of a run, and the checkpoint to resume from (``None``: a fresh start)."""
    from transformers.trainer_utils import get_last_checkpoint
    from trl import GRPOConfig, GRPOTrainer

    from gf2env.train.data import curriculum_dataset

    out = config.output_dir
    out.mkdir(parents=True, exist_ok=True)
    checkpoint = None
    if resume:
        last = get_last_checkpoint(str(out)) if out.exists() else None
        if last is None:
            raise GF2ConfigError(f"--resume: no checkpoint-* folder in {out}; set save_steps, train first.")
        checkpoint = Path(last)
        if (checkpoint / CURRICULUM_FILE).exists():
            config.curriculum.load_state(json.loads((checkpoint / CURRICULUM_FILE).read_text()))

    # 1. the policy
    model, tokenizer, peft_config = load_policy(config)

    # 2. prompts from the environment, depths from the curriculum
    dataset = curriculum_dataset(config.task, config.curriculum, config.seed, tools=config.tools)

    # 3. rewards: the task's scorer (tool mode: the environment's submit, plus the logged tool calls)
    if config.tools:
        reward_funcs: list[Any] = [format_reward, tool_calls]
        weights = [config.rewards.format, 0.0]
    else:
        reward_funcs = [correct_term_reward, format_reward]  # TRL types them as returning list[float | None]
        weights = [config.rewards.correct, config.rewards.format]

    # 4. TRL's settings: ours first, the config's trainer mapping over them
    settings = {"output_dir": str(out), "seed": config.seed, "shuffle_dataset": False,
                "reward_weights": weights, "report_to": "none", "logging_steps": 1,
                **cpu_defaults(), **config.trainer}  # fmt: skip
    try:
        args = GRPOConfig(**settings)
    except TypeError as err:
        raise GF2ConfigError(f"trainer: {err}; the keys are those of TRL GRPOConfig.") from None

    # 5. callbacks: γ_g on the held-out set, the curriculum's state
    gamma = GammaCallback(config.gamma, config.task, out, tokenizer, config.curriculum)
    curriculum = CurriculumCallback(config.curriculum, out)

    environment_factory = None
    if config.tools:
        from gf2env.agents.sandbox import Sandbox
        from gf2env.train.tool_env import GF2ToolEnvironment

        # refuses to start where bubblewrap cannot run; one warm worker per rollout in flight (each
        # rollout's workspace holds one), so that no worker is restarted between batches
        sandbox = Sandbox(workers=max(os.cpu_count() or 1, args.generation_batch_size or 1))

        def environment_factory() -> GF2ToolEnvironment:
            return GF2ToolEnvironment(sandbox=sandbox, prompt_id=config.task.prompt_id)

    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[curriculum.callback, gamma],  # the curriculum's clock first: γ rows show the new depths
        environment_factory=environment_factory,
    )
    return trainer, checkpoint


def main(argv: Sequence[str] | None = None) -> int:
    parser = run_parser("gf2 train grpo", __doc__.splitlines()[0], "configs/train/grpo/smoke.yaml")
    parser.add_argument("--resume", action="store_true", help="continue from output_dir/checkpoint-*")
    args = parser.parse_args(argv)
    config = config_from_args(args)
    trainer, checkpoint = build_trainer(config, resume=args.resume)
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    trainer.save_model(str(config.output_dir / "final"))
    print(f"wrote {config.output_dir / 'gamma.csv'} and the γ_g plots in {config.output_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
