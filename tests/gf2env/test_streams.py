"""GF2Recon-v1's counter-based stream: Philox as numpy computes it, the compiled kernel equal to the
NumPy reference, the distributions the task defines, and v0 replaying its first stream."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils import seeding
from scipy import stats

import gf2env  # noqa: F401  (registers the envs)
from gf2env import GF2ReconEnv, GF2ReconVectorEnv
from gf2env.errors import GF2ConfigError
from gf2env.stream.batch import Buffers, PhiloxStream
from gf2env.stream.keyed_oracle import evidence, instance_masks, subset_masks
from gf2env.stream.philox import DOMAIN_EVIDENCE, bounded, philox4x64, stream_words
from gf2env.task.oracle import TaskConfig, circuit_labels, draw_evidence, draw_instance


def test_philox_block_is_numpys_philox():
    rng = np.random.default_rng(3)
    for _ in range(20):
        key = rng.integers(0, 2**64, size=2, dtype=np.uint64)
        counter = rng.integers(0, 2**64, size=4, dtype=np.uint64)
        counter[0] &= np.uint64(2**63 - 1)  # numpy's increment then never carries into word 1
        reference = np.random.Philox(key=key, counter=counter).random_raw(4)
        ours = philox4x64(counter + np.array([1, 0, 0, 0], dtype=np.uint64), key)
        np.testing.assert_array_equal(ours, reference)


def test_stream_words_address_blocks_by_counter():
    keys = np.array([[1, 2], [3, 4]], dtype=np.uint64)
    words = stream_words(keys, episode=np.array([5, 6]), draw=np.array([7, 8]), domain=1, num_words=6, part=1)
    for i in range(2):
        for j in range(6):
            counter = np.array([(1 << 32) + j // 4, 7 + i, 5 + i, 1], dtype=np.uint64)
            assert words[i, j] == philox4x64(counter, keys[i])[j % 4]


def test_bounded_is_in_range_and_unbiased_enough():
    words = np.random.Philox(0).random_raw(200_000)
    values = bounded(words, 7)
    assert values.min() == 0 and values.max() == 6
    counts = np.bincount(values.astype(np.int64), minlength=7)
    assert stats.chisquare(counts).pvalue > 1e-4


@pytest.mark.parametrize(("p", "size"), [(6, 2), (6, 4), (5, 5), (7, 1)])
def test_subsets_are_uniform(p, size):
    m = min(size, p - size)
    words = np.random.Philox(1).random_raw(30_000 * m).reshape(30_000, m)
    masks = subset_masks(words, p, size)
    assert (np.bitwise_count(masks) == size).all()
    _, counts = np.unique(masks, return_counts=True)
    from math import comb

    assert len(counts) == comb(p, size)
    if len(counts) > 1:
        assert stats.chisquare(counts).pvalue > 1e-4


CONFIGS = [
    TaskConfig(p=12, d=4, n=32, K=32),
    TaskConfig(p=5, d=3, n=7, K=9, sampling="uniform"),
    TaskConfig(p=6, d=2, n=5, K=10, sampling="diagnostic"),
    TaskConfig(p=8, d=3, n=6, K=5, w=8),
    TaskConfig(p=64, d=4, n=130, K=6),
    TaskConfig(p=64, d=4, n=70, K=4, sampling="uniform"),
]


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_compiled_kernel_equals_the_numpy_reference(config):
    N = 6
    streams = [PhiloxStream(config, N, kernel) for kernel in ("numba", "numpy")]
    bufs = [Buffers(config, N) for _ in streams]
    idx = np.array([0, 2, 3, 5])
    depth = np.array([0, 1, config.n - 1, 3 % config.n, 0, config.n // 2])
    for stream, buf in zip(streams, bufs, strict=True):
        stream.begin(np.arange(N), [np.random.default_rng(i) for i in range(N)])
        for _ in range(2):
            stream.begin(idx, [None] * len(idx))  # later episodes of the same keys
        stream.instances(idx, buf)
        for _ in range(3):
            stream.evidence(idx, depth, buf)
    a, b = bufs
    for name in ("masks", "supports", "address", "payload", "labels"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(streams[0].draw, streams[1].draw)


@pytest.mark.parametrize("config", CONFIGS[:4], ids=str)
def test_evidence_has_the_tasks_distribution(config):
    c, N = config, 400
    keys = np.random.default_rng(1).integers(0, 2**64, size=(N, 2), dtype=np.uint64)
    episode = np.zeros(N, dtype=np.uint64)
    masks = instance_masks(keys, episode, c)
    assert (np.bitwise_count(masks) == c.k).all()
    g = np.arange(N) % c.n
    address, payload, labels = evidence(keys, episode, np.zeros(N, dtype=np.uint64), g, masks, c)
    cols = np.arange(c.n)
    for i in range(N):
        assert (address[i, :, g[i]] == 1).all() and (address[i, :, g[i] + 1 :] == 0).all()
    early = address[np.broadcast_to(cols < g[:, None, None], address.shape)]
    if early.size:
        assert abs(early.mean() - 0.5) < 0.02
    if c.sampling == "adversarial":
        weights = np.bitwise_count(payload)
        assert (weights == c.weight).all()
    np.testing.assert_array_equal(labels, circuit_labels(address, payload, masks))
    # Every term and every payload bit is used: the instance's supports cover all indices.
    assert np.bitwise_or.reduce(masks.ravel()) == np.uint64((1 << c.p) - 1)


def test_seeds_episodes_and_draws_give_independent_words():
    keys = np.random.default_rng(2).integers(0, 2**64, size=(1, 2), dtype=np.uint64)
    words = {
        (e, t): stream_words(keys, e, t, DOMAIN_EVIDENCE, 8)[0].tobytes() for e in range(3) for t in range(3)
    }
    assert len(set(words.values())) == 9


def test_single_env_v1_seed_replays_and_reset_continues():
    env = GF2ReconEnv()
    first, _ = env.reset(seed=5)
    second, _ = env.reset()
    again, _ = env.reset(seed=5)
    for key in first:
        np.testing.assert_array_equal(first[key], again[key])
    assert not np.array_equal(first["payload"], second["payload"])
    other = GF2ReconEnv(kernel="numpy")
    for key, value in other.reset(seed=5)[0].items():
        np.testing.assert_array_equal(value, first[key])


def test_v0_replays_the_generator_stream():
    env = gym.make("GF2Recon-v0", p=12, d=4, n=32, K=32).unwrapped
    assert env.stream == "generator"
    obs, _ = env.reset(seed=11)
    rng = seeding.np_random(11)[0]
    inst = draw_instance(rng, 32, 12, 4)
    ev = draw_evidence(rng, inst, 0, env.config)
    np.testing.assert_array_equal(env.instance.masks, inst.masks)
    np.testing.assert_array_equal(obs["address"], ev.address)
    np.testing.assert_array_equal(obs["payload"], ev.payload)
    np.testing.assert_array_equal(obs["labels"], ev.labels)
    v1, _ = gym.make("GF2Recon-v1").reset(seed=11)
    assert not np.array_equal(v1["payload"], obs["payload"])


def test_copy_false_returns_the_buffers_and_copy_true_does_not():
    views, copies = GF2ReconVectorEnv(num_envs=2, copy=False), GF2ReconVectorEnv(num_envs=2)
    obs_v, _ = views.reset(seed=0)
    obs_c, _ = copies.reset(seed=0)
    before = obs_c["payload"].copy()
    views.step(np.zeros(2, dtype=np.int64))
    copies.step(np.zeros(2, dtype=np.int64))
    np.testing.assert_array_equal(obs_c["payload"], before)  # a copy keeps its step
    np.testing.assert_array_equal(obs_v["payload"], views._payload)  # a view follows the env
    with pytest.raises(GF2ConfigError, match="copy"):
        GF2ReconVectorEnv(num_envs=2, copy="no")


def test_bad_stream_and_kernel_name_the_fix():
    with pytest.raises(GF2ConfigError, match="stream='mt'.*philox"):
        GF2ReconEnv(stream="mt")
    with pytest.raises(GF2ConfigError, match="kernel='cuda'"):
        GF2ReconEnv(kernel="cuda")
