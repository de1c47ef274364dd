"""A training run's γ_g evaluation: what it asks (:class:`GammaEvalSpec`), where it goes (:class:`GammaLog`,
``gamma.csv``; :func:`gamma_scalars`, the trainer's own logs).

Shared by the TRL callback (:mod:`gf2env.train.gamma`) and the SB3 one (:mod:`gf2env.train.sb3`): each
writes ``gamma.csv`` here and hands :func:`gamma_scalars` to its trainer's logger (TRL's ``Trainer.log``,
SB3's ``logger.record``), which sends them wherever the run reports (console, TensorBoard, W&B, trackio).
``gamma.csv`` has the columns of ``gf2env.report.schema.SUMMARY`` with the run's columns around them
(:data:`GAMMA`): the step, the curriculum's active depths, the held-out seed, the prompt id, and
the wall time.
"""

from __future__ import annotations

import csv
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gf2env.agents.harness.grid import Grid
from gf2env.agents.llm.queries import SamplingParams
from gf2env.config.settings import TaskSettings, check_depths
from gf2env.errors import GF2ConfigError, RecordFormatError
from gf2env.report.schema import COMPUTE_COLUMNS, SUMMARY, Column, missing, read_table

GAMMA = SUMMARY.around(
    "gamma log",
    before=(
        Column("step", int),
        Column("active_depths", str, optional=True),
        Column("eval_seed", int),
        Column("prompt_id", str, optional=True),
    ),
    after=(Column("time", float),),
)
GAMMA_COLUMNS = GAMMA.names


@dataclass(frozen=True)
class GammaEvalSpec:
    """What the γ_g evaluation asks: depths, records a depth, how often, its held-out seed and level,
    and how an LLM policy samples. ``every`` counts optimizer steps (TRL) or timesteps (SB3); the
    sampling fields (temperature to batch_size) apply to LLM policies only."""

    depths: tuple[int, ...] = (0, 1)
    trials: int = 20
    every: int = 10
    eval_seed: int = 1_000_003
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 64
    samples: int = 1
    level: float = 0.95
    batch_size: int = 16  # queries a generate call (see gf2env.agents.llm.transformers_backend)

    def __post_init__(self) -> None:
        object.__setattr__(self, "depths", check_depths(self.depths, "gamma.depths"))
        if self.every < 1:
            raise GF2ConfigError(f"gamma.every={self.every} is less than the minimum 1 (steps apart).")
        if self.trials < 1:
            raise GF2ConfigError(f"gamma.trials={self.trials} is less than the minimum 1.")
        if self.batch_size < 1:
            raise GF2ConfigError(f"gamma.batch_size={self.batch_size} is less than the minimum 1.")
        SamplingParams(self.temperature, self.top_p, self.max_tokens)  # its checks

    def grid(self, task: TaskSettings) -> Grid:
        """The held-out grid: ``trials`` records a depth of ``task``, from ``eval_seed``."""
        return Grid(depths=self.depths, trials=self.trials, p=(task.p,), d=(task.d,), K=(task.K,),
                    sampling=(task.sampling,), seed=self.eval_seed)  # fmt: skip


def read_gamma_csv(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a ``gamma.csv``, typed as :data:`GAMMA` says (none if the file is absent)."""
    path = Path(path)
    if not path.exists():
        return []
    return [GAMMA.parse(row, f"{path} line {i + 2}") for i, row in enumerate(read_table(path, GAMMA))]


def _header(path: Path) -> list[str]:
    """The columns of an existing ``gamma.csv``: :data:`GAMMA`'s, less the compute columns where it was
    written before them (else :class:`RecordFormatError`)."""
    with open(path, newline="") as fh:
        header = next(csv.reader(fh), [])
    if missing(header, GAMMA.required) or missing(GAMMA.names, header):
        raise RecordFormatError(
            f"{path} has the header {header}, not a gamma log's {list(GAMMA_COLUMNS)}; move it away or "
            f"pass another output_dir."
        )
    return header


def gamma_scalars(summary: Sequence[dict[str, Any]]) -> dict[str, float]:
    """One evaluation as a trainer logs it: ``gamma/g{g}`` (the mean), ``gamma/g{g}_lo`` and
    ``gamma/g{g}_hi`` (its interval) a depth, and ``gamma/g{g}_{column}`` for each compute column
    (:data:`gf2env.report.schema.COMPUTE_COLUMNS`: tokens, tool runs, times) the evaluation measured."""
    scalars: dict[str, float] = {}
    for row in summary:
        g = int(row["g"])
        scalars[f"gamma/g{g}"] = float(row["gamma_mean"])
        scalars[f"gamma/g{g}_lo"] = float(row["gamma_lo"])
        scalars[f"gamma/g{g}_hi"] = float(row["gamma_hi"])
        for column in COMPUTE_COLUMNS:
            value = row.get(column)
            if value is not None and value == value:  # NaN: not measured
                scalars[f"gamma/g{g}_{column}"] = float(value)
    return scalars


def gamma_line(step: int, summary: Sequence[dict[str, Any]]) -> str:
    """One evaluation on one line, for the terminal: ``γ at step 40: g0 0.62 [0.41, 0.80] g1 ...``."""
    cells = [f"g{int(r['g'])} {float(r['gamma_mean']):.3f} [{float(r['gamma_lo']):.3f}, "
             f"{float(r['gamma_hi']):.3f}]" for r in summary]  # fmt: skip
    return f"γ at step {step}: " + "  ".join(cells)


class GammaLog:
    """Where γ_g evaluations of a run go: ``gamma.csv`` and, at the end, its plots.

    ``done_steps`` holds the steps
    already in the CSV (a resumed run does not evaluate them again); ``resume=False`` (a new run) refuses
    a folder that holds one.
    """

    def __init__(self, out_dir: str | Path, resume: bool = True) -> None:
        self.out_dir = Path(out_dir)
        self.csv_path = self.out_dir / "gamma.csv"
        if not resume and self.csv_path.exists():  # its steps would be skipped, its answers reused
            raise GF2ConfigError(
                f"{self.out_dir} holds another run's gamma.csv; pass --resume to continue that run, or "
                "another --output_dir for a new one."
            )
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.done_steps = {int(r["step"]) for r in read_gamma_csv(self.csv_path)}

    def record(self, step: int, summary: Sequence[dict[str, Any]], head: dict[str, Any]) -> dict[int, float]:
        """Append one evaluation (summary rows of :func:`summarize`); returns γ by depth."""
        rows = [{"step": step, **head, **row, "time": time.time()} for row in summary]
        new = not self.csv_path.exists() or self.csv_path.stat().st_size == 0
        columns = GAMMA_COLUMNS if new else _header(self.csv_path)  # a resumed run's file keeps its columns
        with open(self.csv_path, "a", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerows(rows)
        self.done_steps.add(step)
        return {int(r["g"]): float(r["gamma_mean"]) for r in rows}

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


__all__ = [
    "GAMMA",
    "GAMMA_COLUMNS",
    "GammaEvalSpec",
    "GammaLog",
    "gamma_line",
    "gamma_scalars",
    "read_gamma_csv",
]
