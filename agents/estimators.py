"""The paper's classical estimators (docs/design.md §2) as batch functions over steps.

Each estimator maps a :class:`~gf2env.task.posterior.StepBatch` to log weights over the ``C(p, d-1)``
candidates (uniform prior), from which :meth:`Estimator.evaluate` reports, per step, γ (posterior
mass on the truth), the argmax action with ties broken by a generator, the tie size and the
ties-split argmax accuracy. :class:`gf2env.agents.estimator_policy.EstimatorPolicy` plays any of them on the
env.

=========== ============================================================================
name        estimator
=========== ============================================================================
``A``       diligent: prefix + data, uniform over the consistent candidates
``decoder`` intersection decoder (recovery theorem): uniform over the subsets of the
            positive-residual intersection
``B``       data only, the paper's composite likelihood
``B-exact`` data only, exact posterior (small depths; see ``EXACT_WORK_LIMIT``)
``C``       history only: uniform
``D(...)``  partial: knows ``k`` prefix terms (``k=3``, ``u=0.5`` for ``k = floor(u g)``, or
            ``g//2``), marginalises the rest like B (``D-exact(...)`` like B-exact)
=========== ============================================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import comb, floor

import numpy as np

from gf2env.agents.base import Cell, ChecksSupport, Estimate
from gf2env.errors import GF2ConfigError
from gf2env.task.oracle import MAX_TERMS
from gf2env.task.posterior import (
    EXACT_WORK_LIMIT,
    StepBatch,
    argmax_with_ties,
    check_exact,
    composite_log_likelihood,
    consistent_candidates,
    exact_log_likelihood,
    exact_work,
    intersection_candidates,
    known_terms,
    max_exact_unknown,
    normalise,
    sample_actions,
)

LIKELIHOODS = ("composite", "exact")


class Estimator(ChecksSupport):
    """Base class: subclasses implement :meth:`log_weights` and set ``name``."""

    name = "estimator"

    def log_weights(self, batch: StepBatch, rng: np.random.Generator | None = None) -> np.ndarray:
        """(R, C) unnormalised log posterior (``-inf`` for impossible candidates)."""
        raise NotImplementedError

    def posterior(self, batch: StepBatch, rng: np.random.Generator | None = None) -> np.ndarray:
        """(R, C) posterior probabilities."""
        return normalise(self.log_weights(batch, rng))

    def evaluate(self, batch: StepBatch, rng: np.random.Generator) -> Estimate:
        """γ, argmax action (ties broken with ``rng``) and tie statistics for every step."""
        self.check(batch.p, batch.d, batch.K, batch.g)
        actions, ties, gammas, accs = [], [], [], []
        for chunk in batch.chunks():
            lw = self.log_weights(chunk, rng)
            action, tie = argmax_with_ties(lw, rng)
            actions.append(action)
            ties.append(tie)
            if chunk.target is not None:
                rows = np.arange(chunk.R)
                gammas.append(normalise(lw)[rows, chunk.target])
                accs.append((lw[rows, chunk.target] == lw.max(axis=1)) / tie)
        known = batch.target is not None
        return Estimate(
            action=np.concatenate(actions),
            tie_size=np.concatenate(ties),
            gamma=np.concatenate(gammas) if known else None,
            argmax_accuracy=np.concatenate(accs) if known else None,
        )

    def answer(self, cell: Cell, rng: np.random.Generator) -> Estimate:
        """:meth:`evaluate` on a cell's batch: the interface
        :func:`gf2env.agents.harness.evaluate.evaluate` uses."""
        return self.evaluate(cell.batch, rng)

    def sample(self, batch: StepBatch, rng: np.random.Generator) -> np.ndarray:
        """One action per step drawn from the posterior."""
        return np.concatenate([sample_actions(self.posterior(c, rng), rng) for c in batch.chunks()])

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class Diligent(Estimator):
    """Estimator A: prefix and data; the candidates consistent with every residual share the mass."""

    name = "A"

    def log_weights(self, batch: StepBatch, rng: np.random.Generator | None = None) -> np.ndarray:
        return np.where(consistent_candidates(batch), 0.0, -np.inf)


class IntersectionDecoder(Estimator):
    """The recovery theorem's decoder: uniform over the supports inside the intersection of the
    positive-residual payloads (negative samples unused). It fails (is not certain) with
    probability at most ``(p-d+1) ((w-d+1)/(p-d+1))^T`` for ``T`` positives of weight ``w``."""

    name = "decoder"

    def log_weights(self, batch: StepBatch, rng: np.random.Generator | None = None) -> np.ndarray:
        return np.where(intersection_candidates(batch), 0.0, -np.inf)


class HistoryOnly(Estimator):
    """Estimator C: the history says nothing about the next term; γ = 1/C(p, d-1)."""

    name = "C"

    def log_weights(self, batch: StepBatch, rng: np.random.Generator | None = None) -> np.ndarray:
        return np.zeros((batch.R, batch.num_candidates))


@dataclass(frozen=True)
class KnownTerms:
    """How many of the ``g`` prefix terms estimator D knows at depth ``g``.

    Exactly one of: ``count`` (``min(count, g)``: a fixed number, all of them when fewer exist),
    ``fraction`` (``floor(fraction * g)``), or ``half`` (the paper's ``g // 2``).
    """

    count: int | None = None
    fraction: float | None = None
    half: bool = False

    def __post_init__(self) -> None:
        given = sum([self.count is not None, self.fraction is not None, self.half])
        if given != 1:
            raise GF2ConfigError(
                f"KnownTerms needs exactly one of count, fraction, half; got count={self.count}, "
                f"fraction={self.fraction}, half={self.half}."
            )
        if self.count is not None and not 0 <= self.count <= MAX_TERMS:
            raise GF2ConfigError(
                f"count={self.count} known terms is outside [0, {MAX_TERMS:,}] (no instance has more "
                "terms); pass e.g. k=3."
            )
        if self.fraction is not None and not 0.0 <= self.fraction <= 1.0:
            raise GF2ConfigError(f"fraction={self.fraction} is outside [0, 1]; pass 0 <= fraction <= 1.")

    def at(self, g: int) -> int:
        if self.half:
            return g // 2
        if self.count is not None:
            return min(self.count, g)
        assert self.fraction is not None  # exactly one of count, fraction, half (__post_init__)
        return floor(self.fraction * g + 1e-9)

    @property
    def label(self) -> str:
        if self.half:
            return "g//2"
        if self.count is not None:
            return f"k={self.count}"
        return f"u={self.fraction:g}"


class Partial(Estimator):
    """Estimator D: knows ``known.at(g)`` prefix terms, marginalises the rest.

    Args:
        known: which count of terms is known (see :class:`KnownTerms`).
        likelihood: ``"composite"`` (the paper's, like B) or ``"exact"`` (like B-exact).
        which: ``"first"`` (the earliest terms) or ``"random"`` (a uniform subset per step, drawn
            with the generator passed to :meth:`log_weights`).
        exact_limit: the work limit of the exact likelihood (lookups a record).
    """

    def __init__(
        self,
        known: KnownTerms,
        likelihood: str = "composite",
        which: str = "first",
        exact_limit: int = EXACT_WORK_LIMIT,
    ) -> None:
        if likelihood not in LIKELIHOODS:
            raise GF2ConfigError(f"likelihood={likelihood!r} is not one of {LIKELIHOODS}.")
        self.known, self.likelihood, self.which, self.exact_limit = known, likelihood, which, exact_limit
        suffix = "-exact" if likelihood == "exact" else ""
        self.name = f"D{suffix}({known.label})"

    def check(self, p: int, d: int, K: int, g: int) -> None:
        if self.likelihood != "exact":
            return
        unknown = g - self.known.at(g)
        if exact_work(comb(p, d - 1), unknown) > self.exact_limit:
            raise GF2ConfigError(
                f"{self.name} at g={g} leaves {unknown} unknown terms; the exact likelihood handles at "
                f"most {max_exact_unknown(p, d, self.exact_limit)} unknown terms at p={p}, d={d}. "
                f"Use the composite one, or a larger exact_limit at your own cost."
            )
        if K > 64:
            raise GF2ConfigError(f"{self.name} needs K <= 64 samples (64-bit label vectors); got K={K}.")
        check_exact(p, d, K, unknown, self.exact_limit)  # and the int64 completion counts

    def known_mask(self, batch: StepBatch, rng: np.random.Generator | None = None) -> np.ndarray:
        return known_terms(batch.g, self.known.at(batch.g), batch.R, self.which, rng)

    def log_weights(self, batch: StepBatch, rng: np.random.Generator | None = None) -> np.ndarray:
        known = self.known_mask(batch, rng)
        if self.likelihood == "exact":
            self.check(batch.p, batch.d, batch.K, batch.g)
            return exact_log_likelihood(batch, known, limit=self.exact_limit)
        return composite_log_likelihood(batch, known)


class DataOnly(Partial):
    """Estimator B: the prefix is unknown (D with no known term)."""

    def __init__(self, likelihood: str = "composite", exact_limit: int = EXACT_WORK_LIMIT) -> None:
        super().__init__(KnownTerms(count=0), likelihood=likelihood, exact_limit=exact_limit)
        self.name = "B-exact" if likelihood == "exact" else "B"


_D_SPEC = re.compile(r"^D(?P<exact>-exact)?(?:\((?P<arg>[^)]*)\)|:(?P<arg2>.*))?$")


def make_estimator(spec: str) -> Estimator:
    """An estimator from its name: ``A``, ``decoder``, ``B``, ``B-exact``, ``C``, ``D`` (= g//2),
    ``D(k=3)``, ``D(u=0.5)``, ``D(g//2)``, ``D-exact(k=1)`` (``D:k=3`` works too)."""
    simple = {"A": Diligent, "decoder": IntersectionDecoder, "B": DataOnly, "C": HistoryOnly}
    spec = spec.strip()
    if spec in simple:
        return simple[spec]()
    if spec == "B-exact":
        return DataOnly(likelihood="exact")
    match = _D_SPEC.match(spec)
    if match:
        arg = (match["arg"] or match["arg2"] or "g//2").replace(" ", "")
        likelihood = "exact" if match["exact"] else "composite"
        if arg == "g//2":
            return Partial(KnownTerms(half=True), likelihood)
        key, _, value = arg.partition("=")
        try:
            if key == "k":
                return Partial(KnownTerms(count=int(value)), likelihood)
            if key == "u":
                return Partial(KnownTerms(fraction=float(value)), likelihood)
        except ValueError:
            pass
    raise GF2ConfigError(
        f"Unknown estimator {spec!r}; use one of A, decoder, B, B-exact, C, D, D(k=3), D(u=0.5), "
        f"D(g//2), D-exact(k=1)."
    )


__all__ = [
    "DataOnly",
    "Diligent",
    "Estimator",
    "HistoryOnly",
    "IntersectionDecoder",
    "KnownTerms",
    "Partial",
    "make_estimator",
]
