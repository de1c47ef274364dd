"""γ_g while training: every N steps, the current policy on a fixed held-out set at each depth.

The held-out set is the evaluation harness's own grid (:class:`gf2env.agents.harness.grid.Grid`) with its own
seed (``eval_seed``, recorded in every row; training prompts use the run's ``seed``, a different
key of the record generator, so the held-out records are not the training ones). The policy is
asked through :class:`gf2env.agents.llm.agent.LLMAgent` over the live model
(:meth:`gf2env.agents.llm.transformers_backend.TransformersBackend.from_loaded`), so prompts, scoring and
Jeffreys intervals are the ones ``gf2 eval`` uses; its queries go to ``gamma_queries.jsonl`` (one
model name a step). The callback holds that log from its construction to the end of training
(:meth:`gf2env.agents.llm.query_log.QueryLog.locked`, the lock of ``gf2 eval``): a second run on the same
output folder is refused before it trains, never appending to the same log.

Rows go to ``gamma.csv`` (always; :class:`gf2env.train.gamma_log.GammaLog`): step, the curriculum's active
depths, and the summary columns of :func:`gf2env.report.results.summarize` per depth. Scalars also
go to TensorBoard (when installed), and to trackio / W&B when a run of theirs is active. At the
end, ``gamma_vs_step.png`` (γ_g against step, a line a depth) and ``gamma_vs_depth.png`` (γ_g
against g at the first and last evaluation).
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from gf2env.agents.harness.evaluate import evaluate
from gf2env.agents.harness.grid import grid_cells
from gf2env.agents.llm.agent import LLMAgent, LLMSpec
from gf2env.agents.llm.queries import SamplingParams
from gf2env.agents.llm.query_log import QueryLog
from gf2env.agents.llm.transformers_backend import TransformersBackend
from gf2env.report.results import summarize
from gf2env.train.curriculum import Curriculum
from gf2env.train.data import TaskSpec
from gf2env.train.gamma_log import GammaEvalSpec, GammaLog


class GammaCallback(TrainerCallback):
    """Evaluate γ_g every ``spec.every`` steps (and at the start and the end); see the module docs.

    Args:
        spec: the evaluation; task: the task of the prompts; out_dir: where the CSV, log and plots go.
        tokenizer: the policy's tokenizer; curriculum: told each evaluation (adaptive ones move on it).
        name: the policy's name in the query log.
    """

    def __init__(
        self,
        spec: GammaEvalSpec,
        task: TaskSpec,
        out_dir: str | Path,
        tokenizer: Any,
        curriculum: Curriculum | None = None,
        name: str = "policy",
    ) -> None:
        self.spec, self.task, self.tokenizer = spec, task, tokenizer
        self.curriculum, self.name = curriculum, name
        self.gamma_log = GammaLog(out_dir)
        self.log = QueryLog(self.gamma_log.out_dir / "gamma_queries.jsonl")
        self._held = ExitStack()  # one run at a time on the log: released by close() or at exit
        self._held.enter_context(self.log.locked(option="--output-dir (output_dir:)"))
        self.answered = self.log.answered()  # read once; every evaluation's agent adds to it

    # -------------------------------------------------------------- TrainerCallback hooks
    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
        self.evaluate(model, state.global_step)

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
        if state.global_step % self.spec.every == 0:
            self.evaluate(model, state.global_step)

    def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
        self.evaluate(model, state.global_step)
        self.gamma_log.plot()
        self.close()

    def close(self) -> None:
        """Close the CSV and release the query log (another run may use the folder then)."""
        self.gamma_log.close()
        self._held.close()

    # -------------------------------------------------------------- the evaluation
    def evaluate(self, model: Any, step: int) -> dict[int, float]:
        """γ_g of ``model`` at every depth; appended to the CSV (a step already there is skipped)."""
        if model is None or step in self.gamma_log.done_steps:
            return {}
        spec = self.spec
        params = SamplingParams(spec.temperature, spec.top_p, spec.max_tokens)
        llm = LLMSpec(model=f"{self.name}@step{step}", backend="transformers", name=f"step {step}",
                      prompt_id=self.task.prompt_id, sampling=params, samples=spec.samples)  # fmt: skip
        was_training = model.training
        model.eval()
        try:
            backend = TransformersBackend.from_loaded(model, self.tokenizer, llm.model, spec.batch_size)
            agent = LLMAgent(llm, self.log, backend=backend, answered=self.answered)
            evaluation = evaluate([agent], grid_cells(spec.grid(self.task)), progress=False)
        finally:
            model.train(was_training)
        summary = summarize(evaluation.rows, level=spec.level)
        depths = () if self.curriculum is None else self.curriculum.depths()
        head = {"active_depths": " ".join(map(str, depths)), "eval_seed": spec.eval_seed,
                "prompt_id": self.task.prompt_id}  # fmt: skip
        extra = {"curriculum/max_depth": float(max(depths))} if depths else {}
        gamma = self.gamma_log.record(step, summary, head, extra)
        if self.curriculum is not None:
            self.curriculum.observe(step, gamma)
        return gamma


__all__ = ["GammaCallback"]
