"""γ_g while training: every N steps, the current policy on a fixed held-out set at each depth.

The held-out set is the evaluation harness's own grid (:class:`gf2env.agents.harness.grid.Grid`) with its own
seed (``eval_seed``, recorded in every row; training prompts use the run's ``seed``, a different
key of the record generator, so the held-out records are not the training ones). The policy is
asked through :class:`gf2env.agents.llm.agent.LLMAgent`, so prompts, scoring and Jeffreys intervals are
the ones ``gf2 eval`` uses, on the trainer's own generation backend: the model being trained
(``generate``, under TRL's ``unwrap_model_for_generation``, which gathers ZeRO-3 weights), or TRL's
colocated vLLM engine when the trainer generates with it (``use_vllm: true, vllm_mode: colocate``,
tensor parallel size 1, no sleep mode; otherwise ``generate``, and the run says so once).

Several processes (``torchrun``, ``accelerate launch``): every process takes part in each evaluation,
its batches shared out by :class:`gf2env.train.distributed.ShardedBackend`, so the numbers are those of
one process; the main process alone writes ``gamma.csv`` and ``gamma_queries.jsonl`` (one model name
a step) and holds that log from its construction to the end of training
(:meth:`gf2env.agents.llm.query_log.QueryLog.locked`, the lock of ``gf2 eval``): a second run on the same
output folder is refused before it trains, never appending to the same log.

Every evaluation goes through the trainer's own logs (``Trainer.log``: the console, ``report_to``'s
TensorBoard / W&B / trackio, ``trainer_state.json``'s ``log_history``) as
:func:`gf2env.train.gamma_log.gamma_scalars` (``gamma/g{g}`` and its interval), and into ``gamma.csv``
(:class:`gf2env.train.gamma_log.GammaLog`): step, the curriculum's active depths, and the summary columns
of :func:`gf2env.report.results.summarize` per depth. At the end, ``gamma_vs_step.png`` (γ_g against
step, a line a depth) and ``gamma_vs_depth.png`` (γ_g against g at the first and last evaluation).
"""

from __future__ import annotations

import os
from contextlib import ExitStack, nullcontext
from pathlib import Path
from typing import Any

from transformers import Trainer, TrainerCallback

from gf2env.agents.harness.evaluate import evaluate
from gf2env.agents.harness.grid import grid_cells
from gf2env.agents.llm.agent import LLMAgent, LLMSpec
from gf2env.agents.llm.queries import Backend, SamplingParams
from gf2env.agents.llm.query_log import QueryLog
from gf2env.agents.llm.transformers_backend import TransformersBackend
from gf2env.report.results import summarize
from gf2env.train.curriculum import Curriculum
from gf2env.train.data import TaskSpec
from gf2env.train.distributed import ShardedBackend, broadcast, is_main_process
from gf2env.train.gamma_log import GammaEvalSpec, GammaLog, gamma_line, gamma_scalars


