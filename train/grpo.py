"""GRPO on GF2Recon with TRL, γ_g measured at every depth while it trains.

    gf2 train grpo --config configs/train/grpo/smoke.yaml [--any_GRPOConfig_field VALUE ...]
                   [--model-path DIR] [--gamma.every N ...] [--resume]
    torchrun --nproc_per_node 2 $(which gf2) train grpo --config ...     (several processes)
    accelerate launch -m gf2env.train.grpo --config ...                    (the same)

Top to bottom: the policy (a local model folder, LoRA optional) → the prompt stream (depths from
the curriculum, prompt ``i`` a pure function of ``(seed, i)``) → rewards (the task's scorer: exact
next term, plus an optional format reward) → TRL's ``GRPOConfig`` (the config's ``trainer`` mapping;
on a machine without CUDA, CPU settings unless the config says otherwise; every ``GRPOConfig`` field
is also a flag, as with ``trl grpo``) → callbacks (γ_g on the held-out set every ``gamma.every``
steps, logged through the trainer: ``--report_to tensorboard`` puts ``gamma/g{g}`` beside the loss
and reward; the curriculum's state saved with each checkpoint) → ``GRPOTrainer.train``, with
``run.json`` beside the results. With ``tools: true`` the model may call ``run_python`` / ``submit`` of
:class:`gf2env.train.tool_env.GF2ToolEnvironment` (TRL's ``environment_factory``), the environment owns
the reward, and the tool calls per completion are logged (``rewards/tool_calls/mean``).

On GPU, set ``trainer: {use_vllm: true, vllm_mode: colocate}`` (or ``server`` with ``trl vllm-serve``)
for vLLM generation (the γ evaluation then uses the colocated engine too, see :mod:`gf2env.train.gamma`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gf2env.errors import GF2ConfigError
from gf2env.train.config import TrainConfig, parse_run, trainer_settings
from gf2env.train.distributed import is_main_process
from gf2env.train.gamma import GammaCallback
from gf2env.train.rewards import correct_term_reward, format_reward
from gf2env.train.trl_run import last_checkpoint, load_policy, run_trainer

CURRICULUM_FILE = "curriculum.json"


def tool_calls(environments: Sequence[Any] | None = None, **_: Any) -> list[float]:
    """Tool calls each rollout made (weight 0: logged, not rewarded)."""
    return [float(env.tool_calls) for env in environments or ()]


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
        if not is_main_process():  # the main process writes the checkpoints
            return
        checkpoint = self.out_dir / f"checkpoint-{state.global_step}"
        checkpoint.mkdir(parents=True, exist_ok=True)
        (checkpoint / CURRICULUM_FILE).write_text(json.dumps(self.curriculum.state()))

    def advance(self, step: int) -> None:
        self.curriculum.advance(step)
        depths = tuple(self.curriculum.depths())
        if depths != self._last and is_main_process():
            new = not (self.out_dir / "curriculum.csv").exists()
            with open(self.out_dir / "curriculum.csv", "a") as fh:
                if new:
                    fh.write("step,kind,active_depths\n")
                fh.write(f"{step},{self.curriculum.kind},{' '.join(map(str, depths))}\n")
            self._last = depths


def build_trainer(config: TrainConfig, args: Any = None, resume: bool = False) -> tuple[Any, Path | None]:
    """The GRPOTrainer of a run, and the checkpoint to resume from (``None``: a fresh start).
    ``args``: its ``GRPOConfig`` (default: :func:`gf2env.train.config.trainer_settings` of ``config``)."""
    from trl import GRPOConfig, GRPOTrainer

    from gf2env.train.data import curriculum_dataset

    out = config.output_dir
    checkpoint = last_checkpoint(out) if resume else None
    if checkpoint is not None and (checkpoint / CURRICULUM_FILE).exists():
        config.curriculum.load_state(json.loads((checkpoint / CURRICULUM_FILE).read_text()))

    # 1. the policy
    model, tokenizer, peft_config = load_policy(config)

    # 2. prompts from the environment, depths from the curriculum
    dataset = curriculum_dataset(config.task, config.curriculum, config.seed, tools=config.tools)

    # 3. rewards: the task's scorer (tool mode: the environment's submit, plus the logged tool calls)
    if config.tools:
        reward_funcs: list[Any] = [format_reward, tool_calls]
    else:
        reward_funcs = [correct_term_reward, format_reward]  # TRL types them as returning list[float | None]

    # 4. TRL's settings: ours first, the config's trainer mapping (and the command line's flags) over them
    if args is None:
        try:
            args = GRPOConfig(**trainer_settings(config, **grpo_settings(config)))
        except TypeError as err:
            raise GF2ConfigError(f"trainer: {err}; the keys are those of TRL GRPOConfig.") from None

    # 5. callbacks: γ_g on the held-out set, the curriculum's state
    gamma = GammaCallback(config.gamma, config.task, out, tokenizer, config.curriculum, resume=resume)
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
    gamma.attach(trainer)
    return trainer, checkpoint


def grpo_settings(config: TrainConfig) -> dict[str, Any]:
    """GRPOConfig values a run sets (the config's ``trainer`` mapping and the flags go over them): the
    prompt stream's order kept, and the rewards' weights (tool mode: the tool calls are logged only)."""
    rewards = config.rewards
    weights = [rewards.format, 0.0] if config.tools else [rewards.correct, rewards.format]
    return {"shuffle_dataset": False, "reward_weights": weights}


def main(argv: Sequence[str] | None = None) -> int:
    from trl import GRPOConfig

    config, args, resume = parse_run(argv, "grpo", GRPOConfig, __doc__.splitlines()[0], grpo_settings)
    trainer, checkpoint = build_trainer(config, args, resume=resume)
    run_trainer("grpo", config, trainer, checkpoint)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
