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
import dataclasses
import difflib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gf2env.config.settings import check_depths
from gf2env.config.yaml_files import check_bools, check_keys, dataclass_from_mapping, read_config
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
    output_dir: Path = Path("results/train")
    tools: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if self.seed == self.gamma.eval_seed:
            raise GF2ConfigError(
                f"seed={self.seed} equals gamma.eval_seed: the held-out records would be the training ones; "
                "give them different seeds."
            )


def load_train_config(path: str | Path, **overrides: Any) -> TrainConfig:
    """Read a run from YAML; unknown keys are errors. ``overrides`` replace top-level values."""
    path = Path(path)
    obj = read_config(path, "training run (configs/train/grpo/, configs/train/sft/)", TrainConfig)
    return train_config(obj, str(path), **overrides)


def train_config(obj: dict[str, Any], where: str, **overrides: Any) -> TrainConfig:
    """A run from its YAML mapping (``where`` names it in messages); ``overrides`` replace top-level
    values (``model_path``: the model's folder)."""
    check_bools(TrainConfig, obj, where)
    if "model" not in obj or not isinstance(obj["model"], dict):
        raise GF2ConfigError(f"{where} lacks model: {{path: <a local model folder>}}.")
    trainer = obj.get("trainer") or {}
    if not isinstance(trainer, dict):
        raise GF2ConfigError(f"{where}: trainer must be a mapping of GRPOConfig/SFTConfig options.")
    as_tuple = lambda v: tuple(int(x) for x in v)  # noqa: E731

    def section(name: str, cls: type, **convert: Any) -> Any:
        return dataclass_from_mapping(cls, obj.get(name), f"{where}: {name}", convert=convert)

    values: dict[str, Any] = {
        "model": section("model", ModelSpec),
        "task": section("task", TaskSpec),
        "curriculum": make_curriculum(obj.get("curriculum") or {"kind": "fixed", "stages": [[0, [0]]]}),
        "rewards": section("rewards", RewardWeights),
        "gamma": section("gamma", GammaEvalSpec, depths=as_tuple),
        "trainer": dict(trainer),
        "sft": section("sft", SFTData, depths=as_tuple),
        "seed": int(obj.get("seed", 0)),
        "output_dir": output_folder(obj.get("output_dir", "results/train"), f"{where}: output_dir"),
        "tools": obj.get("tools", False),
        "description": str(obj.get("description", "")),
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    if "model_path" in values:
        values["model"] = ModelSpec(values.pop("model_path"), values["model"].dtype, values["model"].lora)
    values["output_dir"] = output_folder(values["output_dir"], "--output_dir")
    return TrainConfig(**values)


def output_folder(value: Any, what: str) -> Path:
    """A run's output folder, from its config or ``--output_dir``: a path that names something. An
    empty or blank one is refused: ``Path("")`` is the working directory, which a run would fill."""
    if not isinstance(value, (str, Path)) or not str(value).strip():
        raise GF2ConfigError(
            f"{what}={value!r} names no folder; give the run's output folder, e.g. results/my-run."
        )
    return Path(value)


def trainer_settings(config: TrainConfig, **ours: Any) -> dict[str, Any]:
    """The TRL config's values of a run: the run's own (``output_dir``, ``seed``, one log a step, a CPU's
    settings where there is no CUDA, and ``ours``), the config's ``trainer`` mapping over them."""
    import torch

    cpu = (
        {}
        if torch.cuda.is_available()
        else {"use_cpu": True, "bf16": False, "fp16": False, "activation_checkpointing": False}
    )
    return {"output_dir": str(config.output_dir), "seed": config.seed, "logging_steps": 1, **cpu, **ours,
            **config.trainer}  # fmt: skip


# ---------------------------------------------------------------------------- the command line
#: The sections of a run with a flag a field (``--gamma.every 5``), beside TRL's own flags.
SECTIONS: dict[str, type] = {"model": ModelSpec, "task": TaskSpec, "rewards": RewardWeights,
                             "gamma": GammaEvalSpec, "sft": SFTData}  # fmt: skip


def _flag_value(text: str) -> Any:
    """A section flag's value, read as YAML: ``5``, ``0.5``, ``[0, 1, 3]``, ``{r: 8}``, ``adversarial``."""
    import yaml

    from gf2env.config.yaml_files import load_yaml

    try:
        return load_yaml(text)
    except yaml.YAMLError as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not a YAML value ({err})") from None


def _add_section_flags(parser: argparse.ArgumentParser, loop: str) -> None:
    group = parser.add_argument_group(
        "gf2 run (each flag overrides one key of the YAML's sections; values are YAML: 5, [0, 1], {r: 8})"
    )
    group.add_argument("--config", metavar="YAML", help=f"the run, e.g. configs/train/{loop}/smoke.yaml")
    group.add_argument("--model-path", "--model.path", dest="model.path", type=_flag_value, metavar="DIR",
                       help="the model folder (model.path), or a name from `gf2 models list`")  # fmt: skip
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            if section == "model" and f.name == "path":
                continue
            group.add_argument(f"--{section}.{f.name}", dest=f"{section}.{f.name}", type=_flag_value,
                               metavar="VALUE", help=argparse.SUPPRESS if section == "sft" and loop != "sft"
                               else f"{section}: {f.name} (default {f.default!r})" if f.default is not
                               dataclasses.MISSING else f"{section}: {f.name}")  # fmt: skip
    group.add_argument("--curriculum", type=_flag_value, metavar="YAML",
                       help="the curriculum mapping, e.g. '{kind: adaptive, ladder: [0, 1, 3]}'")  # fmt: skip
    group.add_argument("--resume", action="store_true", help="continue from output_dir's last checkpoint-*")
    if loop == "grpo":
        group.add_argument("--tools", type=_flag_value, metavar="BOOL", help="tool mode (true/false)")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The YAML mapping's changes the section flags ask for."""
    changes: dict[str, Any] = {}
    for dest, value in vars(args).items():
        if value is None or dest in ("config", "resume"):
            continue
        section, _, key = dest.partition(".")
        if key:
            changes.setdefault(section, {})[key] = value
        else:
            changes[section] = value
    return changes


def parse_run(
    argv: Sequence[str] | None,
    loop: str,
    trl_class: Any,
    description: str,
    ours: Callable[[TrainConfig], dict[str, Any]] | None = None,
) -> tuple[TrainConfig, Any, bool]:
    """``gf2 train grpo|sft`` through TRL's parser: ``--config`` (the YAML run), a flag for every field of
    ``trl_class`` (GRPOConfig/SFTConfig, as ``trl grpo`` has them: ``--learning_rate 1e-5``, also
    ``--learning-rate``), whose defaults are the run's :func:`trainer_settings` (``ours(run)``, then the
    YAML's ``trainer:``), and a flag for each key of the YAML's sections (``--gamma.every 5``).

    Returns the run (its ``seed`` and ``output_dir`` the TRL config's), the TRL config and ``--resume``.
    """
    from trl import TrlParser

    argv = list(sys.argv[1:] if argv is None else argv)
    ours_parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    _add_section_flags(ours_parser, loop)
    given, _ = ours_parser.parse_known_args(argv)
    parser = TrlParser([trl_class], prog=f"gf2 train {loop}", description=description, allow_abbrev=False)
    _add_section_flags(parser, loop)
    if given.config is None:
        parser.parse_known_args(argv)  # --help, or an error in a flag, ends here
        parser.error(f"--config is required: a YAML run, e.g. configs/train/{loop}/smoke.yaml")
    path = Path(given.config)
    obj = read_config(path, f"training run (configs/train/{loop}/)", TrainConfig)
    for key, value in _overrides(given).items():
        if isinstance(value, dict) and isinstance(obj.get(key), dict) and key != "curriculum":
            obj[key] = {**obj[key], **value}
        else:
            obj[key] = value
    config = train_config(obj, str(path))
    unknown = parser.set_defaults_with_config(**trainer_settings(config, **(ours(config) if ours else {})))
    if unknown:
        names = [f.name for f in dataclasses.fields(trl_class)]
        check_keys({k[2:]: None for k in unknown[::2]}, names, f"{path}: trainer ({trl_class.__name__})")
    trl_args, _, unknown = parser.parse_args_into_dataclasses(argv, return_remaining_strings=True)
    if unknown:
        flags = [option for action in parser._actions for option in action.option_strings]
        close = difflib.get_close_matches(unknown[0].split("=")[0], flags, n=1)
        parser.error(
            f"unrecognized arguments: {' '.join(unknown)}" + (f" (did you mean {close[0]}?)" if close else "")
        )
    config = dataclasses.replace(config, seed=trl_args.seed,
                                 output_dir=output_folder(trl_args.output_dir, "--output_dir"))  # fmt: skip
    return config, trl_args, bool(given.resume)


__all__ = ["SECTIONS", "ModelSpec", "RewardWeights", "SFTData", "TrainConfig", "load_train_config",
           "output_folder", "parse_run", "train_config", "trainer_settings"]  # fmt: skip
