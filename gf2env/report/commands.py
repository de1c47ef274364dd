"""``gf2 plot`` and ``gf2 fit``: figures and the effective-prefix fit from a results table on disk."""

from __future__ import annotations

import argparse
from pathlib import Path

from gf2env.errors import GF2ConfigError
from gf2env.report.schema import COMPUTE_MEASURES


def cmd_plot(args: argparse.Namespace) -> int:
    from gf2env.report.compute_plot import DEFAULT_MEASURE, check_measure, has_compute, write_compute_figures
    from gf2env.report.plots import write_figures
    from gf2env.report.results import read_results_csv, read_summary_csv, summarize

    measure = check_measure(args.compute or DEFAULT_MEASURE)

    path = Path(args.table)
    if not path.exists():
        raise GF2ConfigError(f"{path} does not exist; pass a summary.csv or results.csv from gf2 compare.")
    header = path.read_text().split("\n", 1)[0].split(",")
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


def cmd_fit(args: argparse.Namespace) -> int:
    from gf2env.report.d_curve import DCurve, simulate_d_curve
    from gf2env.report.fit import METHODS, curve_config, fit_agents, write_fits_csv
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
        depths = sorted({r["g"] for r in rows})
        config = curve_config(*settings[0], depths)
        curve = simulate_d_curve(config, depths, args.curve_trials, seed=args.seed, progress=not args.quiet)
        curve.write_csv(curve_path)
        print(f"wrote the D curve to {curve_path}")
    methods = METHODS if args.method == "both" else (args.method,)
    fits, notes = fit_agents(
        rows, args.agent, args.value, curve, args.curve_trials, args.seed, not args.quiet, methods
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
    fit.add_argument("--curve-trials", type=int, default=500, help="records a depth for the D curve")
    fit.add_argument("--seed", type=int, default=1, help="seed of the D curve's records")
    fit.add_argument(
        "--method",
        choices=("interpolated", "paper", "both"),
        default="both",
        help="interpolated: real k, γ_D interpolated; paper: the paper's integer k = round(u*g) on its "
        "grid u = 0, 0.01, ..., 1 (compare this one with its Table 1); both (default): one row each",
    )
    fit.add_argument("--out", help="fit table CSV (default: fit.csv next to the results)")
    fit.add_argument("--quiet", action="store_true")
    fit.set_defaults(func=cmd_fit)


__all__ = ["register"]
