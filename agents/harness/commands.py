"""``gf2 compare``, ``gf2 eval`` and ``gf2 demo``: their flags and bodies.

``compare`` and ``eval`` share one set of grid and output flags (:func:`add_grid_flags`); ``eval``
is a comparison of one LLM (or of estimators) whose defaults suit an LLM: a small grid and a
``results/eval-DIGEST`` folder of its own. Heavy imports (the agents) happen when a command runs, not
when ``gf2`` starts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from contextlib import ExitStack
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gf2env.config.flags import add_flags, count_arg, flag_values, text_arg
from gf2env.config.settings import DEPTH_LADDER, PER_DEPTH, check_episode_terms
from gf2env.errors import GF2ConfigError
from gf2env.run_record import run_record
from gf2env.task.oracle import SAMPLING_MODES

if TYPE_CHECKING:
    from gf2env.agents.harness.compare import CompareConfig, CompareReport
    from gf2env.agents.harness.grid import Grid
    from gf2env.agents.llm.agent import LLMSpec
    from gf2env.agents.sb3_agent import SB3Spec


def add_grid_flags(parser: argparse.ArgumentParser) -> None:
    """What to evaluate on (a grid, or ``--records``) and where the results go: the flags of
    :class:`~gf2env.agents.harness.grid.Grid`'s and :class:`~gf2env.agents.harness.compare.CompareConfig`'s
    fields, each overriding a config's value when given."""
    from gf2env.agents.harness.compare import CompareConfig
    from gf2env.agents.harness.grid import Grid

    add_flags(parser, CompareConfig, ["records"], overrides=True)
    add_flags(parser, Grid, overrides=True)
    add_flags(parser, CompareConfig, ["level", "plots", "fit"], overrides=True)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_flags(parser, CompareConfig, ["kind", "address"], overrides=True)


def compare_config(
    args: argparse.Namespace,
    agents: tuple[str | LLMSpec | SB3Spec, ...],
    base: CompareConfig | None = None,
    default_grid: Grid | None = None,
    default_out: Path = Path("results/compare"),
) -> CompareConfig:
    """The comparison the grid flags describe, over ``base`` (a config file's) or ``default_grid``."""
    from gf2env.agents.harness.compare import CompareConfig
    from gf2env.agents.harness.executors import ExecutorSpec
    from gf2env.agents.harness.grid import Grid

    given = flag_values(args, Grid, given_only=True)  # the grid flags given, by Grid's field names
    records = Path(args.records) if args.records else None
    if records is None and base is not None and base.records is not None:
        if given:
            raise GF2ConfigError(
                f"The config evaluates the records file {base.records}; drop {sorted(given)} "
                "(or give a grid: in the config instead of records:)."
            )
        records = base.records
    grid = base.grid if base and not records else None
    if records is None and (grid is None or given):
        start = grid or default_grid or Grid(depths=DEPTH_LADDER, trials=200)
        n = given.get("n", PER_DEPTH if start.n is None else start.n)
        episodes = given.get("episodes", start.episodes)
        check_episode_terms(episodes, given.get("n"))
        grid = Grid(
            episodes=episodes,
            depths=given.get("depths", start.depths),
            trials=given.get("trials", start.trials),
            p=given.get("p", start.p),
            d=given.get("d", start.d),
            K=given.get("K", start.K),
            sampling=given.get("sampling", start.sampling),
            seed=given.get("seed", start.seed),
            n=None if n == PER_DEPTH else n,
        )
    elif records is not None and given:
        raise GF2ConfigError(f"--records evaluates the file's own settings; drop {sorted(given)}.")
    run_on = base.executor if base else ExecutorSpec()
    kind = args.kind or run_on.kind
    address = args.address or (run_on.address if kind == run_on.kind else None)
    config = CompareConfig(
        agents=agents,
        grid=grid,
        records=records,
        out=base.out if base else default_out,
        level=args.level if args.level is not None else (base.level if base else 0.95),
        plots=(base.plots if base else True) and args.plots is not False,
        fit=(base.fit if base else True) and args.fit is not False,
        executor=ExecutorSpec(kind, address),
    )
    if args.out:
        return replace(config, out=Path(args.out))
    if base is not None and run_identity(config) == run_identity(base):
        return config  # exactly the config's run: its own out
    return replace(config, out=config.out.with_name(f"{config.out.name}-{run_digest(config)}"))


