"""Supervised warm start on teacher completions from estimator A, γ_g measured as it trains.

    gf2 train sft --config configs/train/sft/smoke.yaml [--any_SFTConfig_field VALUE ...] [--model-path DIR]
                  [--sft.records N ...] [--resume]
    torchrun --nproc_per_node 2 $(which gf2) train sft --config ...      (several processes)

The teacher is estimator A (prefix and data): for each training record it undoes the known terms on
every sample, keeps the candidates that explain every residual label, and answers the argmax (a
uniformly chosen one among ties). Its completion is a one-line trace (how many residual labels are
1: the samples whose payload contains the next term) and the boxed answer; with
``sft.tools`` it is instead a fenced Python solver (:data:`gf2env.train.tool_solvers.DILIGENT_SOLVER`),
what a tool-mode reply should look like. Records are prompt ``i`` of the run's seed, as in GRPO;
the γ_g evaluation uses the held-out ``gamma.eval_seed``. The rest is TRL's ``SFTTrainer`` on
prompt–completion pairs (loss on the completion only), the config's ``trainer`` mapping being
``SFTConfig`` options (each one also a flag), with γ_g in the trainer's logs and ``run.json`` beside
the results. ``--resume`` continues from the last checkpoint, the γ log too (no step twice).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gf2env.agents.estimators import Diligent
from gf2env.errors import GF2ConfigError
from gf2env.records.record import Record
from gf2env.records.rows import prompt_row
from gf2env.task.combinatorics import unrank_support
from gf2env.task.posterior import StepBatch
from gf2env.text.answers import boxed_answer
from gf2env.train.config import TrainConfig, parse_run, trainer_settings
from gf2env.train.data import TaskSpec
from gf2env.train.gamma import GammaCallback
from gf2env.train.tool_solvers import DILIGENT_SOLVER
from gf2env.train.trl_run import last_checkpoint, load_policy, run_trainer


def residual_positives(record: Record) -> int:
    """Samples whose label is 1 once the known terms are XORed out (they all contain the next term)."""
    mask = np.zeros(record.K, dtype=np.uint8)
    for j, term in enumerate(record.prefix):
        mask ^= record.address[:, j] & record.payload[:, list(term)].all(axis=1).astype(np.uint8)
    return int((record.labels ^ mask).sum())


def teacher_completion(record: Record, answer: Sequence[int], offset: int, tools: bool) -> str:
    """The teacher's reply for ``record`` whose answer (payload indices) is ``answer``."""
    boxed = boxed_answer(answer, offset)
    if tools:
        return f"```python\n{DILIGENT_SOLVER}```"
    positives = residual_positives(record)
    return f"<think>{positives} of {record.K} residuals are 1.</think>\n{boxed}"


def teacher_rows(
    task: TaskSpec, depths: Sequence[int], records: int, seed: int, tools: bool
) -> list[dict[str, Any]]:
    """``records`` prompt–completion rows a depth, answered by estimator A."""
    rows = []
    rng = np.random.default_rng([seed, 7])
    for g in depths:
        batch_records = [task.record(g, i, seed) for i in range(records)]
        estimate = Diligent().evaluate(StepBatch.from_records(batch_records), rng)
        for rec, action in zip(batch_records, estimate.action, strict=True):
            row = prompt_row(rec, task.prompt_id)
            answer = unrank_support(int(action), rec.p, rec.d - 1)
            text = teacher_completion(rec, answer, row["answer_offset"], tools)
            rows.append({"prompt": row["prompt"], "completion": [{"role": "assistant", "content": text}],
                         "g": g, "teacher_correct": sorted(answer) == sorted(rec.target)})  # fmt: skip
    return rows


def build_trainer(config: TrainConfig, args: Any = None, resume: bool = False) -> Any:
    """The SFTTrainer of a run (``args``: its ``SFTConfig``; default: from ``config``; ``resume``: it
    continues the run in ``output_dir``)."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    model, tokenizer, peft_config = load_policy(config)
    rows = teacher_rows(config.task, config.sft.depths, config.sft.records, config.seed, config.sft.tools)
    dataset = Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]} for r in rows])
    if args is None:
        try:
            args = SFTConfig(**trainer_settings(config))
        except TypeError as err:
            raise GF2ConfigError(f"trainer: {err}; the keys are those of TRL SFTConfig.") from None
    gamma = GammaCallback(config.gamma, config.task, config.output_dir, tokenizer, resume=resume)
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                         peft_config=peft_config, callbacks=[gamma])  # fmt: skip
    gamma.attach(trainer)
    return trainer


def main(argv: Sequence[str] | None = None) -> int:
    from trl import SFTConfig

    config, args, resume = parse_run(argv, "sft", SFTConfig, __doc__.splitlines()[0])
    checkpoint = last_checkpoint(config.output_dir) if resume else None
    run_trainer("sft", config, build_trainer(config, args, resume), checkpoint)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
