"""``gf2 train grpo|sft|sb3 ARGS``: runs the training script's own ``main`` with the rest of the line."""

from __future__ import annotations

import argparse
import importlib

from gf2env.errors import MissingExtraError
from gf2env.extras import install_command

LOOPS = ("grpo", "sft", "sb3")  # the scripts train/<loop>.py


def cmd_train(args: argparse.Namespace) -> int:
    try:
        script = importlib.import_module(f"gf2env.train.{args.loop}")
    except ImportError as err:
        extra = "sb3" if args.loop == "sb3" else "train"
        raise MissingExtraError(
            f"gf2 train {args.loop} needs the {extra} extra ({err}); {install_command(extra, torch=True)}."
        ) from None
    return int(script.main(args.rest))


def register(sub: argparse._SubParsersAction) -> None:
    """``gf2 train``."""
    train = sub.add_parser("train", help="train: TRL (grpo, sft) or stable-baselines3 (sb3), logging γ_g")
    train.add_argument("loop", choices=LOOPS, help="the script: train/<loop>.py")
    train.add_argument("rest", nargs=argparse.REMAINDER, help="that script's arguments (--config ...)")
    train.set_defaults(func=cmd_train)


__all__ = ["LOOPS", "register"]
