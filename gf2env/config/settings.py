"""Settings shared by every entry point: the task family, depth lists and the rule of ``n`` on episodes.

:class:`TaskSettings` is the task without its length (``p``, ``d``, ``K``, sampling, ``w``): the
dataset presets, the evaluation grid's cells, the SFT/GRPO data and the SB3 γ grid all name a task
this way, and :meth:`TaskSettings.config` gives the :class:`~gf2env.task.oracle.TaskConfig` of ``n``
terms. :func:`check_depths` is the one check of a list of depths, :func:`check_episode_terms` the one
refusal of ``n = g + 1`` on episodes. Reading YAML is :mod:`gf2env.config.yaml_files`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gf2env.config.options import option
from gf2env.errors import GF2ConfigError
from gf2env.task.oracle import SAMPLING_MODES, TaskConfig

PER_DEPTH = "g+1"  # n = g + 1 terms at each depth: only the first g + 1 matter to a step
#: The paper's depth ladder g = 2^k - 1 (its small-depth grid); its estimator figures go on to 63 and 127.
DEPTH_LADDER = (0, 1, 3, 7, 15, 31)


@dataclass(frozen=True)
class TaskSettings:
    """A task family: everything of :class:`~gf2env.task.oracle.TaskConfig` but the number of terms."""

    p: int = 12
    d: int = 4
    K: int = 32
    sampling: str = field(default="adversarial", metadata=option(choices=SAMPLING_MODES))
    w: int | None = field(default=None, metadata=option(help="adversarial payload weight (default w*)"))

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


def check_episode_terms(
    episodes: Any,
    n: Any,
    n_flag: str = "--n",
    episodes_flag: str = "--episodes",
    default_n: str = "max depth + 1",
    where: str = "",
) -> None:
    """The rule ``n = g + 1`` and episodes break together: ``n: g+1`` gives each depth instances of its
    own, episodes walk one instance through every depth. ``n_flag`` and ``episodes_flag`` are how the
    user said it (``--n``/``--episodes``, or the YAML keys ``n:``/``episodes: true``)."""
    if episodes is True and n == PER_DEPTH:
        raise GF2ConfigError(
            f"{where}{n_flag} g+1 gives each depth instances of its own, but {episodes_flag} walks one "
            f"instance through every depth; drop {n_flag} (n = {default_n}) or pass an integer "
            f"{n_flag} above every depth."
        )


__all__ = [
    "DEPTH_LADDER",
    "PER_DEPTH",
    "TaskSettings",
    "check_depths",
    "check_distinct",
    "check_episode_terms",
    "repeated_values",
]