class GammaCallback(TrainerCallback):
    """Evaluate γ_g every ``spec.every`` steps (and at the start and the end); see the module docs.

    The trainers of :mod:`gf2env.train` :meth:`attach` it; with a trainer of your own, call
    ``callback.attach(trainer)`` too (without it, the policy is the callback's ``model`` argument, one
    process only, and γ goes to ``gamma.csv`` and the console, not to the trainer's logs).

    Args:
        spec: the evaluation; task: the task of the prompts; out_dir: where the CSV, log and plots go.
        tokenizer: the policy's tokenizer; curriculum: told each evaluation (adaptive ones move on it).
        name: the policy's name in the query log.
        resume: the run continues one in ``out_dir`` (else a folder holding a ``gamma.csv`` is refused).
    """

    def __init__(
        self,
        spec: GammaEvalSpec,
        task: TaskSpec,
        out_dir: str | Path,
        tokenizer: Any,
        curriculum: Curriculum | None = None,
        name: str = "policy",
        resume: bool = False,
    ) -> None:
        self.spec, self.task, self.tokenizer = spec, task, tokenizer
        self.curriculum, self.name = curriculum, name
        self.trainer: Any = None
        self.main = is_main_process()
        self._held = ExitStack()  # one run at a time on the log: released by close() or at exit
        self.gamma_log: GammaLog | None = None
        if self.main:
            self.gamma_log = GammaLog(out_dir, resume=resume)
            self.log = QueryLog(self.gamma_log.out_dir / "gamma_queries.jsonl")
            self._held.enter_context(self.log.locked(option="--output-dir (output_dir:)"))
        else:  # the main process logs every answer; the others keep theirs in memory only
            self.log = QueryLog(os.devnull)
        self.answered: dict[str, dict[str, Any]] = self.log.answered() if self.main else {}
        self.done_steps: set[int] = set(self.gamma_log.done_steps) if self.gamma_log else set()
        self._said_backend = False

    def attach(self, trainer: Any) -> GammaCallback:
        """Evaluate ``trainer``'s model on its generation backend, and log through ``trainer.log``."""
        self.trainer = trainer
        return self

    # -------------------------------------------------------------- TrainerCallback hooks
    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
        # a resumed run: every process learns the main one's log (the same queries, the same steps)
        self.answered, self.done_steps = broadcast((self.answered, self.done_steps))
        self.evaluate(model, state.global_step)

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
        if state.global_step % self.spec.every == 0:
            self.evaluate(model, state.global_step)

    def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
        self.evaluate(model, state.global_step)
        if self.gamma_log is not None:
            self.gamma_log.plot()
        self.close()

    def close(self) -> None:
        """Release the query log (another run may use the folder then)."""
        self._held.close()

    # -------------------------------------------------------------- the evaluation
    def evaluate(self, model: Any, step: int) -> dict[int, float]:
        """γ_g of the policy at every depth (every process calls it; all get the same answer)."""
        if step in self.done_steps or (model is None and self.trainer is None):
            return {}
        spec = self.spec
        params = SamplingParams(spec.temperature, spec.top_p, spec.max_tokens)
        llm = LLMSpec(model=f"{self.name}@step{step}", backend="transformers", name=f"step {step}",
                      prompt_id=self.task.prompt_id, sampling=params, samples=spec.samples)  # fmt: skip
        policy = model if self.trainer is None else self.trainer.model
        was_training = policy.training
        policy.eval()
        try:
            with self._generating() as generator:
                backend = self._backend(generator if generator is not None else policy, llm.model)
                agent = LLMAgent(llm, self.log, backend=backend, answered=self.answered)
                evaluation = evaluate([agent], grid_cells(spec.grid(self.task)), progress=False)
        finally:
            policy.train(was_training)
        summary = summarize(evaluation.rows, level=spec.level)
        self.done_steps.add(step)
        depths = () if self.curriculum is None else self.curriculum.depths()
        gamma = {int(r["g"]): float(r["gamma_mean"]) for r in summary}
        if self.gamma_log is not None:
            head = {"active_depths": " ".join(map(str, depths)), "eval_seed": spec.eval_seed,
                    "prompt_id": self.task.prompt_id}  # fmt: skip
            self.gamma_log.record(step, summary, head)
        scalars = gamma_scalars(summary)
        if depths:
            scalars["curriculum/max_depth"] = float(max(depths))
        if self.trainer is not None:
            # Trainer.log itself: TRL's override would also flush (and reset) its step metrics here. Its
            # on_log clears should_log, which the step's own log (the loss, the reward) still needs.
            control = self.trainer.control
            should_log = control.should_log
            Trainer.log(self.trainer, scalars)
            self.trainer.control.should_log = should_log
        elif self.main:
            print(gamma_line(step, summary), flush=True)
        if self.curriculum is not None:
            self.curriculum.observe(step, gamma)
        return gamma

    def _generating(self) -> Any:
        """The policy, ready to generate on every process (ZeRO-3 weights gathered), for the block."""
        if self.trainer is None:
            return nullcontext(None)
        from trl.models.utils import unwrap_model_for_generation

        trainer = self.trainer
        gather = getattr(trainer.args, "ds3_gather_for_generation", True)
        return unwrap_model_for_generation(
            trainer.model_wrapped, trainer.accelerator, gather_deepspeed3_params=gather
        )

    def _backend(self, lm: Any, name: str) -> Backend:
        """The trainer's generation backend, its batches shared out over the processes."""
        batch = self.spec.batch_size
        engine = self._vllm_engine()
        if engine is not None:
            from gf2env.agents.llm.vllm_engine import VLLMEngineBackend

            vllm = VLLMEngineBackend.from_loaded(engine, name, chunk=batch)
            return ShardedBackend(vllm, vllm.answer_chunk, batch)
        transformers = TransformersBackend.from_loaded(lm, self.tokenizer, name, batch)
        return ShardedBackend(transformers, transformers.answer_batch, batch)

    def _vllm_engine(self) -> Any:
        """TRL's colocated vLLM engine, its weights those of the current step, where γ can use it."""
        trainer = self.trainer
        vllm = getattr(trainer, "vllm_generation", None) if getattr(trainer, "use_vllm", False) else None
        if vllm is None:
            return None
        usable = vllm.mode == "colocate" and vllm.tensor_parallel_size == 1 and not vllm.enable_sleep_mode
        if not usable:
            if self.main and not self._said_backend:
                print("γ_g: generating with the trained model (transformers generate): TRL's vLLM engine is "
                      f"used for γ in colocate mode with tensor_parallel_size 1 and no sleep mode only "
                      f"(this run: {vllm.mode}, tensor_parallel_size {vllm.tensor_parallel_size}, sleep "
                      f"mode {vllm.enable_sleep_mode}).", flush=True)  # fmt: skip
                self._said_backend = True
            return None
        if trainer.state.global_step != trainer._last_loaded_step:  # as TRL does before it generates
            vllm.sync_weights()
            trainer._last_loaded_step = trainer.state.global_step
        return vllm.llm


__all__ = ["GammaCallback"]
