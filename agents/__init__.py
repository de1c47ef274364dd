"""Agents that play GF2Recon: classical estimators, baselines and (later) LLM policies."""

from agents.baselines import IntersectionDecoder, UniformAgent, residual_labels

__all__ = ["IntersectionDecoder", "UniformAgent", "residual_labels"]
