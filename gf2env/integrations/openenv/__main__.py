"""``python -m gf2env.integrations.openenv --env ID [--host H] [--port P] [key=value ...]``: serve one env.

The ``key=value`` words are ``gym.make``'s keyword arguments, each value read as YAML (``p=8``,
``w=null``, ``bayes_ceiling=true``, ``sampling=uniform``). The server answers ``GET /health`` once it is
up; it runs until interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from gf2env.errors import GF2ConfigError
from gf2env.integrations.openenv.server import DEFAULT_MAX_SESSIONS, serve, served_env_ids


def env_kwargs(words: Sequence[str]) -> dict[str, Any]:
    """``["p=8", "w=null"]`` as ``{"p": 8, "w": None}`` (values read as YAML)."""
    kwargs: dict[str, Any] = {}
    for word in words:
        key, sep, text = word.partition("=")
        if not sep or not key.isidentifier():
            raise GF2ConfigError(f"{word!r} is not key=value; pass env arguments as e.g. p=8 d=3.")
        if key in kwargs:
            raise GF2ConfigError(f"{key} is given twice ({word!r}); pass each env argument once.")
        try:
            kwargs[key] = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise GF2ConfigError(f"{word!r}: the value is not YAML ({err}).") from None
    return kwargs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gf2env.integrations.openenv",
        description="Serve a gf2env environment over OpenEnv (HTTP + WebSocket).",
    )
    parser.add_argument("--env", required=True, choices=sorted(served_env_ids()), help="the env id to serve")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=DEFAULT_MAX_SESSIONS,
        help=f"concurrent WebSocket sessions, one env each (default {DEFAULT_MAX_SESSIONS})",
    )
    parser.add_argument("--log-level", default="warning", help="uvicorn's log level (default warning)")
    parser.add_argument("env_kwargs", nargs="*", metavar="key=value", help="gym.make arguments, e.g. p=8 d=3")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        serve(
            args.env,
            env_kwargs(args.env_kwargs),
            host=args.host,
            port=args.port,
            max_sessions=args.max_sessions,
            log_level=args.log_level,
        )
    except GF2ConfigError as err:
        parser.exit(2, f"{parser.prog}: error: {err}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
