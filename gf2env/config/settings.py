"""Settings shared by every entry point: the task family, depth lists, and reading YAML into dataclasses.

:class:`TaskSettings` is the task without its length (``p``, ``d``, ``K``, sampling, ``w``): the
dataset presets, the evaluation grid's cells, the SFT/GRPO data and the SB3 γ grid all name a task
this way, and :meth:`TaskSettings.config` gives the :class:`~gf2env.task.oracle.TaskConfig` of ``n``
terms. :func:`dataclass_from_mapping` reads one YAML section into a dataclass (unknown keys and
bad values are errors naming the key and the file); :func:`check_depths` is the one check of a
list of depths.
"""

from __future__ import annotations

import dataclasses
import stat
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import yaml

from gf2env.errors import GF2ConfigError
from gf2env.task.oracle import TaskConfig

PER_DEPTH = "g+1"  # n = g + 1 terms at each depth: only the first g + 1 matter to a step
#: The paper's depth ladder g = 2^k - 1 (its small-depth grid); its estimator figures go on to 63 and 127.
DEPTH_LADDER = (0, 1, 3, 7, 15, 31)
MAX_CONFIG_BYTES = 1 << 20  # a settings file is a few hundred lines; anything larger is not one

T = TypeVar("T")


@dataclass(frozen=True)
class TaskSettings:
    """A task family: everything of :class:`~gf2env.task.oracle.TaskConfig` but the number of terms."""

    p: int = 12
    d: int = 4
    K: int = 32
    sampling: str = "adversarial"
    w: int | None = None

    def __post_init__(self) -> None:
        self.config(1)  # TaskConfig's checks and messages

    def config(self, n: int) -> TaskConfig:
        """The task with ``n`` terms."""
        return TaskConfig(p=self.p, d=self.d, n=n, K=self.K, sampling=self.sampling, w=self.w)

    def at_depth(self, g: int) -> TaskConfig:
        """The task with ``g + 1`` terms, the shortest that has a step at depth ``g``."""
        return self.config(g + 1)


def check_depths(depths: Iterable[Any], what: str, below: int | None = None) -> tuple[int, ...]:
    """``depths`` as a tuple of ints: non-empty, each ``>= 0`` (and ``< below`` when given), each once."""
    try:
        items = list(depths)
    except TypeError:
        raise GF2ConfigError(f"{what}={depths!r} is not a list of depths; pass e.g. [0, 1, 3, 7].") from None
    bad = [g for g in items if isinstance(g, bool) or not isinstance(g, int)]
    if bad or not items or min(items) < 0:
        raise GF2ConfigError(f"{what}={items} must be a non-empty list of integer depths >= 0.")
    if below is not None and max(items) >= below:
        raise GF2ConfigError(
            f"{what}={items} reach g={max(items)}, but there are only n={below} terms; "
            f"pass depths below {below} (or more terms)."
        )
    check_distinct(items, what)
    return tuple(items)


def repeated_values(values: Iterable[Any]) -> list[Any]:
    """The values that ``values`` names more than once, each once, in the order they repeat."""
    items, found = list(values), []
    for i, value in enumerate(items):
        if value in items[:i] and value not in found:
            found.append(value)
    return found


def check_distinct(values: Iterable[Any], what: str) -> None:
    """Refuse a list of settings that names a value twice: its records would count twice."""
    items = list(values)
    repeated = repeated_values(items)
    if repeated:
        raise GF2ConfigError(f"{what}={items} names {repeated[0]!r} twice; give each value once.")


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
    """Refuse keys of a YAML mapping outside ``allowed``: a misspelt key is an error, never ignored."""
    allowed = set(allowed)
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise GF2ConfigError(f"{where} has unknown keys {unknown}; the keys are {sorted(allowed)}.")


def _kinds(hint: Any) -> tuple[Any, ...]:
    """The types a field's hint allows: ``int | None`` and ``Optional[int]`` give ``(int, NoneType)``."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return typing.get_args(hint)
    return (hint,)


def _is_bool_field(kinds: tuple[Any, ...]) -> bool:
    """Whether a field of these types is a boolean one (``bool``, optionally ``| None``)."""
    return bool in kinds and set(kinds) <= {bool, type(None)}


def check_bools(cls: Any, obj: Mapping[str, Any], where: str) -> None:
    """Refuse a YAML value of a ``bool`` field of dataclass ``cls`` that is not ``true``/``false``
    (or ``null`` where the field is optional).

    ``bool('no')`` is ``True``: a quoted ``'no'`` or ``'false'``, a ``0`` or a list would silently
    mean something else, so every loader of a config checks its bool fields here.
    """
    hints = typing.get_type_hints(cls)
    for key, value in obj.items():
        kinds = _kinds(hints.get(key))
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
    hints = typing.get_type_hints(cls)
    for key, value in obj.items():
        kinds = _kinds(hints.get(key))
        if not all(kind in _SCALARS for kind in kinds) or _is_bool_field(kinds):
            continue
        if isinstance(value, bool):
            ok = bool in kinds
        else:
            ok = any(isinstance(value, kind) for kind in kinds) or (float in kinds and isinstance(value, int))
        if not ok:
            expected = " or ".join(_SCALARS[kind] for kind in kinds)
            raise GF2ConfigError(f"{where}: {key}={value!r} is not {expected}; pass {expected}.")


def dataclass_from_mapping(
    cls: Callable[..., T],
    obj: Any,
    where: str,
    convert: Mapping[str, Callable[[Any], Any]] | None = None,
    defaults: Mapping[str, Any] | None = None,
    keys: Iterable[str] | None = None,
) -> T:
    """``cls(**obj)`` for a YAML section ``obj``, with errors naming ``where`` (e.g. ``"run.yaml: gamma"``).

    ``keys`` limits the accepted keys (default: the dataclass's fields); ``convert`` maps a key to
    a converter of its value (e.g. a list to a tuple); ``defaults`` are used for absent keys.
    """
    if obj is None:
        obj = {}
    if not isinstance(obj, Mapping):
        raise GF2ConfigError(f"{where} must be a mapping of keys; got {obj!r}.")
    allowed = set(keys) if keys is not None else {f.name for f in dataclasses.fields(cast(Any, cls))}
    check_keys(obj, allowed, where)
    check_bools(cls, obj, where)
    values = {**(defaults or {}), **obj}
    for key, fn in (convert or {}).items():
        if key in values:
            try:
                values[key] = fn(values[key])
            except (TypeError, ValueError) as err:
                raise GF2ConfigError(f"{where}: {key}={values[key]!r} is malformed ({err}).") from None
    try:
        return cls(**values)
    except TypeError as err:
        raise GF2ConfigError(f"{where}: {err}") from None
    except GF2ConfigError as err:
        raise GF2ConfigError(f"{where}: {err}") from None


__all__ = [
    "MAX_CONFIG_BYTES",
    "PER_DEPTH",
    "StrictYAMLLoader",
    "TaskSettings",
    "check_bools",
    "check_depths",
    "check_distinct",
    "check_keys",
    "check_scalar_types",
    "dataclass_from_mapping",
    "load_yaml",
    "read_yaml_mapping",
    "repeated_values",
]
