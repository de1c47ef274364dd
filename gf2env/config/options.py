"""How a config dataclass's field is spelt outside Python: its YAML key and ``gf2`` flag, declared once.

A field says, in ``dataclasses.field(metadata=option(...))``, what the user types for it: its YAML
key (``key``, default: the field's name), whose flag is ``--`` + key with ``_`` → ``-``; the flag's
help, parse function (``type``, default: from the field's type), choices, ``action`` and
``metavar``; and the old spellings kept working (``flag_aliases``, ``key_aliases``). The default
is the field's own: never repeated in a parser. A field holding a dataclass of its own can be
flattened (``nested``: its fields' options, keyed by their names), so that e.g. an LLM's sampling
settings are keys and flags of the LLM itself. :mod:`gf2env.config.flags` builds the argparse flags
from these, :mod:`gf2env.config.yaml_files` reads YAML mappings by them (the way TRL's
``HfArgumentParser`` or tyro read one dataclass both ways).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

META = "gf2env"  # the key of a field's Option in its metadata


@dataclass(frozen=True)
class Option:
    """The outside spelling of one config field (see the module docs)."""

    key: str | None = None  # the YAML key, and the flag's stem (default: the field's name)
    help: str | None = None
    type: Callable[[str], Any] | None = None
    choices: tuple[Any, ...] | None = None
    action: str | None = None  # e.g. "store_true", "append"
    metavar: str | None = None
    flag_aliases: tuple[str, ...] = ()  # older flags that still work, e.g. ("--sandbox",)
    key_aliases: tuple[str, ...] = ()  # older YAML keys that still work
    flag: bool = True  # False: YAML only (no flag)
    negate: bool = False  # the flag is --no-KEY and turns a true-by-default setting off
    nested: Mapping[str, Option] | None = None  # the field's dataclass's fields, flattened into this one's

    def key_of(self, name: str) -> str:
        return self.key or name

    def flag_of(self, name: str) -> str:
        stem = self.key_of(name).replace("_", "-")
        return f"--no-{stem}" if self.negate else f"--{stem}"


def option(**kwargs: Any) -> dict[str, Option]:
    """A field's metadata: ``field(default=..., metadata=option(help=..., key=...))``."""
    nested = kwargs.get("nested")
    if nested is not None:
        kwargs["nested"] = {
            name: value[META] if isinstance(value, Mapping) else value for name, value in nested.items()
        }
    return {META: Option(**kwargs)}


def option_of(f: dataclasses.Field[Any]) -> Option:
    """The :class:`Option` a field declares (an empty one where it declares none)."""
    found = f.metadata.get(META)
    return found if isinstance(found, Option) else Option()


@dataclass(frozen=True)
class Setting:
    """One key of a config: the field it fills (``parent`` names the field of a flattened dataclass
    that holds it, else ``None``), its option and default."""

    name: str
    option: Option
    parent: str | None
    owner: Any  # the dataclass that declares the field
    field: dataclasses.Field[Any]

    @property
    def key(self) -> str:
        return self.option.key_of(self.name)

    @property
    def flag(self) -> str:
        return self.option.flag_of(self.name)

    @property
    def default(self) -> Any:
        f = self.field
        if f.default is not dataclasses.MISSING:
            return f.default
        if f.default_factory is not dataclasses.MISSING:
            return f.default_factory()
        return None


def settings_of(cls: Any) -> Iterator[Setting]:
    """The keys of dataclass ``cls`` in field order, flattened fields' own in their place."""
    for f in dataclasses.fields(cls):
        opt = option_of(f)
        if opt.nested is not None:
            inner = f.type if isinstance(f.type, type) else None
            inner = inner or _field_class(cls, f.name)
            for g in dataclasses.fields(inner):
                yield Setting(g.name, opt.nested.get(g.name, option_of(g)), f.name, inner, g)
        else:
            yield Setting(f.name, opt, None, cls, f)


def _field_class(cls: Any, name: str) -> Any:
    import typing

    return typing.get_type_hints(cls)[name]


def key_names(cls: Any) -> dict[str, str]:
    """Every YAML key dataclass ``cls`` accepts, aliases included, mapped to the key it spells."""
    names: dict[str, str] = {}
    for s in settings_of(cls):
        names[s.key] = s.key
        names.update({alias: s.key for alias in s.option.key_aliases})
    return names


__all__ = ["META", "Option", "Setting", "key_names", "option", "option_of", "settings_of"]
