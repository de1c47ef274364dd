"""The environment's random streams: where a batch of sub-envs gets its circuits and its evidence.

Both streams fill the same buffers (term masks and supports; int8 address, payload and label
bits) for any subset ``idx`` of a batch, so the single env is the vector env's maths at
``num_envs=1``.

- :class:`PhiloxStream` (``GF2Recon-v1``, the default): counter-based. Sub-env ``i`` holds a
  Philox key from its seed and counts its episodes and draws; every bit is a function of
  ``(key, episode, draw)`` (:mod:`gf2env.stream.philox`, :mod:`gf2env.stream.keyed_oracle`), so one call draws
  every sub-env's evidence, in compiled code (:mod:`gf2env.stream.keyed_kernel`, ``kernel="numba"``) or in
  the NumPy reference (``kernel="numpy"``), bit for bit the same.
- :class:`GeneratorStream` (``GF2Recon-v0``): each sub-env draws ``(K, n + p)`` uniforms a step
  from its own ``numpy.random.Generator`` (:func:`gf2env.task.oracle.evidence_from_uniforms`); kept so
  that v0 episodes replay exactly.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from gf2env.errors import GF2ConfigError
from gf2env.stream.keyed_oracle import evidence, instance_masks, payload_words, subset_words
from gf2env.stream.philox import key_from_generator
from gf2env.task.combinatorics import unpack_bits
from gf2env.task.oracle import TaskConfig, draw_instance, evidence_from_uniforms

StreamName = Literal["philox", "generator"]
STREAMS: tuple[StreamName, ...] = ("philox", "generator")
Kernel = Literal["numba", "numpy"]
KERNELS: tuple[Kernel, ...] = ("numba", "numpy")


class Buffers:
    """The per-sub-env state a stream writes: the hidden circuits and the current evidence."""

    def __init__(self, config: TaskConfig, num_envs: int) -> None:
        c, N = config, num_envs
        self.masks = np.zeros((N, c.n), dtype=np.uint64)
        self.supports = np.zeros((N, c.n, c.k), dtype=np.int8)
        self.address = np.zeros((N, c.K, c.n), dtype=np.int8)
        self.payload = np.zeros((N, c.K, c.p), dtype=np.int8)
        self.labels = np.zeros((N, c.K), dtype=np.int8)


def _masks_to_supports(masks: np.ndarray, p: int, k: int) -> np.ndarray:
    """Sorted supports (..., k) of uint64 masks with ``k`` bits set each."""
    bits = unpack_bits(masks, p).astype(bool)
    return np.nonzero(bits)[-1].reshape(*masks.shape, k).astype(np.int8)


class PhiloxStream:
    """Counter-based evidence for ``num_envs`` sub-envs (``GF2Recon-v1``)."""

    name: StreamName = "philox"

    def __init__(self, config: TaskConfig, num_envs: int, kernel: Kernel = "numba") -> None:
        if kernel not in KERNELS:
            raise GF2ConfigError(f"kernel={kernel!r} is unknown; pass one of {KERNELS}.")
        self.config, self.kernel = config, kernel
        self.keys = np.zeros((num_envs, 2), dtype=np.uint64)
        self.episode = np.zeros(num_envs, dtype=np.uint64)
        self.draw = np.zeros(num_envs, dtype=np.uint64)
        self._started = np.zeros(num_envs, dtype=bool)
        if kernel == "numba":
            from gf2env.stream import keyed_kernel  # compiled on first use, cached on disk

            self._kernel = keyed_kernel
            self._mode = keyed_kernel.sampling_code(config)
        # Per-draw constants, worked out once: the adversarial weight, words a payload and a term take.
        self._weight = config.weight if config.sampling == "adversarial" else 0
        self._payload_words = payload_words(config)
        self._term_words = subset_words(config.p, config.k)

    def begin(self, idx: np.ndarray, rngs: list[np.random.Generator | None]) -> None:
        """Start a new episode in sub-envs ``idx``: a fresh key from ``rngs[j]`` (a new seed), or,
        where it is ``None``, the next episode of the sub-env's key."""
        for j, i in enumerate(idx):
            rng = rngs[j]
            if rng is not None:
                self.keys[i] = key_from_generator(rng)
                self.episode[i] = 0
                self._started[i] = True
            elif self._started[i]:
                self.episode[i] += np.uint64(1)
            else:
                raise AssertionError("a sub-env's first episode needs a generator for its key")
        self.draw[idx] = 0

    def seek(self, idx: np.ndarray, draws: np.ndarray) -> None:
        """Make the next evidence of sub-envs ``idx`` draw ``draws[j]`` of their episode: what a
        ``reveal`` walk from depth 0 draws at depth ``draws[j]`` (one draw a step)."""
        self.draw[idx] = np.asarray(draws, dtype=np.uint64)

    def instances(self, idx: np.ndarray, out: Buffers) -> None:
        c = self.config
        if self.kernel == "numba":
            self._kernel.draw_instances(
                self.keys, self.episode, idx, c.p, c.k, c.n, self._term_words, out.masks, out.supports
            )
            return
        masks = instance_masks(self.keys[idx], self.episode[idx], c)
        out.masks[idx] = masks
        out.supports[idx] = _masks_to_supports(masks, c.p, c.k)

    def evidence(self, idx: np.ndarray, depth: np.ndarray, out: Buffers) -> None:
        """Fresh evidence for sub-envs ``idx`` at depths ``depth[idx]`` (all < n)."""
        c = self.config
        if self.kernel == "numba":
            self._kernel.draw_evidence(
                self.keys, self.episode, self.draw, depth, out.supports, idx, c.p, c.K, c.n,
                self._mode, self._weight, self._payload_words, out.address, out.payload, out.labels,
            )  # fmt: skip
        else:
            address, payload, labels = evidence(
                self.keys[idx], self.episode[idx], self.draw[idx], depth[idx], out.masks[idx], c
            )
            out.address[idx] = address
            out.payload[idx] = unpack_bits(payload, c.p)
            out.labels[idx] = labels
        self.draw[idx] += np.uint64(1)


