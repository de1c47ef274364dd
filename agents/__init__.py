"""Agents that play GF2Recon: the paper's estimators, SB3 checkpoints and LLM policies (``agents.llm``)."""

from agents.base import Estimate
from agents.estimator_policy import EstimatorPolicy
from agents.estimators import (
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
