"""A saved stable-baselines3 policy as an agent of the harness (``gf2 compare``), next to estimators.

A policy trained on ``GF2Recon-v1`` with ``n`` address bits answers any record of the same
``(p, d, K)`` at depth ``g < n``: the record is turned into exactly the observation the environment
shows at that step (prefix rows ``0..g-1`` set, address bits padded with the zeros the oracle puts
after ``a_{g+1}``, ``depth = g``). Its ``action`` is the deterministic one (what
``model.predict(obs, deterministic=True)`` returns); its ``gamma`` is the policy's probability of
the true next term (the action distribution of PPO/A2C), or 0/1 for value-based policies (DQN),
whose deterministic choice is all they propose.

In a compare config::

    agents:
      - A
      - sb3: {path: results/sb3-ppo/final.zip, algo: ppo, name: ppo}
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gf2env.agents.base import Cell, ChecksSupport, Estimate
from gf2env.config.yaml_files import dataclass_from_mapping
from gf2env.errors import GF2ConfigError
from gf2env.records.record import Record

SB3_ALGOS = ("ppo", "a2c", "dqn")
#: Top-level modules that checkpoints saved before the rename name (``agents.set_policy.GF2SetPolicy``):
#: the repository's agents/ and train/ folders now install as ``gf2env.agents`` and ``gf2env.train``.
OLD_MODULES = {"agents": "gf2env.agents", "train": "gf2env.train"}


@dataclass(frozen=True)
class SB3Spec:
    """A checkpoint: ``path`` (the ``.zip`` SB3 saves), ``algo`` (one of :data:`SB3_ALGOS`), ``name``."""

    path: str
    algo: str = "ppo"
    name: str | None = None

    def __post_init__(self) -> None:
        if self.algo not in SB3_ALGOS:
            raise GF2ConfigError(f"sb3 algo={self.algo!r} is not one of {SB3_ALGOS}.")
        if not self.path:
            raise GF2ConfigError("sb3 needs path: the .zip a run saved (e.g. results/sb3-ppo/final.zip).")

    @property
    def label(self) -> str:
        return self.name or Path(self.path).stem

    @classmethod
    def from_mapping(cls, obj: dict[str, Any]) -> SB3Spec:
        return dataclass_from_mapping(
            cls, obj, "sb3", convert={"path": str, "algo": str}, defaults={"path": ""}
        )


class _RenamingUnpickler(pickle.Unpickler):
    """An unpickler that finds the classes of older checkpoints under their new module names."""

    def find_class(self, module: str, name: str) -> Any:
        top, dot, rest = module.partition(".")
        return super().find_class(OLD_MODULES.get(top, top) + dot + rest, name)


def _unpickle(value: dict[str, str]) -> Any:
    return _RenamingUnpickler(io.BytesIO(base64.b64decode(value[":serialized:"].encode()))).load()


def _read_policy(path: Path) -> tuple[dict[str, Any], Any]:
    """A checkpoint zip's JSON ``data`` entry and its policy class (older module names renamed); a zip
    that is not one, or a class that does not unpickle, is a typed error."""
    try:
        with zipfile.ZipFile(path) as archive:
            data = json.loads(archive.read("data"))
        return data, _unpickle(data["policy_class"])
    except Exception as err:  # zipfile errors, no data entry, not JSON, a policy class that does not unpickle
        raise _unreadable(path, err) from None


def stored_objects(data: dict[str, Any], skip: str = "") -> dict[str, Any]:
    """The pickled entries of a checkpoint's ``data`` (its policy class, policy kwargs, spaces...), read
    with :data:`OLD_MODULES` renamed. Given to SB3's ``load`` as ``custom_objects``, they load checkpoints
    saved before and after the rename alike. An entry that does not unpickle here is left to SB3, and
    entry ``skip`` (one already read) is not read again."""
    objects = {}
    for key, value in data.items():
        if key != skip and isinstance(value, dict) and ":serialized:" in value:
            try:
                objects[key] = _unpickle(value)
            except Exception:  # SB3 reads it (or warns that it cannot) as it always does
                continue
    return objects


def load_sb3(spec: SB3Spec) -> Any:
    """The SB3 model of a checkpoint (on CPU); its algorithm checked first (:func:`check_algorithm`)."""
    import stable_baselines3 as sb3

    path = Path(spec.path)
    if not path.exists():
        raise GF2ConfigError(f"SB3 checkpoint {path} does not exist; train one with gf2 train sb3.")
    data, policy = _read_policy(path)  # the data entry read (and the policy class unpickled) once
    _check_fits(path, policy, spec.algo)
    try:
        return getattr(sb3, spec.algo.upper()).load(
            str(path),
            device="cpu",
            custom_objects={**stored_objects(data, skip="policy_class"), "policy_class": policy},
        )
    except Exception as err:  # e.g. a damaged parameters file: torch's or zipfile's errors
        raise _unreadable(path, err) from None


def _unreadable(path: Path, err: Exception) -> GF2ConfigError:
    return GF2ConfigError(
        f"SB3 checkpoint {path} could not be read ({type(err).__name__}: {' '.join(str(err).split())}); "
        "pass the .zip a gf2 train sb3 run saved."
    )


def check_algorithm(path: Path, algo: str) -> None:
    """Refuse a checkpoint whose policy class (stored in the zip) is not one ``algo`` trains: SB3 would
    otherwise fail deep inside ``load`` (a DQN zip read as PPO, or the reverse). PPO and A2C share
    their policies, so a checkpoint of one loads, and acts the same, as the other. Only the zip's
    ``data`` entry is read, and of it only the policy class is unpickled, older module names renamed
    (the parameters are ``load``'s to read, once)."""
    _check_fits(path, _read_policy(path)[1], algo)


def _check_fits(path: Path, policy: Any, algo: str) -> None:
    import stable_baselines3 as sb3

    fits = [
        name
        for name in SB3_ALGOS
        if isinstance(policy, type)
        and any(issubclass(policy, cls) for cls in getattr(sb3, name.upper()).policy_aliases.values())
    ]
    if algo not in fits:
        found = " or ".join(fits) if fits else "no algorithm of " + "/".join(SB3_ALGOS)
        name = getattr(policy, "__name__", repr(policy))
        raise GF2ConfigError(
            f"SB3 checkpoint {path} holds a {name} policy, trained by {found}, not algo={algo!r}; "
            f"pass the algo it was trained with{f' (algo: {fits[0]})' if fits else ''}."
        )


def observations(records: list[Record], n: int) -> dict[str, np.ndarray]:
    """The batched observations ``GF2Recon-v1`` (``n`` address bits) shows at these records' steps."""
    R, rec0 = len(records), records[0]
    K, p = rec0.K, rec0.p
    prefix = np.zeros((R, n, p), dtype=np.int8)
    address = np.zeros((R, K, n), dtype=np.int8)
    for i, rec in enumerate(records):
        for j, term in enumerate(rec.prefix):
            prefix[i, j, list(term)] = 1
        width = min(rec.n, n)
        address[i, :, :width] = rec.address[:, :width]
    return {
        "prefix": prefix,
        "depth": np.array([rec.g for rec in records], dtype=np.int64),
        "address": address,
        "payload": np.stack([rec.payload for rec in records]).astype(np.int8),
        "labels": np.stack([rec.labels for rec in records]).astype(np.int8),
    }


class SB3Agent(ChecksSupport):
    """A trained SB3 policy behind the estimators' interface (see the module docs)."""

    def __init__(self, spec: SB3Spec, model: Any = None) -> None:
        self.spec = spec
        self.model = model if model is not None else load_sb3(spec)
        space = self.model.observation_space
        self.n, self.p = (int(x) for x in space["prefix"].shape)
        self.K = int(space["labels"].shape[0])
        self.num_actions = int(self.model.action_space.n)

    @property
    def name(self) -> str:
        return self.spec.label

    def check(self, p: int, d: int, K: int, g: int) -> None:
        from math import comb

        if (p, K) != (self.p, self.K) or comb(p, d - 1) != self.num_actions:
            raise GF2ConfigError(
                f"{self.name} was trained at p={self.p}, K={self.K} with {self.num_actions} actions; "
                f"it cannot answer p={p}, d={d}, K={K}."
            )
        if g >= self.n:
            raise GF2ConfigError(f"{self.name} was trained with n={self.n} terms; depth g={g} needs n > g.")

    def action_probabilities(self, obs: dict[str, np.ndarray]) -> np.ndarray | None:
        """(R, C) action probabilities of a stochastic policy, ``None`` for a value-based one."""
        if self.spec.algo == "dqn":
            return None
        import torch

        with torch.no_grad():
            tensor, _ = self.model.policy.obs_to_tensor(obs)
            dist = self.model.policy.get_distribution(tensor)
            return dist.distribution.probs.cpu().numpy()

    def answer(self, cell: Cell, rng: np.random.Generator | None = None) -> Estimate:
        """Deterministic actions, and the policy's probability of the truth, for a cell's records."""
        b = cell.batch
        self.check(b.p, b.d, b.K, b.g)
        obs = observations(list(cell.records), self.n)
        actions, _ = self.model.predict(obs, deterministic=True)
        actions = np.asarray(actions, dtype=np.int64).reshape(b.R)
        assert b.target is not None
        probs = self.action_probabilities(obs)
        correct = (actions == b.target).astype(float)
        gamma = correct if probs is None else probs[np.arange(b.R), b.target]
        ties = np.ones(b.R, dtype=np.int64)
        return Estimate(action=actions, tie_size=ties, gamma=gamma, argmax_accuracy=correct)


__all__ = ["SB3_ALGOS", "SB3Agent", "SB3Spec", "check_algorithm", "load_sb3", "observations"]
