"""The ``gf2`` command line.

``gf2 generate`` writes datasets; ``gf2 compare`` evaluates agents on a grid or a records file and
writes results, a summary with intervals and figures; ``gf2 plot`` redraws figures from a summary;
``gf2 fit`` fits the effective-prefix model (the paper's Table 1) to results; ``gf2 demo`` plays a
seeded report.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from gf2env.errors import GF2ConfigError
from gf2env.oracle import TaskConfig
from gf2env.records import Record, generate_records


@dataclass(frozen=True)
class DatasetPreset:
    """A named dataset grid. ``n=None`` means each depth's instances have ``g + 1`` terms."""

    depths: tuple[int, ...]
    trials: int
    n: int | None
    p: int = 12
    d: int = 4
    K: int = 32
    sampling: str = "adversarial"


PRESETS = {
    # The paper's estimator / small-depth LLM grid: n = 32 address bits at every depth.
    "paper-small": DatasetPreset(depths=(0, 1, 3, 7, 15, 31), trials=500, n=32),
    # The paper's large-depth LLM files: n = g + 1 address bits.
    "paper-large": DatasetPreset(depths=(63, 127), trials=10, n=None),
}


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of ints") from err


PER_DEPTH = "g+1"  # --n g+1: each depth's instances have g + 1 terms


def _n_arg(text: str) -> int | str:
    if text == PER_DEPTH:
        return PER_DEPTH
    try:
        return int(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"--n {text!r} is neither an integer nor 'g+1'") from err


def cmd_generate(args: argparse.Namespace) -> int:
    preset = PRESETS[args.preset] if args.preset else DatasetPreset(depths=(0,), trials=100, n=32)
    depths = args.depths if args.depths is not None else preset.depths
    trials = args.trials if args.trials is not None else preset.trials
    n = preset.n if args.n is None else (None if args.n == PER_DEPTH else args.n)
    config = TaskConfig(
        p=args.p or preset.p,
        d=args.d or preset.d,
        n=max(depths) + 1 if n is None else n,
        K=args.K or preset.K,
        sampling=args.sampling or preset.sampling,
        w=args.w,
    )
    too_deep = [g for g in depths if n is not None and not 0 <= g < n]
    if too_deep:
        raise GF2ConfigError(
            f"depths {too_deep} need more than n={n} terms (or are negative); pass --n g+1 or a larger --n."
        )
    records = generate_records(
        config, depths, trials, args.seed, n_for_depth=(lambda g: g + 1) if n is None else None
    )
    bar = tqdm(records, total=len(depths) * trials, desc="records", unit="rec", disable=args.quiet)
    count = 0
    with open(args.out, "w") as fh:
        if args.format == "jsonl":
            for record in bar:
                fh.write(_dumps(record) + "\n")
                count += 1
        else:
            fh.write("[")
            for record in bar:
                fh.write(("," if count else "") + _dumps(record))
                count += 1
            fh.write("]\n")
    print(f"wrote {count} records to {args.out}", file=sys.stderr)
    return 0


def _dumps(record: Record) -> str:
    return json.dumps(record.to_json())


def cmd_demo(args: argparse.Namespace) -> int:
    """Play seeded episodes with estimators A (diligent) and C (history only); print per depth."""
    import gymnasium as gym

    from agents import EstimatorPolicy

    env = gym.make("GF2Recon-v0", p=args.p, d=args.d, n=args.n, K=args.K, sampling=args.sampling)
    base = env.unwrapped.config
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
        f"GF2Recon-v0 p={base.p} d={base.d} n={base.n} K={base.K} sampling={base.sampling} "
        f"(w={base.weight if base.sampling == 'adversarial' else '-'}), "
        f"{args.episodes} episodes, seed {args.seed}"
    )
    print(f"trivial baseline 1/C(p, d-1) = {base.trivial_baseline:.4f}")
    print(f"{'depth':>5}  " + "  ".join(f"{name:>12}" for name in agents))
    for g in range(base.n):
        print(f"{g:>5}  " + "  ".join(f"{rewards[name][:, g].mean():>12.3f}" for name in agents))
    print(f"{'all':>5}  " + "  ".join(f"{rewards[name].mean():>12.3f}" for name in agents))
    return 0


