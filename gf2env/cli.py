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
import os
import sys
from collections.abc import Callable, Sequence

from gf2env.errors import GF2ConfigError, InconsistentEvidenceError, RecordFormatError
from gf2env.extras import missing_module_message
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


def text_arg(text: str) -> str:
    """A flag's text that must say something: an empty value is refused (not taken as "not given")."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give a value (or leave the flag out)")
    return text


def name_list(text: str) -> list[str]:
    """A flag's comma-separated names, e.g. ``A,B,D(k=3)``: at least one, none empty."""
    names = [name.strip() for name in text.split(",")]
    if not any(names) or not all(names):
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of names, e.g. A,B,C")
    return names


def count_arg(low: int, high: int) -> Callable[[str], int]:
    """A flag's integer in ``[low, high]`` (e.g. records a depth): past ``high`` it is a typo that
    would run for ever, below ``low`` it means nothing."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside [{low}, {high:,}]")
        return value

    return parse


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


DEBUG_ENV = "GF2_DEBUG"  # set to 1: a failure raises with its traceback instead of one line


def failure_line(err: BaseException) -> str:
    """The one line ``gf2`` prints for a failure: typed errors say what to fix; a file the system
    refused names the path and the reason; anything else is named as an internal error to report."""
    if isinstance(err, (GF2ConfigError, RecordFormatError, InconsistentEvidenceError)):
        return f"gf2: error: {err}"
    if isinstance(err, ImportError) and err.name:  # an optional library that is not installed
        return f"gf2: error: {missing_module_message(err.name)} ({err})"
    if isinstance(err, OSError):
        where = f": {err.filename}" if err.filename is not None else ""
        why = err.strerror or str(err) or type(err).__name__
        return f"gf2: error: {why}{where}"
    if isinstance(err, MemoryError):
        return "gf2: error: out of memory; use a smaller grid or file (GF2_DEBUG=1 shows where)"
    if isinstance(err, RecursionError):
        return f"gf2: error: input nested too deeply ({err}); GF2_DEBUG=1 shows where"
    said = " ".join(str(err).split())  # one line, whatever the library's message holds
    return (
        f"gf2: internal error: {type(err).__name__}: {said} "
        f"(run again with {DEBUG_ENV}=1 for the traceback, and please report it)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; a failure is one line on stderr and exit 2 (130 on Ctrl-C), unless
    ``GF2_DEBUG=1``, where it raises with its traceback."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
            raise
        print("gf2: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
            raise
        print(failure_line(err), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
