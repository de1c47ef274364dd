"""Curricula over depth: which depths the training prompts are drawn from, step by step.

- :class:`FixedCurriculum`: a schedule of ``(from_step, depths)`` stages.
- :class:`AdaptiveCurriculum`: a ladder of depths; training starts on the first rung and moves one
  rung deeper (keeping the ones below it in the mix) whenever the γ evaluation at the current deepest
  rung reaches ``threshold``.

Both answer :meth:`depths` (the active depths now) and take :meth:`observe` (a γ evaluation); the
prompt stream of :mod:`gf2env.train.data` asks them for every prompt it makes, so a move takes effect on the
next generation batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gf2env.config.yaml_files import check_keys
from gf2env.errors import GF2ConfigError


def _check_depths(depths: Sequence[int], what: str) -> tuple[int, ...]:
    out = tuple(int(g) for g in depths)
    if not out or min(out) < 0:
        raise GF2ConfigError(f"{what}={list(depths)} must be a non-empty list of depths >= 0.")
    return out


@dataclass
class FixedCurriculum:
    """Stages ``[(from_step, depths), ...]``, the first from step 0, in increasing steps."""

    stages: Sequence[tuple[int, Sequence[int]]]
    step: int = 0

    def __post_init__(self) -> None:
        if not self.stages:
            raise GF2ConfigError("A fixed curriculum needs at least one stage, e.g. [[0, [0, 1]]].")
        starts = [int(s) for s, _ in self.stages]
        if starts[0] != 0 or starts != sorted(set(starts)):
            raise GF2ConfigError(
                f"Curriculum stages start at steps {starts}; the first must be 0 and they must increase."
            )
        self.stages = [(int(s), _check_depths(d, f"stage at step {s}")) for s, d in self.stages]

    @property
    def kind(self) -> str:
        return "fixed"

    def depths(self) -> tuple[int, ...]:
        active = self.stages[0][1]
        for start, depths in self.stages:
            if start <= self.step:
                active = depths
        return tuple(active)

    def advance(self, step: int) -> None:
        """The trainer is at ``step`` (the schedule's clock)."""
        self.step = step

    def observe(self, step: int, gamma: Mapping[int, float]) -> bool:
        """Note the step; a fixed schedule ignores γ. Returns whether the active depths changed."""
        before = self.depths()
        self.step = step
        return self.depths() != before

    def state(self) -> dict[str, Any]:
        return {"kind": self.kind, "step": self.step}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.step = int(state["step"])


@dataclass
class AdaptiveCurriculum:
    """Climb ``ladder`` one rung at a time when γ at the deepest active rung reaches ``threshold``."""

    ladder: Sequence[int]
    threshold: float = 0.5
    rung: int = 0
    step: int = 0
    moves: list[tuple[int, int]] = field(default_factory=list)  # (step, new deepest depth)

    def __post_init__(self) -> None:
        self.ladder = _check_depths(self.ladder, "ladder")
        if list(self.ladder) != sorted(set(self.ladder)):
            raise GF2ConfigError(f"ladder={list(self.ladder)} must increase, e.g. [0, 1, 3, 7].")
        if not 0.0 < self.threshold <= 1.0:
            raise GF2ConfigError(f"threshold={self.threshold} is outside (0, 1]; pass e.g. 0.5.")

    @property
    def kind(self) -> str:
        return "adaptive"

    def depths(self) -> tuple[int, ...]:
        return tuple(self.ladder[: self.rung + 1])

    def advance(self, step: int) -> None:
        """The trainer is at ``step`` (an adaptive curriculum moves only on :meth:`observe`)."""
        self.step = step

    def observe(self, step: int, gamma: Mapping[int, float]) -> bool:
        """Move a rung deeper if γ at the current deepest rung reached the threshold."""
        self.step = step
        current = self.ladder[self.rung]
        if self.rung + 1 < len(self.ladder) and gamma.get(current, 0.0) >= self.threshold:
            self.rung += 1
            self.moves.append((step, self.ladder[self.rung]))
            return True
        return False

    def state(self) -> dict[str, Any]:
        moves = [list(m) for m in self.moves]
        return {"kind": self.kind, "step": self.step, "rung": self.rung, "moves": moves}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.step, self.rung = int(state["step"]), int(state["rung"])
        self.moves = [(int(s), int(g)) for s, g in state.get("moves", [])]


Curriculum = FixedCurriculum | AdaptiveCurriculum


def make_curriculum(obj: Mapping[str, Any]) -> Curriculum:
    """From a config mapping: ``{kind: fixed, stages: [[0, [0, 1]], [50, [0, 1, 3]]]}`` or
    ``{kind: adaptive, ladder: [0, 1, 3, 7], threshold: 0.5}``."""
    kind = obj.get("kind", "fixed")
    if kind == "fixed":
        check_keys(obj, {"kind", "stages"}, "curriculum (kind fixed)")
        return FixedCurriculum(stages=[(s, d) for s, d in obj.get("stages", [])])
    if kind == "adaptive":
        check_keys(obj, {"kind", "ladder", "threshold"}, "curriculum (kind adaptive)")
        return AdaptiveCurriculum(ladder=obj.get("ladder", ()), threshold=float(obj.get("threshold", 0.5)))
    raise GF2ConfigError(f"curriculum kind={kind!r} is not 'fixed' or 'adaptive'.")


__all__ = ["AdaptiveCurriculum", "Curriculum", "FixedCurriculum", "make_curriculum"]
