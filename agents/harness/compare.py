"""``gf2 compare``: agents × settings (or a records file) → results table, summary, figures.

A comparison is described by a YAML file (``configs/compare/*.yaml``) or the same keys on the command line::

    agents: [A, B, B-exact, C, "D(g//2)", decoder]   # estimator names, and LLMs:
    #   - llm: {backend: vllm, model: Qwen/Qwen3-8B, base_url: http://127.0.0.1:8000}   (agents/llm/agent.py)
    #   - sb3: {path: results/sb3-ppo/final.zip, algo: ppo}                             (agents/sb3_agent.py)
    grid: {p: [12], d: [4], K: [32], sampling: [adversarial],
           depths: [0, 1, 3, 7], trials: 2000, seed: 0, n: g+1}
    # episodes: true in grid: record t at each depth is a step of episode t (n: max depth + 1)
    # or, instead of grid:  records: path/to/records.json
    out: results/paper-estimators
    level: 0.95          # Jeffreys interval level
    plots: true
    executor: local      # or ray: one Ray task per cell × agent (gf2env.agents.harness.executors)
    address: auto        # ray only: the cluster (auto, HOST:6379, ray://HOST:10001); none: a local Ray

:func:`run_compare` writes ``results.csv`` (one row per agent × record, with what it cost),
``summary.csv`` (per agent and setting, with Jeffreys intervals and mean compute per step) and the
figures that the settings support (γ against compute per step too) into ``out``; LLM
agents also keep their resumable query log there (``queries.jsonl``).
"""

from __future__ import annotations

import os
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gf2env.agents.harness.evaluate import Evaluation, evaluate, make_agents
from gf2env.agents.harness.executors import ExecutorSpec
from gf2env.agents.harness.grid import Grid, column_cells, grid_cells, lone_settings
from gf2env.agents.llm.agent import LLMAgent, LLMSpec
from gf2env.agents.llm.query_log import QueryLog
from gf2env.agents.sb3_agent import SB3Spec
from gf2env.config.flags import name_list, text_arg
from gf2env.config.options import option
from gf2env.config.settings import PER_DEPTH, check_episode_terms
from gf2env.config.yaml_files import (
    check_bools,
    check_config_keys,
    dataclass_from_mapping,
    load_yaml,
    read_yaml_mapping,
)
from gf2env.errors import GF2ConfigError

if TYPE_CHECKING:
    from gf2env.report.fit import EffectivePrefixFit

_GRID_TUPLES = {"depths": int, "p": int, "d": int, "K": int, "sampling": str}


@dataclass(frozen=True)
class CompareConfig:
    """What to compare, on what, and where to write it (exactly one of ``grid`` and ``records``).

    ``agents`` holds estimator names, :class:`~gf2env.agents.llm.agent.LLMSpec` and
    :class:`~gf2env.agents.sb3_agent.SB3Spec` objects.
    """

    # Each field's YAML key and flag (gf2env.config.options); the grid's are Grid's own.
    agents: tuple[str | LLMSpec | SB3Spec, ...] = field(
        metadata=option(type=name_list, help="e.g. A,B,C,D(k=3)")
    )
    grid: Grid | None = field(default=None, metadata=option(flag=False))
    records: Path | None = field(
        default=None, metadata=option(type=text_arg, help="evaluate on this records file instead of a grid")
    )
    out: Path = Path("results/compare")
    level: float = field(default=0.95, metadata=option(help="Jeffreys interval level (default 0.95)"))
    plots: bool = field(default=True, metadata=option(negate=True))
    fit: bool = field(default=True, metadata=option(negate=True, help="skip the effective-prefix fit"))
    description: str = field(default="", metadata=option(flag=False))
    executor: ExecutorSpec = field(  # where the cells are answered (here, or Ray tasks)
        default=ExecutorSpec(),
        metadata=option(
            nested={  # ExecutorSpec's kind and address are top-level keys executor: and address:
                "kind": option(
                    key="executor", type=text_arg,
                    help="where the cells run: local (default, this process) or ray (Ray tasks)",
                ),
                "address": option(
                    type=text_arg,
                    help="with --executor ray: the cluster, e.g. auto or HOST:6379 (default: a local Ray)",
                ),
            }
        ),
    )  # fmt: skip

    def __post_init__(self) -> None:
        if not self.agents:
            raise GF2ConfigError("No agents given; list at least one, e.g. agents: [A, B, C].")
        if (self.grid is None) == (self.records is None):
            raise GF2ConfigError("Give exactly one of grid and records (a records file to evaluate on).")
        if not 0.0 < self.level < 1.0:
            raise GF2ConfigError(f"level={self.level} is outside (0, 1); pass e.g. 0.95.")
        make_agents([a for a in self.agents if isinstance(a, str)])  # validates the names
        names = [a if isinstance(a, str) else a.label for a in self.agents]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise GF2ConfigError(
                f"Agents {dupes} are listed twice; list each once (tell LLMs apart with name:)."
            )

    def with_overrides(self, **values: Any) -> CompareConfig:
        """A copy with the given fields replaced (``None`` values are ignored)."""
        return replace(self, **{k: v for k, v in values.items() if v is not None})


