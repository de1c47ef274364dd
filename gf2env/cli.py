"""The ``gf2`` command line: a thin dispatcher.

Each command's flags and body live with the module that owns it; this module only names them.
``gf2 generate`` writes datasets (:mod:`gf2env.datasets`); ``gf2 compare`` evaluates agents on a
grid or a records file and writes results, a summary with intervals and figures, ``gf2 eval`` does
the same for one LLM, ``gf2 demo`` plays a seeded report (:mod:`agents.harness.commands`);
``gf2 plot`` redraws figures from a summary and ``gf2 fit`` fits the effective-prefix model (the
paper's Table 1) to results (:mod:`gf2env.report.commands`); ``gf2 train`` runs a training loop
(:mod:`train.commands`).

The command modules are named here as strings and imported when the parser is built: the entry
point is the one place that knows every layer, and ``gf2env`` still imports nothing from
``agents`` or ``train`` (tests/test_layout.py).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from gf2env.errors import GF2ConfigError, InconsistentEvidenceError, RecordFormatError
from gf2env.settings import PER_DEPTH, repeated_values

# Each module has ``register(subparsers)``, adding its commands with ``set_defaults(func=...)``.
COMMAND_MODULES = (
    "gf2env.datasets",
    "agents.harness.commands",
    "agents.models.commands",
    "gf2env.report.commands",
    "train.commands",
)


def int_list(text: str) -> tuple[int, ...]:
    """A flag's comma-separated ints, e.g. ``0,1,3,7``: at least one, each once (a value given twice
    would count its records twice)."""
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of ints") from err
    if not values:
        raise argparse.ArgumentTypeError(f"{text!r} holds no value; give e.g. 0,1,3,7")
    repeated = sorted(repeated_values(values))
    if repeated:
        raise argparse.ArgumentTypeError(f"{text!r} repeats {repeated}; give each value once")
    return values


def n_arg(text: str) -> int | str:
    """``--n``: a number of terms, or ``g+1``."""
    if text == PER_DEPTH:
        return PER_DEPTH
    try:
        return int(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"--n {text!r} is neither an integer nor 'g+1'") from err


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gf2", description="The GF(2) circuit-reconstruction benchmark: datasets, evaluations, fits."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (GF2ConfigError, RecordFormatError, InconsistentEvidenceError) as err:
        parser.exit(2, f"gf2: error: {err}\n")
        return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
