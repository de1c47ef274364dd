"""The command line ``python -m gf2env.agents.sandbox``: ``--check`` (what isolation this machine supports,
and
the layers each mode uses) and ``--run FILE`` (run a file's code on an empty record)."""

from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gf2env.agents.sandbox import sandbox as sandbox_module
from gf2env.agents.sandbox.errors import SandboxUnavailableError
from gf2env.agents.sandbox.isolation import BWRAP, ISOLATIONS, detect_isolation
from gf2env.agents.sandbox.sandbox import Sandbox


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gf2env.agents.sandbox", description=sandbox_module.__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--check", action="store_true", help="print what this machine supports and the layers"
    )
    parser.add_argument(
        "--run", metavar="FILE", help="run FILE's code in the sandbox (empty record), print the result"
    )
    parser.add_argument("--isolation", choices=ISOLATIONS, default=BWRAP)
    parser.add_argument("--bwrap", default=BWRAP, help="the bubblewrap executable")
    args = parser.parse_args(argv)
    if not (args.check or args.run):
        parser.error("give --check or --run FILE")
    if args.check:
        print(json.dumps({"isolation": detect_isolation(args.bwrap)}, indent=2))
        for mode in ISOLATIONS:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    layers: Any = list(Sandbox(isolation=mode, bwrap=args.bwrap).layers)
            except SandboxUnavailableError as err:
                layers = f"unavailable: {err}"
            print(json.dumps({"mode": mode, "layers": layers}))
    if args.run:
        sandbox = Sandbox(isolation=args.isolation, bwrap=args.bwrap)
        print(json.dumps(sandbox.run(Path(args.run).read_text()).to_dict(), indent=2))
    return 0
