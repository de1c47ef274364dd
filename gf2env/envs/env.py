"""The single GF2Recon environment."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.error import ClosedEnvironmentError

from gf2env.errors import GF2ConfigError, InvalidActionError, ResetNeededError
from gf2env.stream.batch import Buffers, make_stream
from gf2env.task.combinatorics import MAX_SUPPORT_TABLE, rank_support, unrank_support
from gf2env.task.oracle import Evidence, Instance, TaskConfig
from gf2env.task.posterior import StepBatch, bayes_ceiling
from gf2env.task.rules import DEFAULT_MAX_ATTEMPTS, STEP_MODES, check_support, step_transition
from gf2env.text.prompt import render_paper_prompt

Observation = dict[str, np.ndarray | np.int64]  # arrays, and the depth as a NumPy integer


class GF2ReconEnv(gym.Env):
    """Reconstruct a hidden GF(2) circuit one monomial at a time.

    ## Description
    A hidden circuit over ``n`` address bits ``a`` and ``p`` payload bits ``v`` is the ordered XOR
    of ``n`` monomials, term ``j`` being ``a_j * prod_{i in S_j} v_i`` with ``|S_j| = d - 1``
    (supports uniform, with replacement). At depth ``g`` the agent sees the revealed prefix
    ``S_0 .. S_{g-1}`` and ``K`` fresh samples of the step-``g`` oracle: ``a_g = 1``, later address
    bits 0, earlier ones fair coins, payload drawn by the sampling mode, label ``y = f(a, v)``. It
    must name ``S_g``. The prefix alone says nothing about ``S_g``; the samples alone are masked by
    the unknown prefix; together they determine it. Indices are 0-based (the paper's term ``g+1``).

    ## Action space
    ``Discrete(C(p, d-1))``: an integer is the lexicographic rank of a support, as in
    ``itertools.combinations(range(p), d-1)``. :meth:`indices_to_action` and
    :meth:`action_to_indices` convert. ``step`` also accepts the support itself, a sequence
    (list, tuple or 1-D array) of ``d - 1`` distinct payload indices. Anything else raises
    :class:`~gf2env.errors.InvalidActionError`; nothing is clipped.

    ## Observation space
    ``Dict`` of
    - ``prefix``: ``MultiBinary((n, p))``, row ``j < g`` the indicator of ``S_j``, later rows 0;
    - ``depth``: ``Discrete(n + 1)``, the current depth ``g`` (``n`` in the final observation);
    - ``address``: ``MultiBinary((K, n))``, the samples' address bits;
    - ``payload``: ``MultiBinary((K, p))``, the samples' payload bits;
    - ``labels``: ``MultiBinary(K)``, the samples' labels ``y``.
    The final observation of an episode that ran to the end has all ``n`` rows of ``prefix`` and
    zero evidence. The answer ``S_g`` is never in the observation.

    ## Rewards
    1 for the exact next term, 0 otherwise.

    ## Step modes (:func:`~gf2env.task.rules.step_transition`; no wrong step stands, no backtracking)
    - ``reveal`` (default): after any answer the true ``S_g`` joins the prefix and fresh evidence
      for depth ``g + 1`` is drawn, so every depth is measured once an episode.
    - ``terminate``: the episode ends at the first wrong answer.
    - ``retry``: a wrong answer is followed by the same depth with fresh evidence, until correct
      or ``max_attempts`` attempts; then the true term is revealed and the episode moves on.

    ## Episode end
    Terminated after the step at depth ``n - 1`` (or, in ``terminate`` mode, at a wrong answer).
    Never truncated.

    ## Info
    After ``reset``: ``depth``, ``attempt`` (1) and ``trivial_baseline`` (``1/C(p, d-1)``). After a
    step, for the step just judged: ``depth``, ``correct``, ``attempt`` (1-based, at this depth),
    ``action_indices``, ``target`` (the true ``S_g``, for logging), ``trivial_baseline``, and
    ``exhausted`` (``retry``: the attempts ran out and the term was revealed). With
    ``bayes_ceiling=True`` also ``bayes_ceiling_A`` and ``bayes_ceiling_B``: the posterior mass
    estimators A (prefix + data) and B (data only, composite likelihood) put on the truth given the
    very samples the action answered, the information-theoretic reference for that step.

    ## Arguments
    ``gym.make("GF2Recon-v1", p=12, d=4, n=32, K=32, sampling="adversarial", w=None,
    start_depth=0, step_mode="reveal", max_attempts=None, bayes_ceiling=False, render_mode=None,
    stream="philox", kernel="numba")``
    - ``p``, ``d``, ``n``, ``K``: payload bits (<= 64), term degree, terms, samples a step.
    - ``sampling``: ``"adversarial"`` (payload weight ``w``, default ``w*`` making the firing
      probability closest to 1/2), ``"diagnostic"`` (all-ones and the ``p`` one-bit-cleared
      payloads first, then uniform) or ``"uniform"``.
    - ``start_depth``: the depth at which episodes begin (the first terms revealed); ``reset``'s
      ``options={"start_depth": g}`` overrides it for one episode.
    - ``step_mode``, ``max_attempts``: see above; ``max_attempts`` (default 10) is for ``retry``.
    - ``bayes_ceiling``: add estimators A's and B's γ on each judged step to ``info`` (see Info).
    - ``render_mode``: ``"ansi"`` returns the current step as the paper's prompt.
    - ``stream``: the random stream (:mod:`gf2env.stream.batch`). ``"philox"`` (v1): counter-based, every
      bit a function of the seed, the episode count and the draw count; ``"generator"`` (v0): the
      seeded ``np_random`` drawing uniforms. The same seed gives different episodes in the two.
    - ``kernel``: ``"numba"`` (compiled draws of the philox stream) or ``"numpy"`` (the reference;
      the same bits).

    ## Version history
    - v1: the counter-based Philox stream (same task, same distributions, different episodes for a
      seed); one compiled call draws a whole vector env's evidence.
    - v0: initial version; ``gym.make("GF2Recon-v0")`` still replays it (``stream="generator"``).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        p: int = 12,
        d: int = 4,
        n: int = 32,
        K: int = 32,
        sampling: str = "adversarial",
        w: int | None = None,
        start_depth: int = 0,
        step_mode: str = "reveal",
        max_attempts: int | None = None,
        bayes_ceiling: bool = False,
        render_mode: str | None = None,
        stream: str = "philox",
        kernel: str = "numba",
    ) -> None:
        self.config = TaskConfig(p=p, d=d, n=n, K=K, sampling=sampling, w=w)
        self._stream = make_stream(stream, self.config, 1, kernel)  # validates stream and kernel
        self.stream, self.kernel = stream, kernel
        self._buf = Buffers(self.config, 1)
        self._one = np.zeros(1, dtype=np.int64)  # sub-env 0: the stream's batch of one
        self._depth_batch = np.zeros(1, dtype=np.int64)
        self._seeded = False
        self._closed = False
        self.start_depth = self._check_depth(start_depth, "start_depth")
        if step_mode not in STEP_MODES:
            raise GF2ConfigError(f"step_mode={step_mode!r} is unknown; pass one of {STEP_MODES}.")
        self.step_mode = step_mode
        if max_attempts is not None and step_mode != "retry":
            raise GF2ConfigError(
                f"max_attempts={max_attempts} only applies to step_mode='retry', not "
                f"{step_mode!r}; drop max_attempts or pass step_mode='retry'."
            )
        if step_mode == "retry":
            max_attempts = DEFAULT_MAX_ATTEMPTS if max_attempts is None else max_attempts
            if isinstance(max_attempts, bool) or not isinstance(max_attempts, (int, np.integer)):
                raise GF2ConfigError(f"max_attempts={max_attempts!r} is not an integer.")
            if max_attempts < 1:
                raise GF2ConfigError(
                    f"max_attempts={max_attempts} is less than the minimum 1; pass max_attempts >= 1."
                )
        self.max_attempts = 1 if max_attempts is None else int(max_attempts)
        if not isinstance(bayes_ceiling, (bool, np.bool_)):
            raise GF2ConfigError(f"bayes_ceiling={bayes_ceiling!r} is not a bool; pass True or False.")
        self.bayes_ceiling = bool(bayes_ceiling)
        if self.bayes_ceiling and self.config.num_candidates > MAX_SUPPORT_TABLE:
            raise GF2ConfigError(
                f"bayes_ceiling=True enumerates every candidate term, but p={self.config.p}, "
                f"d={self.config.d} has C(p, d-1) = {self.config.num_candidates} of them, over the limit of "
                f"{MAX_SUPPORT_TABLE}; pass a smaller p or d, or bayes_ceiling=False."
            )
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise GF2ConfigError(
                f"render_mode={render_mode!r} is not supported; pass one of "
                f"{self.metadata['render_modes']} or None."
            )
        self.render_mode = render_mode

        c = self.config
        self.action_space = spaces.Discrete(c.num_candidates)
        self.observation_space = spaces.Dict(
            {
                "prefix": spaces.MultiBinary((c.n, c.p)),
                "depth": spaces.Discrete(c.n + 1),
                "address": spaces.MultiBinary((c.K, c.n)),
                "payload": spaces.MultiBinary((c.K, c.p)),
                "labels": spaces.MultiBinary(c.K),
            }
        )
        self._instance: Instance | None = None
        self._evidence: Evidence | None = None
        self._prefix_bits = np.zeros((c.n, c.p), dtype=np.int8)
        self._depth = 0
        self._attempt = 1
        self._done = True

    # ----------------------------------------------------------------- action helpers
    def action_to_indices(self, action: int) -> tuple[int, ...]:
        """The support (sorted payload indices) that integer ``action`` stands for."""
        return unrank_support(self._check_integer_action(action), self.config.p, self.config.k)

    def indices_to_action(self, indices: Sequence[int]) -> int:
        """The integer action of a support given as ``d - 1`` distinct payload indices."""
        return rank_support(check_support(indices, self.config.p, self.config.k), self.config.p)

    def _check_integer_action(self, action: Any) -> int:
        if isinstance(action, np.ndarray) and action.ndim == 0:
            action = action.item()
        if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
            raise InvalidActionError(
                f"Action {action!r} is neither an integer in [0, {self.config.num_candidates}) nor a "
                f"sequence of {self.config.k} payload indices."
            )
        if not 0 <= int(action) < self.config.num_candidates:
            raise InvalidActionError(
                f"Action {int(action)} is outside Discrete({self.config.num_candidates}); pass an integer "
                f"in [0, {self.config.num_candidates}) or a sequence of {self.config.k} payload indices."
            )
        return int(action)

    def _action_support(self, action: Any) -> tuple[int, ...]:
        if isinstance(action, (list, tuple)) or (isinstance(action, np.ndarray) and action.ndim == 1):
            return check_support(list(action), self.config.p, self.config.k)
        return self.action_to_indices(action)

    # ----------------------------------------------------------------- gym API
    @property
    def depth(self) -> int:
        """The current depth ``g`` (``n`` once the episode has run to the end)."""
        return self._depth

    @property
    def instance(self) -> Instance | None:
        """The hidden circuit of this episode. Reading it is for logging and tests, not agents."""
        return self._instance

    @property
    def evidence(self) -> Evidence | None:
        """The samples currently offered (what the observation shows, as an :class:`Evidence`)."""
        return self._evidence

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        self._check_open()
        super().reset(seed=seed)
        start = self.start_depth_from_options(options)
        c = self.config
        # A new seed (or the first reset) keys the stream from np_random; otherwise the next episode.
        fresh = seed is not None or not self._seeded or self.stream == "generator"
        self._stream.begin(self._one, [self.np_random if fresh else None])
        self._seeded = True
        self._stream.instances(self._one, self._buf)
        supports = self._buf.supports[0].astype(np.int64)
        self._instance = Instance(p=c.p, d=c.d, supports=supports, masks=self._buf.masks[0].copy())
        self._prefix_bits[:] = 0
        for j in range(start):
            self._prefix_bits[j, self._instance.supports[j]] = 1
        self._depth = start
        self._attempt = 1
        self._done = False
        self._evidence = self._draw(start)
        info = {"depth": start, "attempt": 1, "trivial_baseline": c.trivial_baseline}
        return self._observation(), info

    def close(self) -> None:
        """Close the env: a later ``reset`` or ``step`` raises ``ClosedEnvironmentError``."""
        self._closed = True
        super().close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedEnvironmentError("this GF2ReconEnv is closed; make a new one with gym.make.")

    def step(self, action: Any) -> tuple[Observation, SupportsFloat, bool, bool, dict[str, Any]]:
        self._check_open()
        if self._done or self._instance is None:
            raise ResetNeededError("step() called on a finished or unreset episode; call reset() first.")
        support = self._action_support(action)
        g = self._depth
        target = self._instance.term(g)
        correct = support == target
        attempt = self._attempt
        info: dict[str, Any] = {
            "depth": g,
            "correct": correct,
            "attempt": attempt,
            "action_indices": support,
            "target": target,
            "trivial_baseline": self.config.trivial_baseline,
            "exhausted": False,
        }
        if self.bayes_ceiling:
            assert self._evidence is not None
            ceiling = bayes_ceiling(StepBatch.from_step(self._instance, self._evidence))
            info["bayes_ceiling_A"] = float(ceiling["A"][0])
            info["bayes_ceiling_B"] = float(ceiling["B"][0])
        c = self.config
        t = step_transition(
            correct, g, attempt, n=c.n, step_mode=self.step_mode, max_attempts=self.max_attempts
        )
        info["exhausted"] = t.exhausted
        if t.advance:
            self._prefix_bits[g, self._instance.supports[g]] = 1
        self._depth, self._attempt, self._done = t.depth, t.attempt, t.terminated
        if t.finished:
            self._evidence = None
        elif t.advance or t.retry:
            self._evidence = self._draw(t.depth)
        return self._observation(), float(correct), t.terminated, False, info

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        if self._instance is None or self._evidence is None:
            return "(no step to render: the episode has not started or has ended)\n"
        c = self.config
        prefix = [self._instance.term(j) for j in range(self._depth)]
        e = self._evidence
        return render_paper_prompt(prefix, e.address, e.payload, e.labels, n=c.n, p=c.p, d=c.d)

    # ----------------------------------------------------------------- internals
    def _draw(self, g: int) -> Evidence:
        """Fresh evidence at depth ``g`` from the stream."""
        self._depth_batch[0] = g
        self._stream.evidence(self._one, self._depth_batch, self._buf)
        b = self._buf
        return Evidence(
            g=g,
            address=b.address[0].astype(np.uint8),
            payload=b.payload[0].astype(np.uint8),
            labels=b.labels[0].astype(np.uint8),
        )

    def start_depth_from_options(self, options: dict[str, Any] | None) -> int:
        """The start depth of an episode from ``reset``'s options (default ``start_depth``)."""
        if options is not None and not isinstance(options, Mapping):
            raise GF2ConfigError(
                f"reset options={options!r} is not a mapping; pass e.g. options={{'start_depth': 2}}."
            )
        options = dict(options or {})
        start = options.pop("start_depth", self.start_depth)
        if options:
            raise GF2ConfigError(
                f"reset options {sorted(options)} are unknown; the only option is 'start_depth'."
            )
        return self._check_depth(start, "start_depth")

    def _check_depth(self, depth: Any, name: str) -> int:
        if isinstance(depth, (bool, np.bool_)) or not isinstance(depth, (int, np.integer)):
            raise GF2ConfigError(f"{name}={depth!r} is not an integer; pass an int in [0, n).")
        if not 0 <= depth < self.config.n:
            raise GF2ConfigError(
                f"{name}={depth} is outside [0, n) = [0, {self.config.n}); pass a depth whose next "
                f"term exists, or a larger n."
            )
        return int(depth)

    def _observation(self) -> Observation:
        c = self.config
        e = self._evidence
        if e is None:
            address = np.zeros((c.K, c.n), dtype=np.int8)
            payload = np.zeros((c.K, c.p), dtype=np.int8)
            labels = np.zeros(c.K, dtype=np.int8)
        else:
            address = e.address.astype(np.int8)
            payload = e.payload.astype(np.int8)
            labels = e.labels.astype(np.int8)
        return {
            "prefix": self._prefix_bits.copy(),
            "depth": np.int64(self._depth),
            "address": address,
            "payload": payload,
            "labels": labels,
        }