def _as_tuple(value: Any, key: str, kind: type) -> tuple[Any, ...]:
    items = value if isinstance(value, list | tuple) else [value]
    for item in items:
        if not isinstance(item, kind) or isinstance(item, bool):
            raise GF2ConfigError(f"grid.{key} has {item!r}; expected {kind.__name__} values.")
    return tuple(items)


def _grid_n(n: Any) -> int | None:
    if n == PER_DEPTH:
        return None
    if not isinstance(n, int) or isinstance(n, bool):
        raise GF2ConfigError(f"grid.n={n!r} is neither an integer nor 'g+1'.")
    return n


def grid_from_mapping(obj: Any, where: str = "grid") -> Grid:
    """A :class:`Grid` from the ``grid:`` mapping of a config file (``where`` names it in messages)."""
    if isinstance(obj, dict):
        for key in ("depths", "trials"):
            if key not in obj:
                raise GF2ConfigError(f"{where} lacks {key!r}; e.g. depths: [0, 1, 3, 7] and trials: 500.")
        check_episode_terms(obj.get("episodes"), obj.get("n"), "n:", "episodes: true", where=f"{where}: ")
    convert = {
        key: (lambda v, key=key, kind=kind: _as_tuple(v, key, kind)) for key, kind in _GRID_TUPLES.items()
    }
    return dataclass_from_mapping(
        Grid, obj, where, convert={**convert, "trials": int, "seed": int, "n": _grid_n}
    )


def agent_from_config(item: Any, path: Path) -> str | LLMSpec | SB3Spec:
    """An ``agents:`` entry: an estimator name, ``{llm: {...}}`` (:class:`LLMSpec`) or ``{sb3: {...}}``
    (:class:`SB3Spec`)."""
    if isinstance(item, dict):
        kind = next(iter(item)) if len(item) == 1 else None
        if kind not in ("llm", "sb3") or not isinstance(item[kind], dict):
            raise GF2ConfigError(
                f"{path}: agent entry {item!r} is not an estimator name, {{llm: {{model: ...}}}} or "
                "{sb3: {path: ...}}."
            )
        return LLMSpec.from_mapping(item["llm"]) if kind == "llm" else SB3Spec.from_mapping(item["sb3"])
    return str(item)


# What `gf2 compare` runs with no config and no agents: the README's main job
# (configs/compare/paper-estimators.yaml holds the same, to edit and copy). About 25 s on one core:
# 6 estimators x 8 depths x 2000 records + the fit.
DEFAULT_CONFIG = """\
description: >
  The paper's estimator curves (its Figure 3): estimators A (diligent), B (data only, the paper's
  composite likelihood), B-exact (exact data-only posterior, depths <= 3), C (history only),
  D knowing g//2 terms, and the intersection decoder; p=12, d=4, K=32, adversarial payloads,
  2000 records a depth.
agents: [A, B, B-exact, C, "D(g//2)", decoder]
grid:
  p: [12]
  d: [4]
  K: [32]
  sampling: [adversarial]
  depths: [0, 1, 3, 7, 15, 31, 63, 127]
  trials: 2000
  seed: 0
  n: g+1
out: results/paper-estimators
level: 0.95
plots: true
fit: true
"""


def default_config() -> CompareConfig:
    """The embedded default comparison (:data:`DEFAULT_CONFIG`)."""
    return config_from_mapping(load_yaml(DEFAULT_CONFIG), Path("<default>"))


def load_config(path: str | Path) -> CompareConfig:
    """Read a comparison from YAML; unknown keys are errors, not ignored."""
    return config_from_mapping(read_yaml_mapping(path, "comparison"), Path(path))