def _compare_config(args: argparse.Namespace, default_grid=None):  # -> agents.harness.compare.CompareConfig
    from pathlib import Path

    from agents.harness.compare import CompareConfig, default_config, load_config
    from agents.harness.grid import Grid

    grid_flags = {
        "p": args.p,
        "d": args.d,
        "K": args.K,
        "sampling": args.sampling,
        "depths": args.depths,
        "trials": args.trials,
        "seed": args.seed,
        "n": args.n,
    }
    given = {k: v for k, v in grid_flags.items() if v is not None}
    if args.config:
        config = load_config(args.config)
    elif not args.agents and default_grid is None:  # plain `gf2 compare`: the embedded main job
        config = default_config()
    else:
        config = None
    agents = tuple(args.agents) if args.agents else (config.agents if config else ("A", "B", "C", "D"))
    records = Path(args.records) if args.records else None
    grid = config.grid if config and not records else None
    if records is None and (grid is None or given):
        base = grid or default_grid or Grid(depths=(0, 1, 3, 7, 15, 31), trials=200)
        n = given.get("n", PER_DEPTH if base.n is None else base.n)
        grid = Grid(
            depths=given.get("depths", base.depths),
            trials=given.get("trials", base.trials),
            p=given.get("p", base.p),
            d=given.get("d", base.d),
            K=given.get("K", base.K),
            sampling=given.get("sampling", base.sampling),
            seed=given.get("seed", base.seed),
            n=None if n == PER_DEPTH else n,
        )
    elif records is not None and given:
        raise GF2ConfigError(f"--records evaluates the file's own settings; drop {sorted(given)}.")
    return CompareConfig(
        agents=agents,
        grid=grid,
        records=records,
        out=Path(args.out) if args.out else (config.out if config else Path("results/compare")),
        level=args.level if args.level is not None else (config.level if config else 0.95),
        plots=(config.plots if config else True) and not args.no_plots,
        fit=(config.fit if config else True) and not getattr(args, "no_fit", False),
    )


def cmd_compare(args: argparse.Namespace) -> int:
    from agents.harness.compare import print_report, run_compare

    report = run_compare(_compare_config(args), progress=not args.quiet)
    print_report(report)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """An LLM (served or local) or estimators on a grid or records file; LLM queries are logged and resume."""
    from agents.harness.compare import print_report, run_compare
    from agents.harness.grid import Grid
    from agents.llm.agent import LLM_BACKENDS, SERVED_BACKENDS, LLMSpec
    from agents.llm.backends import SamplingParams

    args.config, args.level = None, None
    if args.agent not in LLM_BACKENDS:  # estimators: the same run as gf2 compare
        args.agents = [a for a in args.agent.split(",") if a]
        return cmd_compare(args)
    if not args.model:
        raise GF2ConfigError(
            f"--agent {args.agent} needs --model (the served name, or a local model folder)."
        )
    if args.agent in SERVED_BACKENDS and not args.base_url:
        raise GF2ConfigError(f"--agent {args.agent} needs --base-url (repeat it for several replicas).")
    engine_args = {}
    if args.agent == "vllm-offline":
        engine_args = {"max_model_len": args.max_model_len, "dtype": args.dtype, "seed": 0}
        if args.tensor_parallel_size:
            engine_args["tensor_parallel_size"] = args.tensor_parallel_size
    args.agents = [
        LLMSpec(
            model=args.model, backend=args.agent, base_urls=tuple(args.base_url or ()), name=args.label,
            prompt_id=args.prompt, api=args.api, samples=args.samples,
            sampling=SamplingParams(args.temperature, args.top_p, args.max_tokens),
            concurrency=args.concurrency, timeout=args.timeout, retries=args.retries,
            engine_args=tuple(sorted(engine_args.items())),
            tools=args.tools, max_revisions=args.max_revisions, isolation=args.sandbox,
        )
    ]  # fmt: skip
    if args.out is None:
        args.out = "results/eval"
    config = _compare_config(args, default_grid=Grid(depths=(0, 1, 3, 7), trials=10))
    print_report(run_compare(config, progress=not args.quiet))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    """``gf2 train grpo|sft ARGS``: the training scripts' own ``main``."""
    import importlib

    try:
        script = importlib.import_module(f"train.{args.loop}")
    except ImportError as err:
        raise GF2ConfigError(
            f"gf2 train needs the training extra ({err}); pip install torch==2.13.0, then -e '.[train]'."
        ) from None
    return int(script.main(args.rest))


def cmd_plot(args: argparse.Namespace) -> int:
    from pathlib import Path

    from gf2env.report.plots import write_figures
    from gf2env.report.results import read_results_csv, read_summary_csv, summarize

    path = Path(args.table)
    header = path.read_text().split("\n", 1)[0].split(",") if path.exists() else []
    if not path.exists():
        raise GF2ConfigError(f"{path} does not exist; pass a summary.csv or results.csv from gf2 compare.")
    summary = read_summary_csv(path) if "gamma_mean" in header else summarize(read_results_csv(path))
    out = Path(args.out) if args.out else path.parent
    for fig in write_figures(summary, out):
        print(f"wrote {fig}")
    return 0


