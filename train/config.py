"""The YAML of a TRL training run (``configs/train/grpo/``, ``configs/train/sft/``), read into dataclasses
with checked keys.

Sections: ``model`` (a local model folder, dtype, optional ``lora``), ``task`` (p, d, K, sampling,
prompt id), ``curriculum`` (:func:`gf2env.train.curriculum.make_curriculum`), ``rewards`` (weights of the
exact-term and format rewards), ``gamma`` (:class:`gf2env.train.gamma_log.GammaEvalSpec`), ``trainer`` (passed
to TRL's ``GRPOConfig`` / ``SFTConfig`` as keyword arguments, so every TRL option is available
there), and ``sft`` (the teacher data of a warm start: depths, records, tool variant). Top level:
``seed``, ``output_dir``, ``tools`` (GRPO with the Python tool environment).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gf2env.config.flags import add_flags
from gf2env.config.options import option
from gf2env.config.settings import check_depths
from gf2env.config.yaml_files import check_bools, dataclass_from_mapping, read_config
from gf2env.errors import GF2ConfigError
from gf2env.train.curriculum import Curriculum, make_curriculum
from gf2env.train.data import TaskSpec
from gf2env.train.gamma_log import GammaEvalSpec


@dataclass(frozen=True)
class ModelSpec:
    """A local Hugging Face model folder; ``lora`` is a ``peft.LoraConfig`` mapping (None: full fine-tune)."""

    path: str
    dtype: str = "float32"
    lora: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not self.path:
            raise GF2ConfigError(
                "model.path is empty; give a local model folder (e.g. from gf2env.train.tiny_lm)."
            )
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise GF2ConfigError(f"model.dtype={self.dtype!r} is not float32, bfloat16 or float16.")


@dataclass(frozen=True)
class RewardWeights:
    """Weights of :func:`gf2env.train.rewards.correct_term_reward` and
    :func:`gf2env.train.rewards.format_reward`."""

    correct: float = 1.0
    format: float = 0.0

    def __post_init__(self) -> None:
        if self.correct < 0 or self.format < 0:
            raise GF2ConfigError(
                f"rewards weights must be >= 0; got correct={self.correct}, format={self.format}."
            )


@dataclass(frozen=True)
class SFTData:
    """Teacher completions for the warm start: ``records`` a depth at ``depths``, ``tools`` for the
    tool variant (the completion is a correct Python solver)."""

    depths: tuple[int, ...] = (0, 1)
    records: int = 200
    tools: bool = False

    def __post_init__(self) -> None:
        if self.records < 1:
            raise GF2ConfigError(f"sft.records={self.records} is less than the minimum 1.")
        object.__setattr__(self, "depths", check_depths(self.depths, "sft.depths"))


@dataclass
class TrainConfig:
    """One training run."""

    model: ModelSpec
    task: TaskSpec = field(default_factory=TaskSpec)
    curriculum: Curriculum = field(default_factory=lambda: make_curriculum({"stages": [[0, [0]]]}))
    rewards: RewardWeights = field(default_factory=RewardWeights)
    gamma: GammaEvalSpec = field(default_factory=GammaEvalSpec)
    trainer: dict[str, Any] = field(default_factory=dict)
    sft: SFTData = field(default_factory=SFTData)
    seed: int = 0
    output_dir: Path = field(default=Path("results/train"), metadata=option(help="override output_dir"))
    tools: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if self.seed == self.gamma.eval_seed:
            raise GF2ConfigError(
                f"seed={self.seed} equals gamma.eval_seed: the held-out records would be the training ones; "
                "give them different seeds."
            )


def _section(obj: dict[str, Any], name: str, cls: type, path: Path, **convert: Any) -> Any:
    return dataclass_from_mapping(cls, obj.get(name), f"{path}: {name}", convert=convert)


def load_train_config(path: str | Path, **overrides: Any) -> TrainConfig:
    """Read a run from YAML; unknown keys are errors. ``overrides`` replace top-level values."""
    path = Path(path)
    obj = read_config(path, "training run (configs/train/grpo/, configs/train/sft/)", TrainConfig)
    check_bools(TrainConfig, obj, str(path))
    if "model" not in obj or not isinstance(obj["model"], dict):
        raise GF2ConfigError(f"{path} lacks model: {{path: <a local model folder>}}.")
    trainer = obj.get("trainer") or {}
    if not isinstance(trainer, dict):
        raise GF2ConfigError(f"{path}: trainer must be a mapping of GRPOConfig/SFTConfig options.")
    as_tuple = lambda v: tuple(int(x) for x in v)  # noqa: E731
    values: dict[str, Any] = {
        "model": _section(obj, "model", ModelSpec, path),
        "task": _section(obj, "task", TaskSpec, path),
        "curriculum": make_curriculum(obj.get("curriculum") or {"kind": "fixed", "stages": [[0, [0]]]}),
        "rewards": _section(obj, "rewards", RewardWeights, path),
        "gamma": _section(obj, "gamma", GammaEvalSpec, path, depths=as_tuple),
        "trainer": dict(trainer),
        "sft": _section(obj, "sft", SFTData, path, depths=as_tuple),
        "seed": int(obj.get("seed", 0)),
        "output_dir": output_folder(obj.get("output_dir", "results/train"), f"{path}: output_dir"),
        "tools": obj.get("tools", False),
        "description": str(obj.get("description", "")),
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    if "model_path" in values:
        values["model"] = ModelSpec(values.pop("model_path"), values["model"].dtype, values["model"].lora)
    values["output_dir"] = output_folder(values["output_dir"], "--output-dir")
    return TrainConfig(**values)


def output_folder(value: Any, what: str) -> Path:
    """A run's output folder, from its config or ``--output-dir``: a path that names something. An
    empty or blank one is refused: ``Path("")`` is the working directory, which a run would fill."""
    if not isinstance(value, (str, Path)) or not str(value).strip():
        raise GF2ConfigError(
            f"{what}={value!r} names no folder; give the run's output folder, e.g. results/my-run."
        )
    return Path(value)


def run_parser(prog: str, description: str, example: str) -> argparse.ArgumentParser:
    """The command line shared by the TRL scripts: a config and the overrides of a run."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", required=True, help=f"a YAML run, e.g. {example}")
    parser.add_argument("--model-path", help="override model.path")
    add_flags(parser, TrainConfig, ["output_dir"], overrides=True)
    parser.add_argument("--max-steps", type=int, help="override trainer.max_steps")
    return parser


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The run a parsed :func:`run_parser` command line names."""
    config = load_train_config(args.config, model_path=args.model_path, output_dir=args.output_dir)
    if args.max_steps is not None:
        config.trainer["max_steps"] = args.max_steps
    return config


__all__ = ["ModelSpec", "RewardWeights", "SFTData", "TrainConfig", "config_from_args", "load_train_config",
           "output_folder", "run_parser"]  # fmt: skip