def config_from_mapping(obj: Any, path: Path) -> CompareConfig:
    """A comparison from the mapping of a YAML file (``path`` names it in messages)."""
    if not isinstance(obj, dict):
        raise GF2ConfigError(f"{path} does not hold a mapping of keys (agents, grid, out, ...).")
    check_config_keys(obj, CompareConfig, str(path))
    check_bools(CompareConfig, obj, str(path))
    agents = obj.get("agents", [])
    if not isinstance(agents, list):
        raise GF2ConfigError(f"{path}: agents must be a list, e.g. [A, B, C]; got {agents!r}.")
    records, address = obj.get("records"), obj.get("address")
    return CompareConfig(
        agents=tuple(agent_from_config(a, path) for a in agents),
        grid=grid_from_mapping(obj["grid"], f"{path}: grid") if "grid" in obj else None,
        records=None if records is None else Path(records),
        out=Path(obj["out"]) if "out" in obj else Path("results") / path.stem,  # a file's own folder
        level=float(obj.get("level", 0.95)),
        plots=obj.get("plots", True),
        fit=obj.get("fit", True),
        description=str(obj.get("description", "")),
        executor=ExecutorSpec(str(obj.get("executor", "local")), None if address is None else str(address)),
    )


@dataclass
class CompareReport:
    """What a comparison wrote, and its summary rows."""

    evaluation: Evaluation
    summary: list[dict[str, Any]]
    results_csv: Path
    summary_csv: Path
    figures: list[Path] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # LLM agents' throughput and unanswered records
    fits: list[EffectivePrefixFit] = field(default_factory=list)  # one per agent, setting and method
    fit_csv: Path | None = None
    tool_usage_csv: Path | None = None  # the paper's tool-usage table (tool agents only)


def make_out_dir(out: Path) -> None:
    """Create the output folder ``out`` (and its parents), or say plainly why it cannot be one."""
    if out.exists() and not out.is_dir():
        raise GF2ConfigError(f"--out {out} exists and is not a folder; name a folder (it is created).")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        why = err.strerror or type(err).__name__
        raise GF2ConfigError(f"--out {out}: cannot create the folder ({why}); name another.") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise GF2ConfigError(f"--out {out} is a folder this user cannot write into; name another.")


def run_compare(config: CompareConfig, progress: bool = True) -> CompareReport:
    """Evaluate, summarise and plot as ``config`` says; returns what was written."""
    start = time.perf_counter()
    llms = any(isinstance(a, LLMSpec) for a in config.agents)
    if llms:
        make_out_dir(config.out)  # its query log's lock lives there
    log = QueryLog(config.out / "queries.jsonl") if llms else None
    with log.locked() if log is not None else nullcontext():  # one run at a time on a query log
        return _run_compare(config, progress, start, log)


