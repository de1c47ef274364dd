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
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gf2env.config.flags import count_arg, int_list, n_arg, name_list, text_arg
from gf2env.config.settings import DEPTH_LADDER, PER_DEPTH
from gf2env.errors import GF2ConfigError
from gf2env.records.record import MAX_RECORDS
from gf2env.task.oracle import SAMPLING_MODES
from gf2env.text.prompt import PROMPT_IDS

if TYPE_CHECKING:
    from gf2env.agents.harness.compare import CompareConfig
    from gf2env.agents.harness.grid import Grid
    from gf2env.agents.llm.agent import LLMSpec
    from gf2env.agents.sb3_agent import SB3Spec

GRID_FLAGS = ("p", "d", "K", "sampling", "depths", "trials", "seed", "n", "episodes")
EPISODES_HELP = (
    "record t at every depth is step g of episode t (one instance walked through depths 0..n-1 as the "
    "env does in reveal mode; n = max depth + 1 unless --n is given), not a fresh instance a depth"
)


def add_grid_flags(parser: argparse.ArgumentParser) -> None:
    """What to evaluate on (a grid, or ``--records``) and where the results go."""
    parser.add_argument("--records", type=text_arg, help="evaluate on this records file instead of a grid")
    parser.add_argument("--depths", type=int_list)
    parser.add_argument("--trials", type=count_arg(1, MAX_RECORDS))
    parser.add_argument("--p", type=int_list, help="payload sizes, e.g. 8,12,16")
    parser.add_argument("--d", type=int_list)
    parser.add_argument("--K", type=int_list)
    parser.add_argument("--sampling", type=lambda s: tuple(s.split(",")), help="e.g. adversarial,diagnostic")
    parser.add_argument("--n", type=n_arg, help="terms an instance, or 'g+1' (default)")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--episodes", action="store_true", default=None, help=EPISODES_HELP)
    parser.add_argument("--level", type=float, help="Jeffreys interval level (default 0.95)")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--no-fit", action="store_true", help="skip the effective-prefix fit")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--executor",
        type=text_arg,
        help="where the cells run: local (default, this process) or ray (Ray tasks)",
    )
    parser.add_argument(
        "--address",
        type=text_arg,
        help="with --executor ray: the cluster, e.g. auto or HOST:6379 (default: a local Ray)",
    )


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

    given = {k: getattr(args, k) for k in GRID_FLAGS if getattr(args, k) is not None}
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
        if episodes and given.get("n") == PER_DEPTH:
            raise GF2ConfigError(
                "--n g+1 gives each depth instances of its own, but --episodes walks one instance through "
                "every depth; drop --n (n = max depth + 1) or pass an integer --n above every depth."
            )
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
    kind = args.executor or run_on.kind
    address = args.address or (run_on.address if kind == run_on.kind else None)
    config = CompareConfig(
        agents=agents,
        grid=grid,
        records=records,
        out=base.out if base else default_out,
        level=args.level if args.level is not None else (base.level if base else 0.95),
        plots=(base.plots if base else True) and not args.no_plots,
        fit=(base.fit if base else True) and not args.no_fit,
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
    from gf2env.agents.harness.compare import default_config, load_config, print_report, run_compare

    if args.config:
        base = load_config(args.config)
    elif not args.agents:  # plain `gf2 compare`: the embedded main job
        base = default_config()
    else:
        base = None
    agents = tuple(args.agents) if args.agents else base.agents if base else ()
    print_report(run_compare(compare_config(args, agents, base), progress=not args.quiet))
    return 0


def llm_spec(args: argparse.Namespace) -> LLMSpec:
    """The LLM that ``gf2 eval``'s flags describe."""
    from gf2env.agents.llm.agent import SERVED_BACKENDS, LLMSpec
    from gf2env.agents.llm.queries import SamplingParams

    if not args.model:
        raise GF2ConfigError(
            f"--agent {args.agent} needs --model (the served name, or a local model folder)."
        )
    if args.agent in SERVED_BACKENDS and not args.base_url:
        raise GF2ConfigError(f"--agent {args.agent} needs --base-url (repeat it for several replicas).")
    engine_args: dict[str, object] = {}
    if args.agent == "vllm-offline":
        engine_args = {"dtype": args.dtype, "seed": 0}
        if args.tensor_parallel_size:
            engine_args["tensor_parallel_size"] = args.tensor_parallel_size
    return LLMSpec(
        model=args.model, backend=args.agent, base_urls=tuple(args.base_url or ()), name=args.label,
        prompt_id=args.prompt, api=args.api, samples=args.samples,
        sampling=SamplingParams(
            args.temperature, args.top_p, args.max_tokens, tuple(args.stop or ()), args.max_model_len,
            args.top_k,
        ),
        concurrency=args.concurrency, timeout=args.timeout, retries=args.retries,
        max_response_bytes=args.max_response_bytes, engine_args=tuple(sorted(engine_args.items())),
        tools=args.tools, max_revisions=args.max_revisions, tool_protocol=args.tool_protocol,
        model_class=args.model_class, isolation=args.sandbox, tool_wall_s=args.tool_wall_s,
        workspace=args.workspace,
        system=None if args.system is None else "" if args.system.lower() == "none" else args.system,
    )  # fmt: skip


def preset_agent(agent: str | LLMSpec | SB3Spec, args: argparse.Namespace) -> str | LLMSpec | SB3Spec:
    """A preset's agent with ``gf2 eval``'s ``--base-url`` and ``--model`` put in for a served model's."""
    from gf2env.agents.llm.agent import SERVED_BACKENDS, LLMSpec

    if not isinstance(agent, LLMSpec) or agent.backend not in SERVED_BACKENDS:
        return agent
    if args.base_url:
        agent = replace(agent, base_urls=tuple(args.base_url))
    if args.model:
        agent = replace(agent, model=args.model)
    return agent


def cmd_eval(args: argparse.Namespace) -> int:
    """An LLM (served or local) or estimators on a grid or records file; LLM queries are logged and resume."""
    from gf2env.agents.harness.compare import load_config, print_report, run_compare
    from gf2env.agents.harness.grid import Grid
    from gf2env.agents.llm.agent import LLM_BACKENDS

    if args.config:
        if args.agent:
            raise GF2ConfigError(f"--config {args.config} names its agents; drop --agent {args.agent}.")
        changed = [k for k, default in args.preset_fixed.items() if getattr(args, k) != default]
        if changed:
            flags = ", ".join("--" + k.replace("_", "-") for k in changed)
            raise GF2ConfigError(
                f"--config {args.config} fixes how its agents are asked; drop {flags} (or copy the "
                "preset and edit it; --base-url, --model and the grid and output flags apply)."
            )
        base = load_config(args.config)
        agents = tuple(preset_agent(a, args) for a in base.agents)
        config = compare_config(args, agents, base)
    elif not args.agent:
        raise GF2ConfigError("gf2 eval needs --agent (e.g. --agent vllm --model NAME) or --config PRESET.")
    elif args.agent in LLM_BACKENDS:
        small = Grid(depths=(0, 1, 3, 7), trials=10)
        config = compare_config(args, (llm_spec(args),), default_grid=small, default_out=Path("results/eval"))
    else:  # estimators: the same run as gf2 compare
        config = compare_config(args, tuple(a for a in args.agent.split(",") if a))
    print_report(run_compare(config, progress=not args.quiet))
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
    from gf2env.agents.llm.openai_server import MAX_RESPONSE_BYTES  # a light module: no httpx until a request

    cmp = sub.add_parser(
        "compare", help="evaluate agents on a grid or records file; results, summary, figures"
    )
    cmp.add_argument(
        "--config", type=text_arg, help="a YAML comparison, e.g. configs/compare/paper-estimators.yaml"
    )
    cmp.add_argument("--agents", type=name_list, help="e.g. A,B,C,D(k=3)")
    cmp.add_argument(
        "--out",
        help="output directory (default: the config's for exactly its run; any other run gets a folder of "
        "its own, the config's or results/compare with a digest of the run, e.g. results/compare-1f3a9c2e)",
    )
    add_grid_flags(cmp)
    cmp.set_defaults(func=cmd_compare)

    ev = sub.add_parser(
        "eval", help="evaluate an LLM (vllm/openai server, offline vLLM, transformers) or estimators"
    )
    ev.add_argument(
        "--agent",
        help="vllm | openai (OpenAI-compatible servers) | vllm-offline | transformers, or estimators: A,B",
    )  # fmt: skip
    ev.add_argument(
        "--config", metavar="PRESET",
        help="a YAML preset whose agents to run (e.g. configs/eval/paper-qwen3-4b-instruct.yaml); "
        "--base-url and --model then replace its served models' own",
    )  # fmt: skip
    ev.add_argument("--model", help="served model name, or a model folder for vllm-offline/transformers")
    ev.add_argument(
        "--base-url", action="append", help="server root, e.g. http://127.0.0.1:8000 (repeatable)"
    )
    ev.add_argument("--label", help="agent name in the results (default: the model)")
    ev.add_argument("--api", choices=("chat", "completions"), default="chat")
    ev.add_argument(
        "--prompt", default="paper", help="prompt id: " + ", ".join(PROMPT_IDS) + " (paper: the paper's own)"
    )
    ev.add_argument("--samples", type=int, default=1, help="answers a record (each its own seed)")
    ev.add_argument("--temperature", type=float, default=0.6)
    ev.add_argument("--top-p", type=float, default=0.95)
    ev.add_argument("--top-k", type=int, help="sample among the k likeliest tokens (default: no limit)")
    ev.add_argument("--max-tokens", type=int, default=1024)
    ev.add_argument(
        "--stop", action="append", metavar="S",
        help="stop string: a completion ends where it first appears (repeatable; part of a query's key)",
    )  # fmt: skip
    ev.add_argument("--concurrency", type=int, default=8, help="requests in flight per server")
    ev.add_argument(
        "--timeout", type=float, default=600.0, help="seconds one request may take in all (a deadline)"
    )
    ev.add_argument("--retries", type=int, default=4)
    ev.add_argument(
        "--max-response-bytes", type=int, default=MAX_RESPONSE_BYTES, metavar="N",
        help="the most bytes of a reply read (default 8 MiB); a longer reply is a failed query",
    )  # fmt: skip
    ev.add_argument("--tools", action="store_true", help="tool mode: the model's Python runs in the sandbox")
    ev.add_argument("--max-revisions", type=int, default=10, help="tool mode: revisions after the first run")
    ev.add_argument(
        "--tool-protocol", choices=("gf2env", "paper"), default="gf2env",
        help="tool mode: gf2env's instructions, feedback and limits, or the paper's (its user-message "
        "instructions, first code block, RECORD/PROMPT, stdlib only, ~500 ms)",
    )  # fmt: skip
    ev.add_argument(
        "--tool-wall-s", type=float, metavar="S",
        help="tool mode: the sandbox's wall clock per run (default: the protocol's, 4 s; the paper's 0.5 s)",
    )  # fmt: skip
    ev.add_argument(
        "--workspace", choices=("fresh", "episode"), default="fresh",
        help="tool mode: every run starts empty (fresh), or files persist across an episode's steps "
        "(episode: walks each instance through the depths; needs --episodes)",
    )  # fmt: skip
    ev.add_argument("--model-class", help="the model's class in the paper's tool-usage table")
    ev.add_argument(
        "--sandbox", choices=("bwrap", "UNSAFE-rlimits-only"), default="bwrap",
        help="tool mode isolation; UNSAFE-rlimits-only runs model code without namespaces (opt-in)",
    )  # fmt: skip
    ev.add_argument(
        "--max-model-len", type=int, metavar="N",
        help="the context the model runs with (a server's --max-model-len; vllm-offline: the engine's): "
        "max tokens are cut to what a prompt leaves, a full context ends cut off instead of refused",
    )  # fmt: skip
    ev.add_argument(
        "--system", metavar="TEXT|none",
        help="the system message instead of the prompt's; 'none' sends none (a template with no system role)",
    )  # fmt: skip
    ev.add_argument("--dtype", default="auto", help="vllm-offline: weights dtype (auto, bfloat16, float32)")
    ev.add_argument("--tensor-parallel-size", type=int, help="vllm-offline: GPUs a model")
    ev.add_argument(
        "--out",
        help="output directory (default: results/eval-DIGEST, the run's own: the same command finds it "
        "again); its queries.jsonl resumes",
    )
    add_grid_flags(ev)
    kept = {"help", "agent", "config", "model", "base_url", "out", *GRID_FLAGS}
    grid = {a.dest for a in cmp._actions}  # the grid and output flags, shared with compare
    preset_fixed = {a.dest: a.default for a in ev._actions if a.dest not in kept | grid}
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


__all__ = ["GRID_FLAGS", "add_grid_flags", "compare_config", "llm_spec", "preset_agent", "register"]
