"""Permutation-invariant policies for stable-baselines3 on ``GF2Recon-v1`` (PPO, A2C and DQN).

The K samples of an observation are a set, a candidate is a set of payload bits, and a known term
masks the samples it fires on; an MLP over the flattened bits knows none of this. Here:

- per sample ``k``: its address bits, payload bits, label, the current term's address bit ``a_g``
  and the prefix as its ``history`` says, encoded by one shared MLP into ``h_k``:

  - ``"exact"``: whether each known term ``j < depth`` fires on it (``a_j`` AND the term's payload
    bits, computed from the observation) and the residual label ``r_k`` (the label XOR those
    firings): using the history is built in;
  - ``"learned"``: the prefix encoded per known term, and what to make of it learned: per sample and
    known term, an MLP over the sample's address bit for the term and the four counts of (term bit,
    sample bit) pairs over the p payload bits (the sum over the term's bits of a learned pair
    embedding is linear in them), summed over the known terms; ``r_k`` is a learned
    ``sigmoid(w . h_k)``. Whether the policy learns to use the history is then measured, not given;
  - ``"none"``: the ablation without the prefix; the label stands for ``r_k`` (B's information);
- the action head scores candidate ``S`` from its member bits: per sample and bit ``i`` an embedding
  ``e_ki = f(h_k, v_ki)``; per sample and candidate ``sum_{i in S} e_ki`` with the exact firing
  ``c_kS = AND_{i in S} v_ki`` (through the ``(C, p)`` support incidence matrix, a buffer), ``a_g c_kS``,
  ``r_k`` and the label, through one shared layer (ReLU of a linear map); pooled over samples (mean
  and max) and scored by a shared MLP into one logit. Its parameters do not depend on ``C(p, d-1)``
  (nor on p, n or K);
- the value is an MLP over the samples' pooled ``h`` (mean and max) and the depth.

Mean and max pooling make logits and value invariant to the order of the samples. SB3's policy
sees the extractor's output as ``[logits (C) | value features]``: :class:`GF2SetPolicy` splits it,
passing the logits straight to the categorical distribution (no ``Linear(latent, C)`` action net).
For DQN, :class:`GF2SetQPolicy` takes the same scores as the candidates' Q-values.

In a config::

    ppo:                              # or a2c:, dqn:
      policy: GF2SetPolicy            # resolved by name and algorithm (see :func:`resolve_policy`)
      policy_kwargs: {hidden: 64, bit_hidden: 32, net_arch: [64], history: exact}

``d`` (the support size is ``d - 1``) is taken from the env by ``gf2env.train.sb3``. Checkpoints pickle the
policy class by its module path, so ``gf2 compare`` loads them as any other SB3 checkpoint.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.dqn.policies import DQNPolicy, QNetwork
from torch import nn

from gf2env.errors import GF2ConfigError
from gf2env.task.combinatorics import all_supports


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:], strict=False):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers)


HISTORY_MODES = ("exact", "learned", "none")  # what a GF2SetPolicy makes of the prefix (module docs)


class GF2CandidateHead(nn.Module):
    """One logit per candidate support, from per-sample per-bit embeddings; parameters independent
    of the number of candidates.

    The sample-candidate layer is applied by parts (the same map as one ``Linear`` over the member
    sum and the five exact features ``c_kS, a_g c_kS, r_k, label_k, a_g``): members through the
    ``(C, p)`` incidence matrix, channels first, so no ``(B, K, C, d-1, E)`` tensor is built."""

    def __init__(self, supports: np.ndarray, p: int, hidden: int, bit_hidden: int) -> None:
        super().__init__()
        incidence = np.zeros((len(supports), p), dtype=np.float32)
        np.put_along_axis(incidence, supports, 1.0, axis=1)
        self.incidence: torch.Tensor
        self.register_buffer("incidence", torch.as_tensor(incidence), persistent=False)
        self.size = supports.shape[1]  # d - 1 member bits a candidate
        self.bit_net = _mlp([hidden + 1, bit_hidden])
        self.member = nn.Linear(bit_hidden, bit_hidden, bias=False)  # on sum_{i in S} e_ki
        self.firing = nn.Linear(2, bit_hidden, bias=False)  # on c_kS and a_g c_kS
        self.sample = nn.Linear(3, bit_hidden)  # on r_k, label_k, a_g
        self.score = nn.Sequential(nn.Linear(2 * bit_hidden, bit_hidden), nn.ReLU(), nn.Linear(bit_hidden, 1))

    def forward(
        self, h: torch.Tensor, payload: torch.Tensor, residual: torch.Tensor, labels: torch.Tensor,
        a_g: torch.Tensor,
    ) -> torch.Tensor:  # fmt: skip
        """``h`` (B, K, H), ``payload`` (B, K, p), the rest (B, K) → logits (B, C)."""
        B, K, p = payload.shape
        per_bit = h.unsqueeze(2).expand(B, K, p, h.shape[-1])
        bits = self.bit_net(torch.cat([per_bit, payload.unsqueeze(-1)], -1))  # (B, K, p, E)
        # the per-sample part spread over the d-1 members, so that it is in every candidate's sum
        per_sample = self.sample(torch.stack([residual, labels, a_g], -1)) / self.size  # (B, K, E)
        spread = (self.member(bits) + per_sample.unsqueeze(2)).permute(3, 0, 1, 2)  # (E, B, K, p)
        members = spread @ self.incidence.T  # (E, B, K, C): channels first, candidates last
        # c_kS, the AND of the member bits, exact: all d-1 of them set
        fires = (payload @ self.incidence.T > self.size - 0.5).float()  # (B, K, C)
        fire_weight = self.firing(torch.stack([torch.ones_like(a_g), a_g], -1))  # (B, K, E)
        z = torch.relu(torch.addcmul(members, fires, fire_weight.permute(2, 0, 1).unsqueeze(-1)))
        pooled = torch.cat([z.mean(2), z.amax(2)], 0).permute(1, 2, 0)  # (B, C, 2E): over samples
        return self.score(pooled).squeeze(-1)


def check_history(history: Any) -> str:
    """``history`` if it is one of :data:`HISTORY_MODES`, else :class:`GF2ConfigError`."""
    if not isinstance(history, str) or history not in HISTORY_MODES:
        raise GF2ConfigError(
            f"GF2SetPolicy history={history!r} is not one of {list(HISTORY_MODES)}: 'exact' computes "
            "the residual, 'learned' learns it from the known terms, 'none' leaves the prefix out."
        )
    return history


class GF2SetExtractor(BaseFeaturesExtractor):
    """``[candidate logits (C) | pooled sample features (2 hidden) | depth one-hot (n+1)]`` of a
    ``GF2Recon-v1`` observation, invariant to the order of its samples (see the module docs)."""

    def __init__(
        self, observation_space: spaces.Dict, d: int, hidden: int = 64, bit_hidden: int = 32,
        history: str = "exact",
    ):  # fmt: skip
        n, p = (int(x) for x in observation_space["prefix"].shape or ())
        supports = all_supports(p, d - 1)
        self.num_candidates = len(supports)
        super().__init__(observation_space, self.num_candidates + 2 * hidden + n + 1)
        self.n, self.p, self.d, self.history = n, p, d, check_history(history)
        self.value_dim = 2 * hidden + n + 1
        # address (n), payload (p), label, a_g; then what the history adds
        extra = {"exact": n + 1, "learned": bit_hidden, "none": 0}[history]
        self.sample_net = _mlp([n + p + 2 + extra, hidden, hidden])
        if history == "learned":
            self.term_net = _mlp([5, bit_hidden, bit_hidden])  # per (sample, known term)
            self.residual_net = nn.Linear(hidden, 1)
        self.head = GF2CandidateHead(supports, p, hidden, bit_hidden)

    def depth(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """SB3's one-hot of ``Discrete(n + 1)`` as (B, n + 1) (the rollout buffer keeps a (B, 1) axis)."""
        return obs["depth"].reshape(len(obs["depth"]), self.n + 1)

    def sample_features(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """Per sample: the residual label (exact, learned or the label), ``a_g`` and ``h``."""
        prefix, address, payload = obs["prefix"], obs["address"], obs["payload"]
        labels, depth = obs["labels"], self.depth(obs)
        known = torch.cumsum(depth.flip(-1), -1).flip(-1)[:, 1:]  # (B, n): 1 where j < depth
        a_g = (address * depth[:, None, : self.n]).sum(-1)  # the current term's address bit
        x = [address, payload, labels.unsqueeze(-1), a_g.unsqueeze(-1)]
        if self.history != "none":  # term j's payload bits set in sample k
            both = torch.einsum("bkp,bjp->bkj", payload, prefix)
        if self.history == "exact":
            missing = prefix.sum(-1).unsqueeze(1) - both  # term j's payload bits not set
            term_fires = address * (missing < 0.5).float() * known.unsqueeze(1)  # (B, K, n)
            residual = torch.remainder(labels + term_fires.sum(-1), 2.0)
            h = self.sample_net(torch.cat([*x, term_fires, residual.unsqueeze(-1)], -1))
        elif self.history == "learned":
            term_bits = prefix.sum(-1).unsqueeze(1).expand_as(both)
            sample_bits = payload.sum(-1).unsqueeze(-1).expand_as(both)
            counts = torch.stack([both, term_bits - both, sample_bits - both,
                                  self.p - term_bits - sample_bits + both], -1)  # fmt: skip
            messages = self.term_net(torch.cat([address.unsqueeze(-1), counts], -1))  # (B, K, n, E)
            history = (messages * known[:, None, :, None]).sum(2)  # over the known terms
            h = self.sample_net(torch.cat([*x, history], -1))
            residual = torch.sigmoid(self.residual_net(h)).squeeze(-1)
        else:  # the ablation: no prefix, the label stands for the residual
            h = self.sample_net(torch.cat(x, -1))
            residual = labels
        return residual, a_g, h

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        residual, a_g, h = self.sample_features(obs)
        logits = self.head(h, obs["payload"], residual, obs["labels"], a_g)
        return torch.cat([logits, h.mean(1), h.amax(1), self.depth(obs)], -1)


class GF2SplitLatent(nn.Module):
    """The policy's ``mlp_extractor``: the logits pass through, the value features go through an MLP."""

    def __init__(self, num_candidates: int, value_dim: int, vf_arch: list[int]) -> None:
        super().__init__()
        self.num_candidates = num_candidates
        self.latent_dim_pi = num_candidates
        self.value_net = _mlp([value_dim, *vf_arch])
        self.latent_dim_vf = vf_arch[-1] if vf_arch else value_dim

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)

    def forward_actor(self, features: torch.Tensor) -> torch.Tensor:
        return features[:, : self.num_candidates]

    def forward_critic(self, features: torch.Tensor) -> torch.Tensor:
        return self.value_net(features[:, self.num_candidates :])


