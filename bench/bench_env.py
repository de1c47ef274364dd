"""Single-environment step rate of GF2Recon-v1 at fixed depths.

Each measurement resets an env at ``start_depth = g`` and times ``steps`` calls to ``step`` at that
depth (the ``retry`` mode with unlimited-in-practice attempts keeps the depth fixed), so the number
is the cost of one step at depth g: validation, fresh K-sample evidence and the observation.

    python bench/bench_env.py [--steps 3000] [--csv bench_env.csv]
"""

from __future__ import annotations

import argparse
import time

from table import write_csv

from gf2env import GF2ReconEnv

SETTINGS = [  # (p, K, n, g)
    (12, 32, 32, 0),
    (12, 32, 32, 31),
    (12, 32, 128, 127),
    (64, 32, 1024, 1023),
]


def steps_per_second(p: int, K: int, n: int, g: int, steps: int) -> float:
    env = GF2ReconEnv(p=p, K=K, n=n, start_depth=g, step_mode="retry", max_attempts=steps + 201)
    env.reset(seed=0)
    wrong = 0 if env.instance.term(g) != env.action_to_indices(0) else 1
    for _ in range(200):  # warm-up
        env.step(wrong)
    start = time.perf_counter()
    for _ in range(steps):
        env.step(wrong)
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--csv", help="also write the table as CSV here")
    args = parser.parse_args()
    rows = []
    print(f"{'p':>3} {'K':>3} {'n':>5} {'g':>5} {'steps/s':>10}")
    for p, K, n, g in SETTINGS:
        rate = steps_per_second(p, K, n, g, args.steps)
        rows.append({"env": "GF2ReconEnv", "p": p, "K": K, "n": n, "g": g, "steps_per_s": round(rate)})
        print(f"{p:>3} {K:>3} {n:>5} {g:>5} {rate:>10,.0f}")
    if args.csv:
        write_csv(args.csv, rows)


if __name__ == "__main__":
    main()