def run_identity(config: CompareConfig) -> str:
    """What a comparison's numbers depend on, as canonical JSON: its agents (an LLM without where
    and how hard it is asked: base URLs, concurrency, timeout, retries), grid or records file, and
    interval level. Two runs write the same files exactly when this is the same."""
    transport = {"base_urls", "concurrency", "timeout", "retries", "max_response_bytes"}

    def agent(a: str | LLMSpec | SB3Spec) -> object:
        if isinstance(a, str):
            return a
        fields = {k: v for k, v in asdict(a).items() if k not in transport}
        return {type(a).__name__: fields}

    return json.dumps(
        {
            "agents": [agent(a) for a in config.agents],
            "grid": asdict(config.grid) if config.grid is not None else None,
            "records": str(config.records.resolve()) if config.records is not None else None,
            "level": config.level,
        },
        sort_keys=True,
        default=str,
    )


def run_digest(config: CompareConfig) -> str:
    """Eight hex digits of :func:`run_identity`: the suffix of the folder a run gets without ``--out``
    when it is not exactly its config's (e.g. ``results/compare-1f3a9c2e``): the same command
    finds its own folder again (an LLM's queries resume there), another never lands on it."""
    return hashlib.sha256(run_identity(config).encode()).hexdigest()[:8]


def cmd_compare(args: argparse.Namespace) -> int:
    from gf2env.agents.harness.compare import default_config, load_config, print_report

    if args.config:
        base = load_config(args.config)
    elif not args.agents:  # plain `gf2 compare`: the embedded main job
        base = default_config()
    else:
        base = None
    agents = tuple(args.agents) if args.agents else base.agents if base else ()
    print_report(run_recorded("compare", compare_config(args, agents, base), progress=not args.quiet))
    return 0


def run_recorded(command: str, config: CompareConfig, progress: bool) -> CompareReport:
    """:func:`~gf2env.agents.harness.compare.run_compare` with its ``run.json`` in ``config.out``
    (:func:`gf2env.run_record.run_record`: the config, versions, host, and how the run ended)."""
    from gf2env.agents.harness.compare import make_out_dir, run_compare

    seeds = {"evaluate": config.grid.seed if config.grid is not None else 0}
    with ExitStack() as stack:
        try:
            stack.enter_context(run_record(config.out, command, config, seeds))
        except (OSError, GF2ConfigError):
            make_out_dir(config.out)  # says plainly why --out cannot be a folder
            raise
        return run_compare(config, progress=progress)


def llm_spec(args: argparse.Namespace) -> LLMSpec:
    """The LLM that ``gf2 eval``'s flags describe (the flags of :class:`LLMSpec`'s fields)."""
    from gf2env.agents.llm.agent import SERVED_BACKENDS, LLMSpec
    from gf2env.agents.llm.queries import SamplingParams

    if not args.model:
        raise GF2ConfigError(
            f"--agent {args.backend} needs --model (the served name, or a local model folder)."
        )
    if args.backend in SERVED_BACKENDS and not args.base_urls:
        raise GF2ConfigError(f"--agent {args.backend} needs --base-url (repeat it for several replicas).")
    engine_args: dict[str, object] = {}
    if args.backend == "vllm-offline":
        engine_args = {"dtype": args.dtype, "seed": 0}
        if args.tensor_parallel_size:
            engine_args["tensor_parallel_size"] = args.tensor_parallel_size
    values = flag_values(args, LLMSpec)
    sampling = values.pop("sampling")
    sampling["stop"] = tuple(sampling["stop"] or ())
    system = args.system
    values.update(
        base_urls=tuple(args.base_urls or ()),
        sampling=SamplingParams(**sampling),
        engine_args=tuple(sorted(engine_args.items())),
        system=None if system is None else "" if system.lower() == "none" else system,
    )
    return LLMSpec(**values)