class _SetSettings:
    """What :class:`GF2SetPolicy` and :class:`GF2SetQPolicy` share: their keyword arguments, the
    extractor they configure from them, the check against the env's actions and the near-uniform
    start, and saving the arguments (not the extractor class) with a checkpoint."""

    d: int
    hidden: int
    bit_hidden: int
    history: str
    action_space: spaces.Space

    def _settings(self, action_space: spaces.Space, kwargs: dict[str, Any], d: int, hidden: int,
                  bit_hidden: int, history: str) -> None:  # fmt: skip
        name = type(self).__name__
        if not isinstance(action_space, spaces.Discrete):
            raise GF2ConfigError(f"{name} needs GF2Recon-v1's Discrete actions, not {action_space}.")
        self.d, self.hidden, self.bit_hidden, self.history = d, hidden, bit_hidden, check_history(history)
        kwargs["features_extractor_class"] = GF2SetExtractor
        kwargs["features_extractor_kwargs"] = {"d": d, "hidden": hidden, "bit_hidden": bit_hidden,
                                               "history": history}  # fmt: skip

    def _checked(self, extractor: nn.Module) -> GF2SetExtractor:
        """``extractor`` once its candidates are the env's actions."""
        assert isinstance(extractor, GF2SetExtractor)
        actions = int(self.action_space.n)  # type: ignore[attr-defined]
        if extractor.num_candidates != actions:
            raise GF2ConfigError(
                f"{type(self).__name__} with d={self.d} scores C(p, d-1)={extractor.num_candidates} "
                f"candidates but the env has {actions} actions; pass the env's d."
            )
        return extractor

    @staticmethod
    def _near_uniform(extractor: GF2SetExtractor) -> None:
        """The head's last layer near zero: every candidate starts alike, as with SB3's action net."""
        last = extractor.head.score[-1]
        assert isinstance(last, nn.Linear)
        nn.init.orthogonal_(last.weight, gain=0.01)
        nn.init.zeros_(last.bias)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()  # type: ignore[misc]
        data.update(d=self.d, hidden=self.hidden, bit_hidden=self.bit_hidden, history=self.history)
        for key in ("features_extractor_class", "features_extractor_kwargs"):
            data.pop(key, None)
        return data


