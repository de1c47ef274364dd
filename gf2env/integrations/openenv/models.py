"""The wire types of the OpenEnv server: one Action, Observation and State model per environment kind.

The array env (``GF2Recon-v*``) takes ``GF2ReconAction(action=rank)`` or ``GF2ReconAction(action=[i, j,
...])`` (the support itself), exactly the two forms ``GF2ReconEnv.step`` accepts; its observation carries
the ``Dict`` observation's arrays as nested lists of 0/1 (:meth:`GF2ReconObservation.arrays` gives the
NumPy dict back). The text env (``GF2ReconText-v*``) takes ``GF2ReconTextAction(response=...)`` and
returns the prompt. Both observations carry the step's ``info`` as JSON (:func:`jsonable`) and
``terminated``/``truncated`` separately; OpenEnv's ``done`` is their union and ``reward`` is ``None``
after a reset. The types are strict: a float, a bool or a string where an integer belongs, or an
unknown field, fails validation instead of being converted.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field, StrictInt, StrictStr


def jsonable(value: Any) -> Any:
    """``value`` (an env's ``info``) with tuples as lists and NumPy values as Python ones, keys as str."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


class GF2ReconAction(Action):
    """One answer to ``GF2Recon-v*``: the support's rank in ``Discrete(C(p, d-1))``, or its indices."""

    action: StrictInt | list[StrictInt] = Field(
        description="The next term S_g: its lexicographic rank (an int in [0, C(p, d-1))) or its d - 1 "
        "distinct payload indices (a list of ints in [0, p))."
    )


class GF2ReconTextAction(Action):
    """One reply to ``GF2ReconText-v*``: the model's raw text, graded by gf2env's scorer."""

    response: StrictStr = Field(description="The model's reply; its last \\boxed{[...]} answer is graded.")


class _StepFields(Observation):
    """What every observation of ours adds to OpenEnv's (``done``, ``reward``)."""

    terminated: bool = Field(default=False, description="The episode ended (Gymnasium's terminated).")
    truncated: bool = Field(default=False, description="The episode was cut short (never, for gf2env).")
    info: dict[str, Any] = Field(default_factory=dict, description="The env's info dict, as JSON.")


class GF2ReconObservation(_StepFields):
    """``GF2Recon-v*``'s ``Dict`` observation as nested lists of 0/1 (see the env card)."""

    prefix: list[list[int]] = Field(description="(n, p): row j < g the indicator of S_j, later rows 0.")
    depth: int = Field(description="The current depth g (n after the last step).")
    address: list[list[int]] = Field(description="(K, n): the samples' address bits.")
    payload: list[list[int]] = Field(description="(K, p): the samples' payload bits.")
    labels: list[int] = Field(description="(K,): the samples' labels y.")

    def arrays(self) -> dict[str, np.ndarray | np.int64]:
        """The observation as the env returns it in-process (int8 arrays, the depth an ``np.int64``)."""
        return {
            "prefix": np.asarray(self.prefix, dtype=np.int8),
            "depth": np.int64(self.depth),
            "address": np.asarray(self.address, dtype=np.int8),
            "payload": np.asarray(self.payload, dtype=np.int8),
            "labels": np.asarray(self.labels, dtype=np.int8),
        }


class GF2ReconTextObservation(_StepFields):
    """``GF2ReconText-v*``'s observation: the step's prompt (``""`` after the last step)."""

    prompt: str = Field(description="The current step rendered as a prompt; its chat form is in info.")


class GF2ReconState(State):
    """A session's state: which env with which arguments, the last reset's seed, the depth, done."""

    env_id: str = Field(default="", description="The Gymnasium id served, e.g. GF2ReconText-v1.")
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="gym.make's keyword arguments.")
    seed: int | None = Field(default=None, description="The seed of the last reset (None: unseeded).")
    depth: int = Field(default=0, description="The current depth g.")
    done: bool = Field(default=True, description="No episode is running (before the first reset, or ended).")


__all__ = [
    "GF2ReconAction",
    "GF2ReconObservation",
    "GF2ReconState",
    "GF2ReconTextAction",
    "GF2ReconTextObservation",
    "jsonable",
]
