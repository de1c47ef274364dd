"""The one reader of settings YAML: a file's mapping, and a section of it read into a dataclass.

Every config of ``gf2`` (a comparison or eval preset, an LLM or SB3 agent entry, a TRL or SB3
training run) is read here: :func:`read_yaml_mapping` reads a file (duplicate keys, aliases,
non-UTF-8 text, huge files are errors naming the file), :func:`check_keys` refuses a key that is
not one of a section's and names the fix (the closest key, and every valid one), and
:func:`dataclass_from_mapping` reads one section into a dataclass by the keys its fields declare
(:mod:`gf2env.config.options`: a field's key, its older spellings, flattened fields), checking
booleans (and, where asked, every scalar's type) before the dataclass checks its values.
"""

from __future__ import annotations

import difflib
import stat
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from gf2env.config.options import Setting, settings_of
from gf2env.errors import GF2ConfigError

MAX_CONFIG_BYTES = 1 << 20  # a settings file is a few hundred lines; anything larger is not one

T = TypeVar("T")


class StrictYAMLLoader(yaml.SafeLoader):
    """YAML for settings: a key given twice in one mapping is an error naming it (PyYAML would keep the
    last silently), and aliases are refused (an alias bomb expands a few lines into gigabytes)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"found the alias *{event.anchor}; aliases are not allowed here", event.start_mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: the base class says so
                break
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """Parse settings YAML with :class:`StrictYAMLLoader` (raises ``yaml.YAMLError``)."""
    return yaml.load(text, Loader=StrictYAMLLoader)  # noqa: S506  # a SafeLoader


def read_yaml_mapping(path: str | Path, what: str) -> dict[str, Any]:
    """The top-level mapping of a YAML file (``what`` names the file's kind in messages)."""
    path = Path(path)
    if not path.exists():
        raise GF2ConfigError(f"Config file {path} does not exist; see configs/ for {what} presets.")
    status = path.stat()
    if not stat.S_ISREG(status.st_mode):
        raise GF2ConfigError(f"Config {path} is not a regular file; give the path of a {what} YAML file.")
    if status.st_size > MAX_CONFIG_BYTES:
        raise GF2ConfigError(
            f"Config {path} holds {status.st_size} bytes, over {MAX_CONFIG_BYTES}; is it a {what}?"
        )
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise GF2ConfigError(f"{path} is not UTF-8 text ({err}); save the {what} as UTF-8.") from None
    try:
        obj = load_yaml(text)
    except (yaml.YAMLError, RecursionError) as err:
        raise GF2ConfigError(f"{path} is not valid YAML for a {what}: {err}") from None
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise GF2ConfigError(f"{path} does not hold a mapping of keys; a {what} is a YAML mapping.")
    return obj


def check_keys(obj: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    """Refuse keys of a YAML mapping outside ``allowed``: a misspelt key is an error, never ignored;
    the message names the closest valid key of each unknown one, and every valid key."""
    allowed = {str(key) for key in allowed}
    unknown = sorted((key for key in obj if key not in allowed), key=str)
    if not unknown:
        return
    close = []
    for key in unknown:
        match = difflib.get_close_matches(str(key), sorted(allowed), n=1, cutoff=0.6)
        if match:
            close.append(f"{match[0]!r} for {key!r}")
    fix = f"did you mean {', '.join(close)}? " if close else ""
    raise GF2ConfigError(f"{where} has unknown keys {unknown}; {fix}the keys are {sorted(allowed)}.")


def config_keys(cls: Any, extra: Iterable[str] = (), skip: Iterable[str] = ()) -> set[str]:
    """The keys of a config dataclass ``cls`` (its fields', flattened ones' and older spellings), less
    ``skip`` (fields not read from a key of their own) and with ``extra`` keys read by hand."""
    skipped = set(skip)
    keys = {s.key for s in settings_of(cls) if s.name not in skipped and s.parent not in skipped}
    keys |= {a for s in settings_of(cls) if s.name not in skipped for a in s.option.key_aliases}
    return keys | set(extra)


def check_config_keys(
    obj: Mapping[str, Any], cls: Any, where: str, extra: Iterable[str] = (), skip: Iterable[str] = ()
) -> None:
    """Refuse a config's top-level keys that are not those of dataclass ``cls`` (see :func:`config_keys`)."""
    check_keys(obj, config_keys(cls, extra, skip), where)


def read_config(
    path: str | Path, what: str, cls: Any, extra: Iterable[str] = (), skip: Iterable[str] = ()
) -> dict[str, Any]:
    """A config file's mapping, its top-level keys checked against dataclass ``cls``'s."""
    obj = read_yaml_mapping(path, what)
    check_config_keys(obj, cls, str(path), extra, skip)
    return obj


def _kinds(hint: Any) -> tuple[Any, ...]:
    """The types a field's hint allows: ``int | None`` and ``Optional[int]`` give ``(int, NoneType)``."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return typing.get_args(hint)
    return (hint,)


def _is_bool_field(kinds: tuple[Any, ...]) -> bool:
    """Whether a field of these types is a boolean one (``bool``, optionally ``| None``)."""
    return bool in kinds and set(kinds) <= {bool, type(None)}


def _hints(cls: Any) -> dict[str, tuple[Any, ...]]:
    """The allowed types of each key of dataclass ``cls`` (by key, flattened fields included)."""
    found: dict[str, tuple[Any, ...]] = {}
    for s in settings_of(cls):
        kinds = _kinds(typing.get_type_hints(s.owner).get(s.name))
        found[s.key] = kinds
        found.update({alias: kinds for alias in s.option.key_aliases})
    return found


def check_bools(cls: Any, obj: Mapping[str, Any], where: str) -> None:
    """Refuse a YAML value of a ``bool`` field of dataclass ``cls`` that is not ``true``/``false``
    (or ``null`` where the field is optional).

    ``bool('no')`` is ``True``: a quoted ``'no'`` or ``'false'``, a ``0`` or a list would silently
    mean something else, so every loader of a config checks its bool fields here.
    """
    hints = _hints(cls)
    for key, value in obj.items():
        kinds = hints.get(key, (None,))
        if not _is_bool_field(kinds) or isinstance(value, bool) or (value is None and type(None) in kinds):
            continue
        raise GF2ConfigError(
            f"{where}: {key}={value!r} is not a boolean; write {key}: true or {key}: false (unquoted)."
        )


_SCALARS = {int: "an integer", float: "a number", str: "a string", bool: "true or false", type(None): "null"}


def check_scalar_types(obj: Mapping[str, Any], cls: Any, where: str) -> None:
    """Refuse values of ``obj`` whose type is not their field's in dataclass ``cls``, for fields typed
    by scalars (``int``, ``float``, ``str``, ``bool``, each optionally ``| None``): a config's
    ``max_tokens: 1.5`` or ``temperature: hot`` is an error naming key, value and type, not a crash later.
    An int is a number; a bool is neither an int nor a number. Boolean fields are :func:`check_bools`'s."""
    check_bools(cls, obj, where)
    hints = _hints(cls)
    for key, value in obj.items():
        kinds = hints.get(key, (None,))
        if not all(kind in _SCALARS for kind in kinds) or _is_bool_field(kinds):
            continue
        if isinstance(value, bool):
            ok = bool in kinds
        else:
            ok = any(isinstance(value, kind) for kind in kinds) or (float in kinds and isinstance(value, int))
        if not ok:
            expected = " or ".join(_SCALARS[kind] for kind in kinds)
            raise GF2ConfigError(f"{where}: {key}={value!r} is not {expected}; pass {expected}.")


def canonical_keys(obj: Mapping[str, Any], cls: Any, where: str) -> dict[str, Any]:
    """``obj`` with each older spelling of a key (an option's ``key_aliases``) replaced by the key;
    giving both is an error."""
    out = dict(obj)
    for s in settings_of(cls):
        for alias in s.option.key_aliases:
            if alias in out:
                if s.key in out:
                    raise GF2ConfigError(
                        f"{where}: {alias} and {s.key} are the same setting; give {s.key} only."
                    )
                out[s.key] = out.pop(alias)
    return out


def dataclass_from_mapping(
    cls: Callable[..., T],
    obj: Any,
    where: str,
    convert: Mapping[str, Callable[[Any], Any]] | None = None,
    defaults: Mapping[str, Any] | None = None,
    keys: Iterable[str] | None = None,
    check_types: bool = False,
) -> T:
    """``cls(**obj)`` for a YAML section ``obj``, with errors naming ``where`` (e.g. ``"run.yaml: gamma"``).

    The keys are those the fields declare (:mod:`gf2env.config.options`: a key of its own, older
    spellings, a flattened dataclass's fields); ``keys`` limits them. ``convert`` maps a key to a
    converter of its value (e.g. a list to a tuple); ``defaults`` are used for absent keys;
    ``check_types`` checks every scalar's type (:func:`check_scalar_types`), else booleans only.
    """
    if obj is None:
        obj = {}
    if not isinstance(obj, Mapping):
        raise GF2ConfigError(f"{where} must be a mapping of keys; got {obj!r}.")
    obj = canonical_keys(obj, cls, where)
    settings: dict[str, Setting] = {s.key: s for s in settings_of(cls)}
    check_keys(obj, set(keys) if keys is not None else set(settings), where)
    if check_types:
        check_scalar_types(obj, cls, where)
    else:
        check_bools(cls, obj, where)
    values = {**(defaults or {}), **obj}
    for key, fn in (convert or {}).items():
        if key in values:
            try:
                values[key] = fn(values[key])
            except GF2ConfigError:
                raise
            except (TypeError, ValueError) as err:
                raise GF2ConfigError(f"{where}: {key}={values[key]!r} is malformed ({err}).") from None
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        s = settings.get(key)
        if s is None or s.parent is None:
            top[s.name if s is not None else key] = value
        else:
            nested.setdefault(s.parent, {})[s.name] = value
    try:
        for parent, inner in nested.items():
            owner = next(s.owner for s in settings.values() if s.parent == parent)
            top[parent] = owner(**inner)
        return cls(**top)
    except TypeError as err:
        raise GF2ConfigError(f"{where}: {err}") from None
    except GF2ConfigError as err:
        raise GF2ConfigError(f"{where}: {err}") from None


__all__ = [
    "MAX_CONFIG_BYTES",
    "StrictYAMLLoader",
    "canonical_keys",
    "check_bools",
    "check_config_keys",
    "check_keys",
    "check_scalar_types",
    "config_keys",
    "dataclass_from_mapping",
    "load_yaml",
    "read_config",
    "read_yaml_mapping",
]
