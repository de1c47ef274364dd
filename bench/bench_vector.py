"""Throughput of GF2Recon: single env, Gymnasium's SyncVectorEnv over it, and the native vector env.

For each setting and number of sub-envs prints env-steps/s of

- ``single``: one ``GF2ReconEnv`` (v1) stepped in a loop;
- ``sync``: ``gymnasium.vector.SyncVectorEnv`` over v1 single envs;
- ``native``: ``GF2ReconVectorEnv`` on v1's Philox stream, compiled kernel (``native-views``:
  ``copy=False``; ``native-numpy``: the NumPy reference kernel);
- ``native-v0``: the native vector env on v0's generator stream;

with the ratio to ``sync`` at the same size, the buffer-fill limit (env-steps/s of only writing the
observation buffers, and of writing and copying them out) and the peak traced memory per sub-env as
a multiple of the observation's own bytes (tracemalloc; the caller holds the previous observation).
One process, one thread; measurements are the best of ``--repeats`` runs of ``--seconds`` each.

    python bench/bench_vector.py [--num-envs 1,64,1024] [--seconds 1] [--repeats 3] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import os
import time
import tracemalloc
from collections.abc import Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as the targets are stated

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from table import write_csv  # noqa: E402

from gf2env import GF2ReconEnv, GF2ReconVectorEnv  # noqa: E402

SETTINGS = [dict(p=12, K=32, n=32), dict(p=12, K=32, n=128), dict(p=64, K=32, n=1024)]
KINDS = {  # name: vector-env kwargs (None: not the native vector env)
    "single": None,
    "sync": None,
    "native": {},
    "native-views": {"copy": False},
    "native-numpy": {"kernel": "numpy"},
    "native-v0": {"stream": "generator"},
}
SYNC_MAX_ENV_TERMS = 64 * 1024  # SyncVectorEnv beyond num_envs * n of this takes minutes a point


def make_stepper(kind: str, num_envs: int, kwargs: dict) -> tuple[Callable[[], object], int, object]:
    """A zero-argument callable doing one (batched) step, the env-steps it does, and the env."""
    if kind == "single":
        env = GF2ReconEnv(**kwargs)
        env.reset(seed=0)
        return (lambda: env.step(0)[2] and env.reset()), 1, env
    actions = np.zeros(num_envs, dtype=np.int64)
    if kind == "sync":
        sync = gym.vector.SyncVectorEnv([lambda: GF2ReconEnv(**kwargs) for _ in range(num_envs)])
        sync.reset(seed=0)
        return (lambda: sync.step(actions)), num_envs, sync
    native = GF2ReconVectorEnv(num_envs=num_envs, **KINDS[kind], **kwargs)
    native.reset(seed=0)
    return (lambda: native.step(actions)), num_envs, native


def best_rate(step: Callable[[], object], per_call: int, seconds: float, repeats: int) -> float:
    step()
    best = 0.0
    for _ in range(repeats):
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds or calls < 3:
            step()
            calls += 1
        best = max(best, calls * per_call / (time.perf_counter() - start))
    return best


def observation_bytes(kwargs: dict) -> int:
    p, K, n = kwargs["p"], kwargs["K"], kwargs["n"]
    return n * p + K * n + K * p + K + 8


def fill_limits(num_envs: int, kwargs: dict, seconds: float, repeats: int) -> tuple[float, float]:
    """Env-steps/s of filling int8 observation buffers of this size, and of filling then copying them."""
    p, K, n = kwargs["p"], kwargs["K"], kwargs["n"]
    bufs = [
        np.zeros(shape, dtype=np.int8) for shape in ((num_envs, n, p), (num_envs, K, n), (num_envs, K, p))
    ]
    bufs.append(np.zeros((num_envs, K), dtype=np.int8))
    depth = np.zeros(num_envs, dtype=np.int64)

    def fill() -> None:
        for b in bufs:
            b.fill(1)
        depth.fill(1)

    def fill_copy() -> None:
        fill()
        [b.copy() for b in bufs]
        depth.copy()

    return best_rate(fill, num_envs, seconds, repeats), best_rate(fill_copy, num_envs, seconds, repeats)


def peak_ratio(kind: str, num_envs: int, kwargs: dict) -> float:
    """Peak traced bytes per sub-env of building the env and stepping it 3 times, over the observation's."""
    make_stepper(kind, 2, kwargs)  # one-time costs (kernels, support tables) outside the trace
    tracemalloc.start()
    step, _, env = make_stepper(kind, num_envs, kwargs)
    held = step()
    for _ in range(3):
        held = step()  # the caller holds the last result while the next step runs
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del held, env
    return peak / (num_envs * observation_bytes(kwargs))


def row(kind: str, kwargs: dict, num_envs: int, rate: float, x_sync: float, peak: float) -> dict:
    return dict(
        env=kind, **kwargs, num_envs=num_envs, steps_per_s=round(rate), x_sync=x_sync, peak_over_obs=peak
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", default="1,64,1024")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--csv")
    args = parser.parse_args()
    sizes = [int(x) for x in args.num_envs.split(",")]
    kinds = args.kinds.split(",")
    rows = []
    print(
        f"{'env':>13} {'p':>3} {'K':>3} {'n':>5} {'num_envs':>8} {'steps/s':>11} {'x sync':>7} {'peak/obs':>8}"  # noqa: E501
    )
    for kwargs in SETTINGS:
        sync_rate: dict[int, float] = {}
        for kind in kinds:
            for num_envs in [1] if kind == "single" else sizes:
                if kind == "sync" and num_envs * kwargs["n"] > SYNC_MAX_ENV_TERMS:
                    continue
                step, per_call, _ = make_stepper(kind, num_envs, kwargs)
                rate = best_rate(step, per_call, args.seconds, args.repeats)
                del step
                if kind == "sync":
                    sync_rate[num_envs] = rate
                ratio = (
                    rate / sync_rate[num_envs] if num_envs in sync_rate and kind != "sync" else float("nan")
                )
                peak = peak_ratio(kind, num_envs, kwargs) if kind != "single" else float("nan")
                rows.append(row(kind, kwargs, num_envs, rate, round(ratio, 1), round(peak, 2)))
                print(
                    f"{kind:>13} {kwargs['p']:>3} {kwargs['K']:>3} {kwargs['n']:>5} {num_envs:>8} "
                    f"{rate:>11,.0f} {ratio:>7.1f} {peak:>8.2f}",
                    flush=True,
                )
        for num_envs in sizes:
            fill, fill_copy = fill_limits(num_envs, kwargs, args.seconds, args.repeats)
            for name, rate in (("fill-limit", fill), ("fill+copy", fill_copy)):
                rows.append(row(name, kwargs, num_envs, rate, float("nan"), float("nan")))
                p, K, n = kwargs["p"], kwargs["K"], kwargs["n"]
                print(f"{name:>13} {p:>3} {K:>3} {n:>5} {num_envs:>8} {rate:>11,.0f}")
    if args.csv:
        write_csv(args.csv, rows)


if __name__ == "__main__":
    main()
