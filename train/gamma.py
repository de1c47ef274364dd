"""γ_g while training: every N steps, the current policy on a fixed held-out set at each depth.

The held-out set is the evaluation harness's own grid (:class:`agents.harness.grid.Grid`) with its own
seed (``eval_seed``, recorded in every row; training prompts use the run's ``seed``, a different
key of the record generator, so the held-out records are not the training ones). The policy is
asked through :class:`agents.llm.agent.LLMAgent` over the live model
(:meth:`agents.llm.backends.TransformersBackend.from_loaded`), so prompts, scoring and Jeffreys intervals are
the ones ``gf2 eval`` uses; its queries go to ``gamma_queries.jsonl`` (one model name a step).

Rows go to ``gamma.csv`` (always): step, the curriculum's active depths, and the summary columns of
:func:`gf2env.report.results.summarize` per depth. Scalars also go to TensorBoard (when installed), and to
trackio / W&B when a run of theirs is active. At the end, ``gamma_vs_step.png`` (γ_g against step,
a line a depth) and ``gamma_vs_depth.png`` (γ_g against g at the first and last evaluation).
"""

from __future__ import annotations

import csv
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from agents.harness.evaluate import evaluate
from agents.harness.grid import Grid, grid_cells
from agents.llm.agent import LLMAgent, LLMSpec, answered_entries
from agents.llm.backends import SamplingParams, TransformersBackend
from agents.llm.query_log import QueryLog
from gf2env.errors import GF2ConfigError
from gf2env.report.results import SUMMARY_COLUMNS, summarize
from train.curriculum import Curriculum
from train.data import TaskSpec

GAMMA_COLUMNS = ("step", "active_depths", "eval_seed", "prompt_id", *SUMMARY_COLUMNS, "time")


@dataclass(frozen=True)
class GammaEvalSpec:
    """What the γ_g evaluation asks: depths, records a depth, how often, how the policy samples."""

    depths: tuple[int, ...] = (0, 1)
    trials: int = 20
    every: int = 10
    eval_seed: int = 1_000_003
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 64
    samples: int = 1
    level: float = 0.95
    batch_size: int = 16  # queries a generate call (see agents.llm.backends.TransformersBackend)

    def __post_init__(self) -> None:
        if self.every < 1:
            raise GF2ConfigError(f"gamma.every={self.every} is less than the minimum 1 (steps apart).")
        if self.trials < 1:
            raise GF2ConfigError(f"gamma.trials={self.trials} is less than the minimum 1.")
        if self.batch_size < 1:
            raise GF2ConfigError(f"gamma.batch_size={self.batch_size} is less than the minimum 1.")
        SamplingParams(self.temperature, self.top_p, self.max_tokens)  # its checks

    def grid(self, task: TaskSpec) -> Grid:
        return Grid(depths=self.depths, trials=self.trials, p=(task.p,), d=(task.d,), K=(task.K,),
                    sampling=(task.sampling,), seed=self.eval_seed)  # fmt: skip


def read_gamma_csv(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a ``gamma.csv`` (numbers as numbers)."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            parsed: dict[str, Any] = dict(row)
            for key in ("step", "eval_seed", "p", "d", "K", "g", "trials", "num_candidates"):
                if key in parsed and parsed[key] != "":
                    parsed[key] = int(parsed[key])
            for key in ("gamma_mean", "gamma_lo", "gamma_hi", "accuracy_mean", "accuracy_lo", "accuracy_hi",
                        "chance", "time"):  # fmt: skip
                if key in parsed and parsed[key] != "":
                    parsed[key] = float(parsed[key])
            out.append(parsed)
    return out


class GammaLog:
    """Where γ_g evaluations of a run go: ``gamma.csv``, TensorBoard / trackio / W&B, the end plots.

    Shared by the TRL callback below and the SB3 one (:mod:`train.sb3`). ``done_steps`` holds the steps
    already in the CSV (a resumed run does not evaluate them again).
    """

    def __init__(self, out_dir: str | Path) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.csv_path = self.out_dir / "gamma.csv"
        self.done_steps = {int(r["step"]) for r in read_gamma_csv(self.csv_path)}
        self._writer: Any = None

    def record(self, step: int, summary: Sequence[dict[str, Any]], head: dict[str, Any],
               extra_scalars: dict[str, float] | None = None) -> dict[int, float]:  # fmt: skip
        """Append one evaluation (summary rows of :func:`summarize`); returns γ by depth."""
        rows = [{"step": step, **head, **row, "time": time.time()} for row in summary]
        new = not self.csv_path.exists()
        with open(self.csv_path, "a", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=GAMMA_COLUMNS, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerows(rows)
        self.done_steps.add(step)
        gamma = {int(r["g"]): float(r["gamma_mean"]) for r in rows}
        self._log_scalars(step, {**{f"gamma/g{g}": v for g, v in gamma.items()}, **(extra_scalars or {})})
        return gamma

    def _log_scalars(self, step: int, scalars: dict[str, float]) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            SummaryWriter = None  # noqa: N806
        if SummaryWriter is not None:
            if self._writer is None:
                self._writer = SummaryWriter(str(self.out_dir / "tensorboard" / "gamma"))
            for key, value in scalars.items():
                self._writer.add_scalar(key, value, step)
            self._writer.flush()
        for module in ("trackio", "wandb"):
            try:
                tracker = __import__(module)
            except ImportError:
                continue
            if getattr(tracker, "run", None) is not None:
                tracker.log({**scalars, "train/global_step": step})

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def plot(self) -> list[Path]:
        """γ_g against step (a line a depth) and γ_g against depth at the first and last evaluation."""
        from gf2env.report.plots import plot_gamma_vs_depth, plot_gamma_vs_step

        rows = read_gamma_csv(self.csv_path)
        if not rows:
            return []
        paths = [plot_gamma_vs_step(rows, self.out_dir / "gamma_vs_step.png")]
        steps = sorted({r["step"] for r in rows})
        ends = [r for r in rows if r["step"] in (steps[0], steps[-1])]
        if len({r["g"] for r in ends}) > 1:
            paths.append(plot_gamma_vs_depth(ends, self.out_dir / "gamma_vs_depth.png",
                                             title="γ_g by depth, first and last evaluation"))  # fmt: skip
        return paths


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
        self.answered = answered_entries(self.log)  # read once; every evaluation's agent adds to it

    # -------------------------------------------------------------- TrainerCallback hooks
    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
        self.evaluate(model, state.global_step)

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
        if state.global_step % self.spec.every == 0:
            self.evaluate(model, state.global_step)

    def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
        self.evaluate(model, state.global_step)
        self.gamma_log.plot()
        self.gamma_log.close()

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


__all__ = ["GAMMA_COLUMNS", "GammaCallback", "GammaEvalSpec", "GammaLog", "read_gamma_csv"]
