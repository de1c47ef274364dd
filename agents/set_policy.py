"""A permutation-invariant actor-critic policy for stable-baselines3 on ``GF2Recon-v1`` (PPO and A2C).

The K samples of an observation are a set, a candidate is a set of payload bits, and a known term
masks the samples it fires on; an MLP over the flattened bits knows none of this. Here:

- per sample ``k``: its address bits, payload bits, label, whether each known term ``j < depth``
  fires on it (``a_j`` AND the term's payload bits, computed exactly from the observation), the
  residual label ``r_k`` (the label XOR those firings) and the current term's address bit ``a_g``,
  encoded by one shared MLP into ``h_k``;
- the action head scores candidate ``S`` from its member bits: per sample and bit ``i`` an embedding
  ``e_ki = f(h_k, v_ki)``; per sample and candidate ``sum_{i in S} e_ki`` with the exact firing
  ``c_kS = AND_{i in S} v_ki`` (through the ``(C, d-1)`` support table, a buffer), ``a_g c_kS``,
  ``r_k`` and the label, through a shared MLP; pooled over samples (mean and max) and scored by a
  shared MLP into one logit. Its parameters do not depend on ``C(p, d-1)`` (nor on p, n or K);
- the value is an MLP over the samples' pooled ``h`` (mean and max) and the depth.

Mean and max pooling make logits and value invariant to the order of the samples. SB3's policy
sees the extractor's output as ``[logits (C) | value features]``: :class:`GF2SetPolicy` splits it,
passing the logits straight to the categorical distribution (no ``Linear(latent, C)`` action net).

In a config::

    ppo:
      policy: GF2SetPolicy            # resolved by name (see :func:`resolve_policy`)
      policy_kwargs: {hidden: 64, bit_hidden: 32, net_arch: [64]}

``d`` (the support size is ``d - 1``) is taken from the env by ``train.sb3``. Checkpoints pickle the
policy class by its module path, so ``gf2 compare`` loads them as any other SB3 checkpoint.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from gf2env.combinatorics import all_supports
from gf2env.errors import GF2ConfigError


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:], strict=False):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers)


class GF2CandidateHead(nn.Module):
    """One logit per candidate support, from per-sample per-bit embeddings; parameters independent
    of the number of candidates."""

    NUM_EXACT = 5  # c_kS, a_g c_kS, r_k, label_k, a_g,k

    def __init__(self, supports: np.ndarray, hidden: int, bit_hidden: int) -> None:
        super().__init__()
        self.supports: torch.Tensor
        self.register_buffer("supports", torch.as_tensor(supports, dtype=torch.long), persistent=False)
        self.bit_net = _mlp([hidden + 1, bit_hidden])
        self.pair_net = _mlp([bit_hidden + self.NUM_EXACT, bit_hidden, bit_hidden])
        self.score = nn.Sequential(nn.Linear(2 * bit_hidden, bit_hidden), nn.ReLU(), nn.Linear(bit_hidden, 1))

    def forward(
        self, h: torch.Tensor, payload: torch.Tensor, residual: torch.Tensor, labels: torch.Tensor,
        a_g: torch.Tensor,
    ) -> torch.Tensor:  # fmt: skip
        """``h`` (B, K, H), ``payload`` (B, K, p), the rest (B, K) → logits (B, C)."""
        B, K, p = payload.shape
        per_bit = h.unsqueeze(2).expand(B, K, p, h.shape[-1])
        bits = self.bit_net(torch.cat([per_bit, payload.unsqueeze(-1)], -1))
        members = bits[:, :, self.supports]  # (B, K, C, d-1, E)
        fires = payload[:, :, self.supports].prod(-1)  # (B, K, C): AND of the member bits, exact
        C = fires.shape[-1]
        per_sample = torch.stack([residual, labels, a_g], -1).unsqueeze(2).expand(B, K, C, 3)
        exact = torch.cat([fires.unsqueeze(-1), (a_g.unsqueeze(-1) * fires).unsqueeze(-1), per_sample], -1)
        z = self.pair_net(torch.cat([members.sum(3), exact], -1))  # (B, K, C, E)
        pooled = torch.cat([z.mean(1), z.amax(1)], -1)  # (B, C, 2E): over samples
        return self.score(pooled).squeeze(-1)


class GF2SetExtractor(BaseFeaturesExtractor):
    """``[candidate logits (C) | pooled sample features (2 hidden) | depth one-hot (n+1)]`` of a
    ``GF2Recon-v1`` observation, invariant to the order of its samples (see the module docs)."""

    def __init__(
        self, observation_space: spaces.Dict, d: int, hidden: int = 64, bit_hidden: int = 32,
        history: bool = True,
    ):  # fmt: skip
        n, p = (int(x) for x in observation_space["prefix"].shape or ())
        supports = all_supports(p, d - 1)
        self.num_candidates = len(supports)
        super().__init__(observation_space, self.num_candidates + 2 * hidden + n + 1)
        self.n, self.p, self.d, self.history = n, p, d, history
        self.value_dim = 2 * hidden + n + 1
        self.sample_net = _mlp([2 * n + p + 3, hidden, hidden])
        self.head = GF2CandidateHead(supports, hidden, bit_hidden)

    def depth(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """SB3's one-hot of ``Discrete(n + 1)`` as (B, n + 1) (the rollout buffer keeps a (B, 1) axis)."""
        return obs["depth"].reshape(len(obs["depth"]), self.n + 1)

    def sample_features(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """Per sample: the exact features (known terms' firings, residual label, ``a_g``) and ``h``."""
        prefix, address, payload = obs["prefix"], obs["address"], obs["payload"]
        labels, depth = obs["labels"], self.depth(obs)
        known = torch.cumsum(depth.flip(-1), -1).flip(-1)[:, 1:]  # (B, n): 1 where j < depth
        missing = torch.einsum("bkp,bjp->bkj", 1.0 - payload, prefix)  # payload bits of term j not set
        term_fires = address * (missing < 0.5).float() * known.unsqueeze(1)  # (B, K, n)
        if not self.history:  # the ablation: no prefix, the label stands for the residual
            term_fires = torch.zeros_like(term_fires)
        residual = torch.remainder(labels + term_fires.sum(-1), 2.0)
        a_g = (address * depth[:, None, : self.n]).sum(-1)  # the current term's address bit
        x = torch.cat([address, payload, labels.unsqueeze(-1), term_fires, residual.unsqueeze(-1),
                       a_g.unsqueeze(-1)], -1)  # fmt: skip
        return residual, a_g, self.sample_net(x)

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


class GF2SetPolicy(ActorCriticPolicy):
    """Actor-critic with :class:`GF2SetExtractor`; its logits are the action distribution's.

    ``d`` is the task's term degree; ``hidden``/``bit_hidden`` size the extractor; ``net_arch`` (a
    list, or ``{vf: [...]}``) the value MLP; ``history=False`` is the ablation that does not see the
    prefix (no known-term firings, the label in place of the residual: estimator B's information)."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, lr_schedule: Any, *,
                 d: int, hidden: int = 64, bit_hidden: int = 32, history: bool = True,
                 **kwargs: Any) -> None:  # fmt: skip
        if not isinstance(action_space, spaces.Discrete):
            raise GF2ConfigError(f"GF2SetPolicy needs GF2Recon-v1's Discrete actions, not {action_space}.")
        self.d, self.hidden, self.bit_hidden, self.history = d, hidden, bit_hidden, history
        kwargs["features_extractor_class"] = GF2SetExtractor
        kwargs["features_extractor_kwargs"] = {"d": d, "hidden": hidden, "bit_hidden": bit_hidden,
                                               "history": history}  # fmt: skip
        kwargs.setdefault("share_features_extractor", True)
        if not kwargs["share_features_extractor"]:
            raise GF2ConfigError("GF2SetPolicy shares its extractor between actor and critic; drop "
                                 "share_features_extractor: false.")  # fmt: skip
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def _build_mlp_extractor(self) -> None:
        arch = self.net_arch
        vf = list(arch.get("vf", [64]) if isinstance(arch, dict) else arch)
        extractor = self.features_extractor
        assert isinstance(extractor, GF2SetExtractor)
        if extractor.num_candidates != int(self.action_space.n):  # type: ignore[attr-defined]
            raise GF2ConfigError(
                f"GF2SetPolicy with d={self.d} scores C(p, d-1)={extractor.num_candidates} candidates but "
                f"the env has {self.action_space.n} actions; pass the env's d."  # type: ignore[attr-defined]
            )
        self.mlp_extractor = GF2SplitLatent(extractor.num_candidates, extractor.value_dim, vf)  # type: ignore[assignment]

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the extractor's logits are the action logits
        extractor = self.features_extractor
        assert isinstance(extractor, GF2SetExtractor)
        last = extractor.head.score[-1]
        assert isinstance(last, nn.Linear)
        nn.init.orthogonal_(last.weight, gain=0.01)  # near-uniform at the start, as SB3's action net
        nn.init.zeros_(last.bias)
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)  # type: ignore[call-arg]

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(d=self.d, hidden=self.hidden, bit_hidden=self.bit_hidden, history=self.history)
        for key in ("features_extractor_class", "features_extractor_kwargs"):
            data.pop(key, None)
        return data


# Policies a config names by string (YAML cannot hold a class), with the algorithms that train them.
SB3_POLICIES: dict[str, tuple[type, tuple[str, ...]]] = {"GF2SetPolicy": (GF2SetPolicy, ("ppo", "a2c"))}


def resolve_policy(name: Any, algo: str) -> Any:
    """The ``policy`` an SB3 algorithm's constructor takes: our class for a name of
    :data:`SB3_POLICIES`, SB3's own alias (``MultiInputPolicy``...) unchanged."""
    import stable_baselines3 as sb3

    if name in SB3_POLICIES:
        cls, algos = SB3_POLICIES[name]
        if algo not in algos:
            raise GF2ConfigError(f"policy {name} is trained by {' or '.join(algos)}, not algo={algo!r}.")
        return cls
    aliases = list(getattr(sb3, algo.upper()).policy_aliases)
    if name not in aliases:
        raise GF2ConfigError(f"{algo}: policy={name!r} is not one of {aliases + list(SB3_POLICIES)}.")
    return name


__all__ = ["SB3_POLICIES", "GF2CandidateHead", "GF2SetExtractor", "GF2SetPolicy", "resolve_policy"]