def cmd_fit(args: argparse.Namespace) -> int:
    from pathlib import Path

    from agents.harness.compare import fit_agents
    from gf2env.report.fit import DCurve, write_fits_csv
    from gf2env.report.results import read_results_csv

    path = Path(args.results)
    if not path.exists():
        raise GF2ConfigError(f"{path} does not exist; pass a results.csv from gf2 compare.")
    rows = read_results_csv(path)
    settings = sorted({(r["p"], r["d"], r["K"], r["sampling"]) for r in rows})
    if len(settings) != 1:
        raise GF2ConfigError(
            f"{path} mixes settings (p, d, K, sampling) = {settings}; fit one setting at a time."
        )
    curve_path = Path(args.curve) if args.curve else None
    curve = DCurve.read_csv(curve_path) if curve_path is not None and curve_path.exists() else None
    if curve is None and curve_path is not None:  # simulate it once here, to cache it
        from agents.harness.evaluate import simulate_d_curve
        from gf2env.oracle import TaskConfig

        p, d, K, sampling = settings[0]
        depths = sorted({r["g"] for r in rows})
        mode = sampling if sampling != "unknown" else "adversarial"
        config = TaskConfig(p=p, d=d, K=K, n=max(depths) + 1, sampling=mode)
        curve = simulate_d_curve(config, depths, args.curve_trials, seed=args.seed, progress=not args.quiet)
        curve.write_csv(curve_path)
        print(f"wrote the D curve to {curve_path}")
    fits, notes = fit_agents(
        rows, args.agent, args.value, curve, args.curve_trials, args.seed, progress=not args.quiet
    )
    for fit in fits:
        print(fit.format_table())
        print()
    for line in notes:
        print(line)
    if not fits:
        raise GF2ConfigError(f"No agent of {path} could be fitted (see the notes above).")
    out = Path(args.out) if args.out else path.parent / "fit.csv"
    write_fits_csv(out, fits)
    print(f"wrote {out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gf2", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    gen = sub.add_parser("generate", help="write a dataset of records in the paper's JSON format")
    gen.add_argument("--preset", choices=sorted(PRESETS), help="a paper grid (overridable below)")
    gen.add_argument("--depths", type=_int_list, help="comma-separated depths, e.g. 0,1,3,7")
    gen.add_argument("--trials", type=int, help="records a depth")
    gen.add_argument("--n", type=_n_arg, help="terms an instance, or 'g+1' (default: the preset's)")
    gen.add_argument("--p", type=int)
    gen.add_argument("--d", type=int)
    gen.add_argument("--K", type=int)
    gen.add_argument("--sampling", choices=("adversarial", "diagnostic", "uniform"))
    gen.add_argument("--w", type=int, help="adversarial payload weight (default w*)")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--format", choices=("json", "jsonl"), default="json")
    gen.add_argument("--out", required=True, help="output file")
    gen.add_argument("--quiet", action="store_true", help="no progress bar")
    gen.set_defaults(func=cmd_generate)

    cmp = sub.add_parser(
        "compare", help="evaluate agents on a grid or records file; results, summary, figures"
    )
    cmp.add_argument("--config", help="a YAML comparison, e.g. configs/paper-estimators.yaml")
    cmp.add_argument("--agents", type=lambda s: [a for a in s.split(",") if a], help="e.g. A,B,C,D(k=3)")
    cmp.add_argument("--records", help="evaluate on this records file instead of a grid")
    cmp.add_argument("--depths", type=_int_list)
    cmp.add_argument("--trials", type=int)
    cmp.add_argument("--p", type=_int_list, help="payload sizes, e.g. 8,12,16")
    cmp.add_argument("--d", type=_int_list)
    cmp.add_argument("--K", type=_int_list)
    cmp.add_argument("--sampling", type=lambda s: tuple(s.split(",")), help="e.g. adversarial,diagnostic")
    cmp.add_argument("--n", type=_n_arg, help="terms an instance, or 'g+1' (default)")
    cmp.add_argument("--seed", type=int)
    cmp.add_argument("--level", type=float, help="Jeffreys interval level (default 0.95)")
    cmp.add_argument("--out", help="output directory (default: the config's, else results/compare)")
    cmp.add_argument("--no-plots", action="store_true")
    cmp.add_argument("--no-fit", action="store_true", help="skip the effective-prefix fit")
    cmp.add_argument("--quiet", action="store_true", help="no progress bar")
    cmp.set_defaults(func=cmd_compare)

    ev = sub.add_parser(
        "eval", help="evaluate an LLM (vllm/openai server, offline vLLM, transformers) or estimators"
    )
    ev.add_argument(
        "--agent", required=True,
        help="vllm | openai (OpenAI-compatible servers) | vllm-offline | transformers, or estimators: A,B",
    )  # fmt: skip
    ev.add_argument("--model", help="served model name, or a model folder for vllm-offline/transformers")
    ev.add_argument(
        "--base-url", action="append", help="server root, e.g. http://127.0.0.1:8000 (repeatable)"
    )
    ev.add_argument("--label", help="agent name in the results (default: the model)")
    ev.add_argument("--api", choices=("chat", "completions"), default="chat")
    ev.add_argument("--prompt", default="paper-v1", help="prompt id: paper-v1 or compact-v1")
    ev.add_argument("--records", help="evaluate on this records file instead of a grid")
    ev.add_argument("--depths", type=_int_list)
    ev.add_argument("--trials", type=int)
    ev.add_argument("--p", type=_int_list)
    ev.add_argument("--d", type=_int_list)
    ev.add_argument("--K", type=_int_list)
    ev.add_argument("--sampling", type=lambda s: tuple(s.split(",")))
    ev.add_argument("--n", type=_n_arg, help="terms an instance, or 'g+1' (default)")
    ev.add_argument("--seed", type=int)
    ev.add_argument("--samples", type=int, default=1, help="answers a record (each its own seed)")
    ev.add_argument("--temperature", type=float, default=0.6)
    ev.add_argument("--top-p", type=float, default=0.95)
    ev.add_argument("--max-tokens", type=int, default=1024)
    ev.add_argument("--concurrency", type=int, default=8, help="requests in flight per server")
    ev.add_argument("--timeout", type=float, default=600.0)
    ev.add_argument("--retries", type=int, default=4)
    ev.add_argument("--tools", action="store_true", help="tool mode: the model's Python runs in the sandbox")
    ev.add_argument("--max-revisions", type=int, default=10, help="tool mode: revisions after the first run")
    ev.add_argument(
        "--sandbox", choices=("bwrap", "UNSAFE-rlimits-only"), default="bwrap",
        help="tool mode isolation; UNSAFE-rlimits-only runs model code without namespaces (opt-in)",
    )  # fmt: skip
    ev.add_argument("--max-model-len", type=int, default=32768, help="vllm-offline: the engine's context")
    ev.add_argument("--dtype", default="auto", help="vllm-offline: weights dtype (auto, bfloat16, float32)")
    ev.add_argument("--tensor-parallel-size", type=int, help="vllm-offline: GPUs a model")
    ev.add_argument("--out", help="output directory (default results/eval); its queries.jsonl resumes")
    ev.add_argument("--no-plots", action="store_true")
    ev.add_argument("--no-fit", action="store_true", help="skip the effective-prefix fit")
    ev.add_argument("--quiet", action="store_true")
    ev.set_defaults(func=cmd_eval, records=None)

    plot = sub.add_parser("plot", help="draw the figures a summary.csv (or results.csv) supports")
    plot.add_argument("table", help="summary.csv or results.csv written by gf2 compare")
    plot.add_argument("--out", help="output directory (default: next to the table)")
    plot.set_defaults(func=cmd_plot)

    fit = sub.add_parser("fit", help="effective-prefix fit (k = u*g vs k = v) of each agent's results")
    fit.add_argument("results", help="results.csv from gf2 compare (or any file with its columns)")
    fit.add_argument("--agent", action="append", help="fit only this agent (repeatable; default all)")
    fit.add_argument(
        "--value", choices=("correct", "gamma"), default="correct", help="what counts as success"
    )
    fit.add_argument("--curve", help="CSV cache of the simulated D curve (read if present, else written)")
    fit.add_argument("--curve-trials", type=int, default=500, help="records a depth for the D curve")
    fit.add_argument("--seed", type=int, default=1, help="seed of the D curve's records")
    fit.add_argument("--out", help="fit table CSV (default: fit.csv next to the results)")
    fit.add_argument("--quiet", action="store_true")
    fit.set_defaults(func=cmd_fit)

    train = sub.add_parser("train", help="train: TRL (grpo, sft) or stable-baselines3 (sb3), logging γ_g")
    train.add_argument("loop", choices=("grpo", "sft", "sb3"), help="the script: train/<loop>.py")
    train.add_argument("rest", nargs=argparse.REMAINDER, help="that script's arguments (--config ...)")
    train.set_defaults(func=cmd_train)

    demo = sub.add_parser("demo", help="seeded report: reward per depth against the baseline")
    demo.add_argument("--episodes", type=int, default=20)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--p", type=int, default=12)
    demo.add_argument("--d", type=int, default=4)
    demo.add_argument("--n", type=int, default=32)
    demo.add_argument("--K", type=int, default=32)
    demo.add_argument("--sampling", default="adversarial")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except GF2ConfigError as err:
        parser.exit(2, f"gf2: error: {err}\n")
        return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
