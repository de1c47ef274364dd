"""Each config option declared once: flags built from dataclass fields, one YAML loader, one n = g+1 rule."""

import argparse
from dataclasses import dataclass, field

import pytest

from gf2env.config.flags import add_flags, flag_values
from gf2env.config.options import key_names, option, settings_of
from gf2env.config.settings import check_episode_terms
from gf2env.config.yaml_files import check_keys, config_keys, dataclass_from_mapping
from gf2env.errors import GF2ConfigError, MissingExtraError
from tests.paths import REPO


@dataclass(frozen=True)
class Inner:
    alpha: float = 0.5
    beta: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outer:
    model: str = field(metadata=option(help="the model"))
    count: int = 3
    name: str | None = field(default=None, metadata=option(flag_aliases=("--label",)))
    urls: tuple[str, ...] = field(
        default=(), metadata=option(key="url", action="append", key_aliases=("urls",))
    )
    plots: bool = field(default=True, metadata=option(negate=True))
    verbose: bool = False
    inner: Inner = field(default_factory=Inner, metadata=option(nested={"beta": option(action="append")}))
    hidden: int = field(default=0, metadata=option(flag=False))


def parser_of(**kwargs):
    parser = argparse.ArgumentParser(exit_on_error=False)
    flags = add_flags(parser, Outer, **kwargs)
    return parser, flags


def test_flags_take_their_defaults_from_the_dataclass():
    parser, flags = parser_of()
    assert flags == {"model": "--model", "count": "--count", "name": "--name", "urls": "--url",
                     "plots": "--no-plots", "verbose": "--verbose", "alpha": "--alpha",
                     "beta": "--beta"}  # fmt: skip
    args = parser.parse_args([])
    assert (args.count, args.plots, args.verbose, args.alpha, args.urls) == (3, True, False, 0.5, None)
    args = parser.parse_args(
        ["--label", "x", "--url", "a", "--url", "b", "--no-plots", "--alpha", "2", "--beta", "s"]
    )
    values = flag_values(args, Outer)
    assert values["name"] == "x" and values["urls"] == ["a", "b"] and values["plots"] is False
    assert values["inner"] == {"alpha": 2.0, "beta": ["s"]}
    with pytest.raises(argparse.ArgumentError):
        parser.parse_args(["--count", "many"])  # int from the field's type


def test_override_flags_default_to_none_and_say_what_they_override():
    parser, _ = parser_of(names=["count", "plots"], overrides=True, helps={"count": "override count"})
    assert vars(parser.parse_args([])) == {"count": None, "plots": None}
    assert "override count" in parser.format_help()
    assert flag_values(parser.parse_args(["--count", "4"]), Outer, given_only=True) == {"count": 4}


def test_yaml_keys_are_the_flags_keys_with_older_spellings_kept():
    assert key_names(Outer)["urls"] == "url"
    obj = {"model": "m", "urls": ["a"], "alpha": 1.0, "beta": ["x"]}
    spec = dataclass_from_mapping(Outer, obj, "outer", convert={"url": tuple, "beta": tuple})
    assert spec.urls == ("a",) and spec.inner == Inner(1.0, ("x",))
    with pytest.raises(GF2ConfigError, match="urls and url are the same setting"):
        dataclass_from_mapping(Outer, {"model": "m", "url": ["a"], "urls": ["b"]}, "outer")
    assert config_keys(Outer) >= {"model", "url", "urls", "alpha", "beta", "hidden"}


def test_an_unknown_key_names_the_closest_and_every_valid_key():
    with pytest.raises(
        GF2ConfigError, match=r"unknown keys \['cuont'\]; did you mean 'count' for 'cuont'\? the keys"
    ):
        dataclass_from_mapping(Outer, {"model": "m", "cuont": 2}, "outer")
    with pytest.raises(GF2ConfigError) as err:
        check_keys({"zzz": 1}, {"a", "b"}, "x")
    assert "did you mean" not in str(err.value) and "the keys are ['a', 'b']" in str(err.value)


def test_the_n_rule_is_one_sentence_naming_what_the_user_typed():
    check_episode_terms(True, 5)
    check_episode_terms(False, "g+1")
    with pytest.raises(
        GF2ConfigError, match=r"^--n g\+1 gives each depth instances of its own, but --episodes"
    ):
        check_episode_terms(True, "g+1")
    with pytest.raises(GF2ConfigError, match=r"^grid: n: g\+1 gives .* episodes: true walks"):
        check_episode_terms(True, "g+1", "n:", "episodes: true", where="grid: ")


def test_gf2_eval_flags_are_llmspecs_fields_with_its_defaults():
    from gf2env.agents.llm.agent import LLMSpec
    from gf2env.cli import build_parser

    args = build_parser().parse_args(["eval"])
    for s in settings_of(LLMSpec):
        if s.option.flag and hasattr(args, s.name) and s.option.action != "append" and s.name != "model":
            default = s.default if s.name != "backend" else None
            assert getattr(args, s.name) == default, s.name
    old = ["--agent", "vllm", "--label", "l", "--sandbox", "UNSAFE-rlimits-only", "--base-url", "http://x",
           "--prompt", "paper", "--top-p", "0.9", "--stop", "S", "--max-revisions", "3"]  # fmt: skip
    args = build_parser().parse_args(["eval", *old])
    assert (args.backend, args.name, args.isolation, args.base_urls, args.prompt_id, args.top_p) == (
        "vllm",
        "l",
        "UNSAFE-rlimits-only",
        ["http://x"],
        "paper",
        0.9,
    )


def test_every_shipped_comparison_and_eval_preset_loads():
    from gf2env.agents.harness.compare import load_config

    paths = sorted((REPO / "configs").glob("compare/*.yaml")) + sorted((REPO / "configs").glob("eval/*.yaml"))
    assert paths
    for path in paths:
        try:
            load_config(path)
        except MissingExtraError:  # a local backend whose extra is not installed here
            continue


def test_every_shipped_training_run_loads_and_its_keys_are_the_loaders():
    from gf2env.config.yaml_files import check_config_keys
    from gf2env.train.config import load_train_config
    from gf2env.train.sb3 import SB3Config, load_sb3_config

    for path in sorted((REPO / "configs/train/sb3").glob("*.yaml")):
        load_sb3_config(path)
    for path in sorted((REPO / "configs/train").glob("[gs][rf]*/*.yaml")):
        load_train_config(path)
    with pytest.raises(GF2ConfigError, match=r"did you mean 'num_envs' for 'num_env'\?"):
        check_config_keys({"env": {}, "num_env": 2}, SB3Config, "run.yaml", extra=("ppo",), skip=("hyper",))