def preset_agent(agent: str | LLMSpec | SB3Spec, args: argparse.Namespace) -> str | LLMSpec | SB3Spec:
    """A preset's agent with ``gf2 eval``'s ``--base-url`` and ``--model`` put in for a served model's."""
    from gf2env.agents.llm.agent import SERVED_BACKENDS, LLMSpec

    if not isinstance(agent, LLMSpec) or agent.backend not in SERVED_BACKENDS:
        return agent
    if args.base_urls:
        agent = replace(agent, base_urls=tuple(args.base_urls))
    if args.model:
        agent = replace(agent, model=args.model)
    return agent


def cmd_eval(args: argparse.Namespace) -> int:
    """An LLM (served or local) or estimators on a grid or records file; LLM queries are logged and resume."""
    from gf2env.agents.harness.compare import load_config, print_report
    from gf2env.agents.harness.grid import Grid
    from gf2env.agents.llm.agent import LLM_BACKENDS

    if args.config:
        if args.backend:
            raise GF2ConfigError(f"--config {args.config} names its agents; drop --agent {args.backend}.")
        changed = [flag for k, (flag, default) in args.preset_fixed.items() if getattr(args, k) != default]
        if changed:
            flags = ", ".join(changed)
            raise GF2ConfigError(
                f"--config {args.config} fixes how its agents are asked; drop {flags} (or copy the "
                "preset and edit it; --base-url, --model and the grid and output flags apply)."
            )
        base = load_config(args.config)
        agents = tuple(preset_agent(a, args) for a in base.agents)
        config = compare_config(args, agents, base)
    elif not args.backend:
        raise GF2ConfigError("gf2 eval needs --agent (e.g. --agent vllm --model NAME) or --config PRESET.")
    elif args.backend in LLM_BACKENDS:
        small = Grid(depths=(0, 1, 3, 7), trials=10)
        config = compare_config(args, (llm_spec(args),), default_grid=small, default_out=Path("results/eval"))
    else:  # estimators: the same run as gf2 compare
        config = compare_config(args, tuple(a for a in args.backend.split(",") if a))
    print_report(run_recorded("eval", config, progress=not args.quiet))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Play seeded episodes with estimators A (diligent) and C (history only); print per depth."""
    import gymnasium as gym
    import numpy as np
    from tqdm import tqdm

    from gf2env.agents.estimator_policy import EstimatorPolicy
    from gf2env.envs.env import GF2ReconEnv
    from gf2env.records.record import check_seed

    check_seed(args.seed, "--seed")
    env = gym.make("GF2Recon-v1", p=args.p, d=args.d, n=args.n, K=args.K, sampling=args.sampling)
    unwrapped = env.unwrapped
    assert isinstance(unwrapped, GF2ReconEnv)
    base = unwrapped.config
    agents = {"A (diligent)": EstimatorPolicy("A", env), "C (history)": EstimatorPolicy("C", env)}
    rewards = {name: np.zeros((args.episodes, base.n)) for name in agents}
    for name, agent in agents.items():
        for ep in tqdm(range(args.episodes), desc=name, unit="ep", disable=args.quiet):
            obs, info = env.reset(seed=args.seed + ep)
            terminated = False
            while not terminated:
                obs, reward, terminated, _, info = env.step(agent.act(obs))
                rewards[name][ep, info["depth"]] = reward
    print(
        f"GF2Recon-v1 p={base.p} d={base.d} n={base.n} K={base.K} sampling={base.sampling} "
        f"(w={base.weight if base.sampling == 'adversarial' else '-'}), "
        f"{args.episodes} episodes, seed {args.seed}"
    )
    print(f"trivial baseline 1/C(p, d-1) = {base.trivial_baseline:.4f}")
    print(f"{'depth':>5}  " + "  ".join(f"{name:>12}" for name in agents))
    for g in range(base.n):
        print(f"{g:>5}  " + "  ".join(f"{rewards[name][:, g].mean():>12.3f}" for name in agents))
    print(f"{'all':>5}  " + "  ".join(f"{rewards[name].mean():>12.3f}" for name in agents))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """``gf2 compare``, ``gf2 eval`` and ``gf2 demo``."""
    from gf2env.agents.harness.compare import CompareConfig
    from gf2env.agents.llm.agent import LLMSpec

    cmp = sub.add_parser(
        "compare", help="evaluate agents on a grid or records file; results, summary, figures"
    )
    cmp.add_argument(
        "--config", type=text_arg, help="a YAML comparison, e.g. configs/compare/paper-estimators.yaml"
    )
    add_flags(cmp, CompareConfig, ["agents"], overrides=True)
    add_flags(
        cmp, CompareConfig, ["out"], overrides=True,
        helps={"out": "output directory (default: the config's for exactly its run; any other run gets a "
               "folder of its own, the config's or results/compare with a digest of the run, e.g. "
               "results/compare-1f3a9c2e)"},
    )  # fmt: skip
    add_grid_flags(cmp)
    cmp.set_defaults(func=cmd_compare)

    ev = sub.add_parser(
        "eval", help="evaluate an LLM (vllm/openai server, offline vLLM, transformers) or estimators"
    )
    add_flags(
        ev, LLMSpec, ["backend"], overrides=True,
        helps={"backend": "vllm | openai (OpenAI-compatible servers) | vllm-offline | transformers, "
               "or estimators: A,B"},
    )  # fmt: skip
    ev.add_argument(
        "--config", metavar="PRESET",
        help="a YAML preset whose agents to run (e.g. configs/eval/paper-qwen3-4b-instruct.yaml); "
        "--base-url and --model then replace its served models' own",
    )  # fmt: skip
    flags = add_flags(ev, LLMSpec, skip=("backend",))
    ev.add_argument("--dtype", default="auto", help="vllm-offline: weights dtype (auto, bfloat16, float32)")
    ev.add_argument("--tensor-parallel-size", type=int, help="vllm-offline: GPUs a model")
    add_flags(
        ev, CompareConfig, ["out"], overrides=True,
        helps={"out": "output directory (default: results/eval-DIGEST, the run's own: the same command "
               "finds it again); its queries.jsonl resumes"},
    )  # fmt: skip
    add_grid_flags(ev)
    # What a preset fixes: every flag of how its agents are asked, but where they are served.
    fixed = {k: v for k, v in flags.items() if k not in ("model", "base_urls")}
    fixed.update(dtype="--dtype", tensor_parallel_size="--tensor-parallel-size")
    actions = {a.dest: a for a in ev._actions}  # named as typed: the flag and its older spellings
    preset_fixed = {k: ("/".join(actions[k].option_strings), actions[k].default) for k in fixed}
    ev.set_defaults(func=cmd_eval, preset_fixed=preset_fixed)

    demo = sub.add_parser("demo", help="seeded report: reward per depth against the baseline")
    demo.add_argument("--episodes", type=count_arg(1, 1_000_000), default=20)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--p", type=int, default=12)
    demo.add_argument("--d", type=int, default=4)
    demo.add_argument("--n", type=int, default=32)
    demo.add_argument("--K", type=int, default=32)
    demo.add_argument("--sampling", choices=SAMPLING_MODES, default="adversarial")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    demo.set_defaults(func=cmd_demo)


__all__ = ["add_grid_flags", "compare_config", "llm_spec", "preset_agent", "register", "run_recorded"]
