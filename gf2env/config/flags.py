"""The ``gf2`` flags: built from the config dataclasses' fields (:func:`add_flags`), and their types,
each of which parses one flag's text or refuses it with the fix.

A config field declares its flag once, in its metadata (:func:`gf2env.config.options.option`): the
flag is ``--`` + its YAML key with ``_`` → ``-`` (older spellings kept as aliases), its default is
the field's default, never repeated here. :func:`add_flags` adds a dataclass's flags to a parser,
:func:`flag_values` reads them back into the dataclass's keyword arguments.
"""

from __future__ import annotations

import argparse
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gf2env.config.options import Setting, settings_of
from gf2env.config.settings import PER_DEPTH, repeated_values

_PARSERS: dict[Any, Callable[[str], Any]] = {int: int, float: float}


def _parse_of(s: Setting) -> Callable[[str], Any] | None:
    """A flag's parse function: the option's, else ``int``/``float`` for such a field (or ``| None``)."""
    if s.option.type is not None:
        return s.option.type
    hint = typing.get_type_hints(s.owner).get(s.name)
    kinds = [k for k in typing.get_args(hint) or (hint,) if k is not type(None)]
    return _PARSERS.get(kinds[0]) if len(kinds) == 1 else None


def _is_bool(s: Setting) -> bool:
    hint = typing.get_type_hints(s.owner).get(s.name)
    return hint is bool or set(typing.get_args(hint)) == {bool, type(None)}


def add_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: Any,
    names: Iterable[str] | None = None,
    *,
    overrides: bool = False,
    skip: Iterable[str] = (),
    helps: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Add the flags of dataclass ``cls``'s fields to ``parser``; returns each flag's dest (the field's
    name) mapped to its flag.

    ``names`` picks fields (by name or key, in that order; default: every field with a flag),
    ``skip`` leaves some out. ``overrides``: the flags override a config's values, so each defaults
    to ``None`` (not given) instead of the field's default. ``helps`` replaces a flag's help
    where one command says more than the field (e.g. where its output goes by default).
    """
    every = [s for s in settings_of(cls) if s.option.flag]
    if names is not None:
        by_name = {**{s.name: s for s in every}, **{s.key: s for s in every}}
        chosen = [by_name[name] for name in names]
    else:
        chosen = every
    skipped = set(skip)
    added: dict[str, str] = {}
    for s in chosen:
        if s.name in skipped or s.key in skipped:
            continue
        opt = s.option
        kwargs: dict[str, Any] = {"dest": s.name}
        action = opt.action
        if action is None and _is_bool(s):
            action = "store_false" if opt.negate else "store_true"
        if action is not None:
            kwargs["action"] = action
        if action not in ("store_true", "store_false"):
            parse = _parse_of(s)
            if parse is not None:
                kwargs["type"] = parse
            if opt.metavar is not None or opt.choices is None:
                kwargs["metavar"] = opt.metavar or s.key.upper()
        if opt.choices is not None:
            kwargs["choices"] = opt.choices
        if overrides or action == "append":
            kwargs["default"] = None
        else:
            kwargs["default"] = s.default
        text = (helps or {}).get(s.key, opt.help)
        if text is not None:
            kwargs["help"] = text
        parser.add_argument(s.flag, *opt.flag_aliases, **kwargs)
        added[s.name] = s.flag
    return added


def flag_values(args: argparse.Namespace, cls: Any, given_only: bool = False) -> dict[str, Any]:
    """The values of dataclass ``cls``'s flags in ``args``, by field name (a flattened field's values
    in a mapping of their own under its name); ``given_only``: only those not ``None``."""
    values: dict[str, Any] = {}
    for s in settings_of(cls):
        if not hasattr(args, s.name):
            continue
        value = getattr(args, s.name)
        if given_only and value is None:
            continue
        if s.parent is None:
            values[s.name] = value
        else:
            values.setdefault(s.parent, {})[s.name] = value
    return values


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


__all__ = ["add_flags", "count_arg", "flag_values", "int_list", "n_arg", "name_list", "text_arg"]
