"""Agents that play GF2Recon: the paper's classical estimators and (later) LLM policies."""

from agents.estimators import (
    DataOnly,
    Diligent,
    Estimate,
    Estimator,
    HistoryOnly,
    IntersectionDecoder,
    KnownTerms,
    Partial,
    make_estimator,
)
from agents.policy import EstimatorPolicy

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