class GF2SetPolicy(_SetSettings, ActorCriticPolicy):
    """Actor-critic with :class:`GF2SetExtractor`; its logits are the action distribution's.

    ``d`` is the task's term degree; ``hidden``/``bit_hidden`` size the extractor; ``net_arch`` (a
    list, or ``{vf: [...]}``) the value MLP; ``history`` (:data:`HISTORY_MODES`) what it makes of the
    prefix: ``"exact"`` residual, ``"learned"`` per-term encoding, ``"none"`` (B's information)."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, lr_schedule: Any, *,
                 d: int, hidden: int = 64, bit_hidden: int = 32, history: str = "exact",
                 **kwargs: Any) -> None:  # fmt: skip
        self._settings(action_space, kwargs, d, hidden, bit_hidden, history)
        kwargs.setdefault("share_features_extractor", True)
        if not kwargs["share_features_extractor"]:
            raise GF2ConfigError("GF2SetPolicy shares its extractor between actor and critic; drop "
                                 "share_features_extractor: false.")  # fmt: skip
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def _build_mlp_extractor(self) -> None:
        arch = self.net_arch
        vf = list(arch.get("vf", [64]) if isinstance(arch, dict) else arch)
        extractor = self._checked(self.features_extractor)
        self.mlp_extractor = GF2SplitLatent(extractor.num_candidates, extractor.value_dim, vf)  # type: ignore[assignment]

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the extractor's logits are the action logits
        self._near_uniform(self._checked(self.features_extractor))  # after SB3's own initialisation
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)  # type: ignore[call-arg]


class GF2CandidateValues(nn.Module):
    """A Q-network's ``q_net``: the extractor's candidate scores are the action values."""

    def __init__(self, num_candidates: int) -> None:
        super().__init__()
        self.num_candidates = num_candidates

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return features[:, : self.num_candidates]


class GF2SetQPolicy(_SetSettings, DQNPolicy):
    """DQN's policy with :class:`GF2SetExtractor`: the head's score of a candidate is its Q-value
    (with ``gamma: 0`` the expected reward, the chance the candidate is the next term); the same
    keyword arguments as :class:`GF2SetPolicy` (``net_arch`` is not used: there is no MLP after the head)."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, lr_schedule: Any, *,
                 d: int, hidden: int = 64, bit_hidden: int = 32, history: str = "exact",
                 **kwargs: Any) -> None:  # fmt: skip
        self._settings(action_space, kwargs, d, hidden, bit_hidden, history)
        assert isinstance(action_space, spaces.Discrete)  # _settings refused any other
        if kwargs.get("net_arch") is not None:
            raise GF2ConfigError(
                f"GF2SetQPolicy has no MLP after its head; drop net_arch={kwargs['net_arch']}."
            )
        kwargs["net_arch"] = []  # SB3's q_net, replaced by the head's scores (make_q_net)
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def make_q_net(self) -> QNetwork:
        net = super().make_q_net()
        extractor = self._checked(net.features_extractor)
        self._near_uniform(extractor)
        net.q_net = GF2CandidateValues(extractor.num_candidates)  # type: ignore[assignment]
        return net


# Policies a config names by string (YAML cannot hold a class): the class each algorithm trains.
SB3_POLICIES: dict[str, dict[str, type]] = {
    "GF2SetPolicy": {"ppo": GF2SetPolicy, "a2c": GF2SetPolicy, "dqn": GF2SetQPolicy},
}


def resolve_policy(name: Any, algo: str) -> Any:
    """The ``policy`` an SB3 algorithm's constructor takes: our class for a name of
    :data:`SB3_POLICIES`, SB3's own alias (``MultiInputPolicy``...) unchanged."""
    import stable_baselines3 as sb3

    if name in SB3_POLICIES:  # each of ours has a class for every algorithm of SB3_ALGOS
        return SB3_POLICIES[name][algo]
    aliases = list(getattr(sb3, algo.upper()).policy_aliases)
    if name not in aliases:
        raise GF2ConfigError(f"{algo}: policy={name!r} is not one of {aliases + list(SB3_POLICIES)}.")
    return name


__all__ = [
    "HISTORY_MODES",
    "SB3_POLICIES",
    "GF2CandidateHead",
    "GF2CandidateValues",
    "GF2SetExtractor",
    "GF2SetPolicy",
    "GF2SetQPolicy",
    "resolve_policy",
]
