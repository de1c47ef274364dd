"""The types of the ``gf2`` flags: each parses one flag's text or refuses it with the fix."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from gf2env.config.settings import PER_DEPTH, repeated_values


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
