"""The ``gf2`` command line: a thin dispatcher.

Each command's flags and body live with the module that owns it; this module only names them.
``gf2 generate`` writes datasets (:mod:`gf2env.records.generate`); ``gf2 compare`` evaluates agents on a
grid or a records file and writes results, a summary with intervals and figures, ``gf2 eval`` does
the same for one LLM, ``gf2 demo`` plays a seeded report (:mod:`gf2env.agents.harness.commands`);
``gf2 plot`` redraws figures from a summary and ``gf2 fit`` fits the effective-prefix model (the
paper's Table 1) to results (:mod:`gf2env.report.commands`); ``gf2 train`` runs a training loop
(:mod:`gf2env.train.commands`).

The command modules are named here as strings and imported when the parser is built: the entry
point is the one place that knows every layer, and ``gf2env`` still imports nothing from
``agents`` or ``train`` (tests/test_layout.py).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from gf2env.errors import GF2ConfigError, InconsistentEvidenceError, RecordFormatError
from gf2env.extras import missing_module_message
from gf2env.version import __version__

# Each module has ``register(subparsers)``, adding its commands with ``set_defaults(func=...)``.
COMMAND_MODULES = (
    "gf2env.records.generate",
    "gf2env.agents.harness.commands",
    "gf2env.agents.models.commands",
    "gf2env.report.commands",
    "gf2env.train.commands",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gf2", description="The GF(2) circuit-reconstruction benchmark: datasets, evaluations, fits."
    )
    parser.add_argument("--version", action="version", version=f"gf2 {__version__}")
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
