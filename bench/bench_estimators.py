"""Records per second of estimators A, B, B-exact and D on batches of records, one core.

    python bench/bench_estimators.py [--records 2000] [--repeats 3] [--settings 12:3,12:127] [--csv out.csv]

For each setting (p, g) with K=32, d=4 and adversarial payloads it generates the records once,
stacks them into a StepBatch (timed apart), then times each estimator's ``evaluate`` on the whole
batch (best of ``--repeats``). ``residuals`` is the share every estimator pays for the prefix part
of the labels. The reference column is the public numba implementation's records/s for A (and B at
g=127), one record a call, as quoted in issue 3. An estimator is skipped at a setting it does
not support (B-exact runs at g <= 3 only).
"""

from __future__ import annotations

import os

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")  # one core, as the issue asks

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.estimators import make_estimator  # noqa: E402
from bench.table import write_csv  # noqa: E402
from gf2env.oracle import TaskConfig  # noqa: E402
from gf2env.posterior import StepBatch, residuals  # noqa: E402
from gf2env.records import generate_record  # noqa: E402

# (64, 3) shows B's likelihood contraction at work: at p=64, g=31 every soft sample's mask
# probability rounds to exactly 1/2 in float64, the composite posterior is flat and it is skipped.
SETTINGS = ((12, 3), (12, 31), (12, 127), (32, 31), (64, 31), (64, 3))
REFERENCE_A = {(12, 31): 4300, (12, 127): 1800, (32, 31): 500, (64, 31): 63}
REFERENCE_B = {(12, 127): 380}
AGENTS = ("A", "B", "B-exact", "D(g//2)")


def best_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=2000, help="records a setting (fewer at p=64)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--settings", help="p:g pairs to run, e.g. 12:3,12:127 (default: all)")
    parser.add_argument("--csv", help="also write the table as CSV")
    args = parser.parse_args()
    settings = SETTINGS
    if args.settings:
        settings = tuple(tuple(int(x) for x in pair.split(":")) for pair in args.settings.split(","))

    rows = []
    print(f"{'p':>3} {'g':>4} {'R':>5} {'agent':>8} {'rec/s':>10} {'ref rec/s':>9} {'x ref':>7}")
    for p, g in settings:
        R = args.records if p < 64 else max(1, args.records // 4)
        config = TaskConfig(p=p, d=4, K=32, n=g + 1)
        records = [generate_record(config, g, t, seed=0) for t in range(R)]
        start = time.perf_counter()
        batch = StepBatch.from_records(records)
        stack_s = time.perf_counter() - start
        resid_s = best_time(lambda b=batch: residuals(b), args.repeats)
        for name in ("StepBatch", "residuals"):
            rate = R / (stack_s if name == "StepBatch" else resid_s)
            print(f"{p:>3} {g:>4} {R:>5} {name:>8} {rate:>10,.0f} {'':>9} {'':>7}")
            rows.append(
                {"p": p, "g": g, "R": R, "agent": name, "records_per_s": round(rate), "reference": None}
            )
        for spec in AGENTS:
            est = make_estimator(spec)
            if not est.supports(p, 4, 32, g):
                continue
            seconds = best_time(lambda e=est, b=batch: e.evaluate(b, np.random.default_rng(0)), args.repeats)
            rate = R / seconds
            ref = REFERENCE_A.get((p, g)) if spec == "A" else REFERENCE_B.get((p, g)) if spec == "B" else None
            ratio = f"{rate / ref:>6.0f}x" if ref else ""
            print(f"{p:>3} {g:>4} {R:>5} {est.name:>8} {rate:>10,.0f} {ref or '':>9} {ratio:>7}")
            row = {"p": p, "g": g, "R": R, "agent": est.name, "records_per_s": round(rate), "reference": ref}
            rows.append(row)
    if args.csv:
        write_csv(args.csv, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
