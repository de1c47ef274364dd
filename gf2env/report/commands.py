"""``gf2 plot`` and ``gf2 fit``: figures and the effective-prefix fit from a results table on disk."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from gf2env.config.flags import count_arg
from gf2env.errors import GF2ConfigError
from gf2env.records.record import MAX_RECORDS
from gf2env.report.schema import COMPUTE_MEASURES, check_output_file, check_table_file


def cmd_plot(args: argparse.Namespace) -> int:
    from gf2env.report.compute_plot import DEFAULT_MEASURE, check_measure, has_compute, write_compute_figures
    from gf2env.report.plots import write_figures
    from gf2env.report.results import read_results_csv, read_summary_csv, summarize

    measure = check_measure(args.compute or DEFAULT_MEASURE)

    path = check_table_file(args.table, "summary or results")
    with open(path, encoding="utf-8", errors="replace") as fh:
        header = fh.readline(1 << 16).rstrip("\n").split(",")
    summary = read_summary_csv(path) if "gamma_mean" in header else summarize(read_results_csv(path))
    out = Path(args.out) if args.out else path.parent
    for fig in write_figures(summary, out):
        print(f"wrote {fig}")
    if not has_compute(summary):
        if args.compute:
            print(f"note: {path} has no compute columns (written before them?): no γ-against-compute figure")
        return 0
    figures, notes = write_compute_figures(summary, out, measure)
    for line in notes:
        print(f"note: {line}")
    for fig in figures:
        print(f"wrote {fig}")
    return 0


SELECTORS = ("sampling", "p", "d", "K")  # gf2 fit's flags that pick a setting of a results table
CURVE_TRIALS, CURVE_SEED = 500, 1  # gf2 fit's D curve: records a depth, and their seed


def fit_file_name(args: argparse.Namespace) -> str:
    """``gf2 fit``'s own default output name, from the choices that change its rows (never the
    ``fit.csv`` that ``gf2 compare`` writes): e.g. ``fit-correct.csv``, ``fit-gamma-paper-p12.csv``."""
    parts = [args.value]
    if args.method != "both":
        parts.append(args.method)
    parts += [f"{name}{getattr(args, name)}" for name in SELECTORS if getattr(args, name) is not None]
    parts += [re.sub(r"[^A-Za-z0-9.=+-]+", "_", agent).strip("_") for agent in args.agent or ()]
    return "fit-" + "-".join(parts) + ".csv"


def cmd_fit(args: argparse.Namespace) -> int:
    from gf2env.report.d_curve import simulate_d_curve
    from gf2env.report.fit import (
        METHODS,
        curve_config,
        fit_agents,
        format_setting,
        setting_of,
        write_fits_csv,
    )
    from gf2env.report.results import read_results_csv

    path = Path(args.results)
    rows = read_results_csv(path)  # checks the file first (report.schema.check_table_file)
    chosen = {name: getattr(args, name) for name in SELECTORS if getattr(args, name) is not None}
    settings = sorted({setting_of(r) for r in rows})
    picked = [r for r in rows if all(r[name] == value for name, value in chosen.items())]
    if not picked:
        have = "; ".join(format_setting(s) for s in settings)
        raise GF2ConfigError(f"{path} has no rows at {chosen}; its settings: {have}.")
    settings = sorted({setting_of(r) for r in picked})
    curve_path = Path(args.curve) if args.curve else None
    curve = None
    if curve_path is not None:
        if len(settings) != 1:
            have = "; ".join(format_setting(s) for s in settings)
            raise GF2ConfigError(
                f"--curve caches one setting's D curve, but {path} holds {len(settings)} ({have}); pick one "
                "with --p/--d/--K/--sampling, or drop --curve (each setting's curve is simulated)."
            )
        curve = read_curve_cache(curve_path, settings[0], args) if curve_path.exists() else None
    trials = CURVE_TRIALS if args.curve_trials is None else args.curve_trials
    seed = CURVE_SEED if args.seed is None else args.seed
    if curve is None and curve_path is not None:  # simulate it once here, to cache it
        depths = sorted({r["g"] for r in picked})
        sampling, p, d, K = settings[0]
        config = curve_config(p, d, K, sampling, depths)
        curve = simulate_d_curve(config, depths, trials, seed=seed, progress=not args.quiet)
        curve.write_csv(curve_path)
        print(f"wrote the D curve to {curve_path}")
    methods = METHODS if args.method == "both" else (args.method,)
    fits, notes = fit_agents(picked, args.agent, args.value, curve, trials, seed, not args.quiet, methods)
    for fit in fits:
        print(fit.format_table())
        print()
    for line in notes:
        print(line)
    if not fits:
        raise GF2ConfigError(f"No agent of {path} could be fitted (see the notes above).")
    out = check_output_file(args.out) if args.out else path.parent / fit_file_name(args)
    if out.resolve() == path.resolve():
        raise GF2ConfigError(f"--out {out} is the results file itself; name another file.")
    write_fits_csv(out, fits)
    print(f"wrote {out}")
    return 0


def read_curve_cache(path: Path, setting: tuple[str, int, int, int], args: argparse.Namespace) -> Any:
    """The D curve cached at ``path``, checked against the setting fitted (and against
    ``--curve-trials``/``--seed`` where given): a curve of another setting is refused, not used."""
    from gf2env.report.d_curve import DCurve
    from gf2env.report.fit import format_setting

    curve = DCurve.read_csv(path)
    about = dict(curve.about)
    sampling, p, d, K = setting
    wanted = {"sampling": "adversarial" if sampling == "unknown" else sampling, "p": p, "d": d, "K": K}
    wanted |= {k: v for k, v in (("trials", args.curve_trials), ("seed", args.seed)) if v is not None}
    differ = {k: about[k] for k, v in wanted.items() if k in about and about[k] != v}
    if differ:
        asked = {k: wanted[k] for k in differ}
        raise GF2ConfigError(
            f"--curve {path} was simulated with {differ}, not the {asked} this fit needs (at "
            f"{format_setting(setting)}); give another --curve file (or delete this one)."
        )
    made = ", ".join(f"{k}={v}" for k, v in curve.about) or "a file without its setting"
    print(f"read the D curve from {path} ({made})")
    return curve


def register(sub: argparse._SubParsersAction) -> None:
    """``gf2 plot`` and ``gf2 fit``."""
    plot = sub.add_parser("plot", help="draw the figures a summary.csv (or results.csv) supports")
    plot.add_argument("table", help="summary.csv or results.csv written by gf2 compare")
    plot.add_argument("--out", help="output directory (default: next to the table)")
    plot.add_argument(
        "--compute",
        choices=COMPUTE_MEASURES,
        help="x of the γ-against-compute-per-step figure, drawn when the table has compute columns "
        "(default: wall_ms, which every agent has)",
    )
    plot.set_defaults(func=cmd_plot)

    fit = sub.add_parser("fit", help="effective-prefix fit (k = u*g vs k = v) of each agent's results")
    fit.add_argument("results", help="results.csv from gf2 compare (or any file with its columns)")
    fit.add_argument("--agent", action="append", help="fit only this agent (repeatable; default all)")
    fit.add_argument(
        "--value", choices=("correct", "gamma"), default="correct", help="what counts as success"
    )
    fit.add_argument("--curve", help="CSV cache of the simulated D curve (read if present, else written)")
    fit.add_argument(
        "--curve-trials",
        type=count_arg(1, MAX_RECORDS),
        help=f"records a depth for the D curve (default {CURVE_TRIALS})",
    )
    fit.add_argument("--seed", type=int, help=f"seed of the D curve's records (default {CURVE_SEED})")
    fit.add_argument("--sampling", help="fit only the rows of this sampling mode (a setting selector)")
    fit.add_argument("--p", type=int, help="fit only the rows of this payload size")
    fit.add_argument("--d", type=int, help="fit only the rows of this d")
    fit.add_argument("--K", type=int, help="fit only the rows of this K")
    fit.add_argument(
        "--method",
        choices=("interpolated", "paper", "both"),
        default="both",
        help="interpolated: real k, γ_D interpolated; paper: the paper's integer k = round(u*g) on its "
        "grid u = 0, 0.01, ..., 1 (compare this one with its Table 1); both (default): one row each",
    )
    fit.add_argument(
        "--out",
        help="fit table CSV (default: next to the results, named for the choices, e.g. fit-correct.csv; "
        "never the fit.csv gf2 compare wrote)",
    )
    fit.add_argument("--quiet", action="store_true")
    fit.set_defaults(func=cmd_fit)


__all__ = ["register"]