class GeneratorStream:
    """Per-sub-env ``numpy.random.Generator`` evidence (``GF2Recon-v1``'s stream)."""

    name: StreamName = "generator"

    def __init__(self, config: TaskConfig, num_envs: int) -> None:
        self.config = config
        self.rngs: list[np.random.Generator | None] = [None] * num_envs
        self._u = np.zeros((num_envs, config.K, config.n + config.p))

    def begin(self, idx: np.ndarray, rngs: list[np.random.Generator | None]) -> None:
        """Start a new episode in sub-envs ``idx``, from ``rngs[j]`` where given (a new seed)."""
        for j, i in enumerate(idx):
            if rngs[j] is not None:
                self.rngs[i] = rngs[j]
            assert self.rngs[i] is not None, "a sub-env's first episode needs a generator"

    def _rng(self, i: int) -> np.random.Generator:
        rng = self.rngs[i]
        assert rng is not None
        return rng

    def instances(self, idx: np.ndarray, out: Buffers) -> None:
        c = self.config
        for i in idx:
            inst = draw_instance(self._rng(i), c.n, c.p, c.d)
            out.supports[i] = inst.supports
            out.masks[i] = inst.masks

    def evidence(self, idx: np.ndarray, depth: np.ndarray, out: Buffers) -> None:
        """Fresh evidence for sub-envs ``idx`` at depths ``depth[idx]`` (all < n)."""
        for i in idx:
            self._rng(i).random(out=self._u[i])
        sel = slice(None) if len(idx) == len(self.rngs) else idx  # a slice avoids fancy-index copies
        address, payload, labels = evidence_from_uniforms(
            self._u[sel], depth[sel], out.masks[sel], self.config
        )
        out.address[sel], out.payload[sel], out.labels[sel] = address, payload, labels


Stream = PhiloxStream | GeneratorStream


def make_stream(name: str, config: TaskConfig, num_envs: int, kernel: str = "numba") -> Stream:
    """The stream called ``name`` for ``num_envs`` sub-envs; ``kernel`` applies to ``"philox"``."""
    if name == "philox":
        if kernel not in KERNELS:
            raise GF2ConfigError(f"kernel={kernel!r} is unknown; pass one of {KERNELS}.")
        return PhiloxStream(config, num_envs, kernel)
    if name == "generator":
        return GeneratorStream(config, num_envs)
    raise GF2ConfigError(
        f"stream={name!r} is unknown; pass 'philox' (GF2Recon-v1) or 'generator' (GF2Recon-v0's stream)."
    )