def _run_compare(config: CompareConfig, progress: bool, start: float, log: QueryLog | None) -> CompareReport:
    # The report's modules (scipy, the figures) load when a comparison runs, not when gf2 starts.
    from gf2env.records.files import read_record_columns
    from gf2env.report.compute_plot import write_compute_figures
    from gf2env.report.fit import METHODS, fit_agents, write_fits_csv
    from gf2env.report.plots import write_figures
    from gf2env.report.results import format_compute, summarize, write_results_csv, write_summary_csv

    agents = make_agents(config.agents, log)
    lone: list[str] = []
    if config.grid is not None:
        cells, total, seed = grid_cells(config.grid), config.grid.num_records, config.grid.seed
    else:
        assert config.records is not None
        groups = read_record_columns(config.records)
        total = sum(group.R for group in groups)
        cells, seed = column_cells(groups, config.records.name), 0
        lone = [f"note: {line}" for line in lone_settings(groups)]
    executor = config.executor.executor()
    make_out_dir(config.out)  # before the work: a run never fails at its end for want of a folder
    evaluation = evaluate(agents, cells, seed=seed, total=total, progress=progress, executor=executor)
    notes = lone + [line for a in agents if isinstance(a, LLMAgent) for line in a.report()]
    paper_usage: list[dict[str, Any]] = []
    if any(isinstance(a, LLMAgent) and a.spec.tools for a in agents):
        from gf2env.agents.llm.tools.usage import (
            format_paper_tool_usage,
            format_tool_usage,
            paper_tool_usage,
            tool_usage,
        )

        assert log is not None
        lines = log.lines()
        paper_usage = paper_tool_usage(lines)
        if paper_usage:
            notes.append(
                "tool usage (the paper's table: accuracy without tools, on the first run's output, "
                "after the revise loop):\n" + format_paper_tool_usage(paper_usage)
            )
        usage = tool_usage(lines)
        if usage:
            notes.append("tool use by episode class (gf2env's breakdown):\n" + format_tool_usage(usage))
        if any(isinstance(a, LLMAgent) and a.episodes for a in agents):
            from gf2env.agents.llm.tools import reuse

            by_depth, built = reuse.reuse_table(lines), reuse.episode_table(lines)
            config.out.mkdir(parents=True, exist_ok=True)
            reuse.write_table_csv(config.out / "reuse.csv", by_depth)
            reuse.write_table_csv(config.out / "episodes.csv", built)
            notes.append(
                "by mode and depth (episode: a workspace kept across an episode's steps; fresh: an empty "
                "sandbox a run; text: no tools), means a step; in reuse.csv:\n"
                + reuse.format_reuse_table(by_depth)
            )
            notes.append("tools built in episodes (episodes.csv):\n" + reuse.format_episode_table(built))
    if not evaluation.rows:
        why = evaluation.skipped_report() + notes
        raise GF2ConfigError("No agent answered at any setting:\n" + "\n".join(why))
    config.out.mkdir(parents=True, exist_ok=True)
    results_csv = config.out / "results.csv"
    summary_csv = config.out / "summary.csv"
    write_results_csv(results_csv, evaluation.rows)
    summary = summarize(evaluation.rows, level=config.level)
    write_summary_csv(summary_csv, summary)
    tool_usage_csv = None
    if paper_usage:
        from gf2env.agents.llm.tools.usage import write_paper_tool_usage

        tool_usage_csv = config.out / "tool_usage.csv"
        write_paper_tool_usage(tool_usage_csv, paper_usage)
    compute = format_compute(summary)
    if compute:
        notes.append(
            "compute per step (mean over a depth's records; tokens: prompt + completion):\n" + compute
        )
    figures = write_figures(summary, config.out) if config.plots else []
    if config.plots:
        compute_figures, left_out = write_compute_figures(summary, config.out)
        figures += compute_figures
        notes.extend(f"note: {line}" for line in left_out)
    fits: list[EffectivePrefixFit] = []
    fit_csv = None
    if config.fit:
        curve_seed = config.grid.seed + 1 if config.grid else 1  # D-curve records: not the evaluated ones
        fits, why = fit_agents(evaluation.rows, seed=curve_seed, progress=progress, methods=METHODS)
        notes.extend(why)
        if fits:
            fit_csv = config.out / "fit.csv"
            write_fits_csv(fit_csv, fits)
    seconds = time.perf_counter() - start
    return CompareReport(
        evaluation, summary, results_csv, summary_csv, figures, seconds, notes, fits, fit_csv,
        tool_usage_csv,
    )  # fmt: skip


def print_report(report: CompareReport) -> None:
    """The summary table, the skips and the files written, for the terminal."""
    from gf2env.report.fit import format_setting
    from gf2env.report.results import format_summary

    print(format_summary(report.summary))
    for line in report.notes:
        print(line)
    for line in report.evaluation.skipped_report():
        print(f"note: {line}")
    print(f"wrote {report.results_csv} ({len(report.evaluation.rows)} rows), {report.summary_csv}")
    for fig in report.figures:
        print(f"wrote {fig}")
    if report.tool_usage_csv is not None:
        print(f"wrote {report.tool_usage_csv} (the paper's tool-usage table)")
    if report.fits:
        print("effective-prefix fit (k = u*g or k = min(v, g) known terms of estimator D):")
        print(f"{'agent':<16} {'setting':<28} {'method':<12} {'u':>6} {'v':>7} {'ΔAIC':>8}  preferred")
        for fit in report.fits:
            where = format_setting(fit.setting) if fit.setting else ""
            print(
                f"{fit.agent or '':<16} {where:<28} {fit.method:<12} {fit.u:>6.3f} {fit.v:>7.2f} "
                f"{fit.delta_aic:>8.1f}  {fit.preferred}"
            )
    if report.fit_csv is not None:
        print(f"wrote {report.fit_csv} (effective-prefix fit of every agent, both methods)")
    print(f"done in {report.seconds:.1f} s")


__all__ = [
    "CompareConfig",
    "CompareReport",
    "DEFAULT_CONFIG",
    "agent_from_config",
    "config_from_mapping",
    "default_config",
    "grid_from_mapping",
    "load_config",
    "print_report",
    "run_compare",
]
