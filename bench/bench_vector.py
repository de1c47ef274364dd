"""Throughput of GF2Recon: single env, Gymnasium's SyncVectorEnv over it, and the native vector env.

Prints env-steps/s and peak traced memory (tracemalloc, numpy buffers included) per setting; with
``--csv`` also writes the table. Long settings are capped by ``--seconds`` a measurement.

    python bench/bench_vector.py [--num-envs 1,64,1024,8192] [--seconds 2] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import gymnasium as gym
import numpy as np
from table import write_csv

from gf2env import GF2ReconEnv, GF2ReconVectorEnv

SETTINGS = [dict(p=12, K=32, n=32), dict(p=12, K=32, n=128), dict(p=64, K=32, n=1024)]


def make_stepper(kind: str, num_envs: int, kwargs: dict):
    """A zero-argument callable doing one (batched) step, and the env-steps it does."""
    if kind == "single":
        env = GF2ReconEnv(**kwargs)
        env.reset(seed=0)
        step = lambda: env.step(0)[2] and env.reset()  # noqa: E731
        per_call = 1
    elif kind == "sync":
        env = gym.vector.SyncVectorEnv([lambda: GF2ReconEnv(**kwargs) for _ in range(num_envs)])
        env.reset(seed=0)
        actions = np.zeros(num_envs, dtype=np.int64)
        step = lambda: env.step(actions)  # noqa: E731
        per_call = num_envs
    else:
        env = GF2ReconVectorEnv(num_envs=num_envs, **kwargs)
        env.reset(seed=0)
        actions = np.zeros(num_envs, dtype=np.int64)
        step = lambda: env.step(actions)  # noqa: E731
        per_call = num_envs
    return step, per_call


def measure(kind: str, num_envs: int, kwargs: dict, seconds: float) -> tuple[float, float]:
    """Steps/s (untraced), then the traced peak of building the env and stepping it 3 times."""
    step, per_call = make_stepper(kind, num_envs, kwargs)
    step()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or calls < 3:
        step()
        calls += 1
    rate = calls * per_call / (time.perf_counter() - start)
    del step
    tracemalloc.start()
    step, _ = make_stepper(kind, num_envs, kwargs)
    for _ in range(3):
        step()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return rate, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", default="1,64,1024,8192")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--csv")
    args = parser.parse_args()
    sizes = [int(x) for x in args.num_envs.split(",")]
    rows = []
    print(f"{'env':>7} {'p':>3} {'K':>3} {'n':>5} {'num_envs':>8} {'steps/s':>11} {'peak MiB':>9}")
    for kwargs in SETTINGS:
        for kind in ("single", "sync", "native"):
            for num_envs in [1] if kind == "single" else sizes:
                if kind == "sync" and num_envs * kwargs["n"] > 64 * 1024:
                    continue  # minutes a measurement; the trend is clear well before
                rate, peak = measure(kind, num_envs, kwargs, args.seconds)
                rows.append(
                    dict(
                        env=kind,
                        **kwargs,
                        num_envs=num_envs,
                        steps_per_s=round(rate),
                        peak_mib=round(peak, 1),
                    )
                )
                print(
                    f"{kind:>7} {kwargs['p']:>3} {kwargs['K']:>3} {kwargs['n']:>5} {num_envs:>8} "
                    f"{rate:>11,.0f} {peak:>9.1f}",
                    flush=True,
                )
    if args.csv:
        write_csv(args.csv, rows)


if __name__ == "__main__":
    main()
