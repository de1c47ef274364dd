"""Agents that play GF2Recon: the paper's estimators, SB3 checkpoints and LLM policies
(``gf2env.agents.llm``)."""

from gf2env.agents.base import Estimate
from gf2env.agents.estimator_policy import EstimatorPolicy
from gf2env.agents.estimators import (
    DataOnly,
    Diligent,
    Estimator,
    HistoryOnly,
    IntersectionDecoder,
    KnownTerms,
    Partial,
    make_estimator,
)

__all__ = [
    "DataOnly",
    "Diligent",
    "Estimate",
    "Estimator",
    "EstimatorPolicy",
    "HistoryOnly",
    "IntersectionDecoder",
    "KnownTerms",
    "Partial",
    "make_estimator",
]
