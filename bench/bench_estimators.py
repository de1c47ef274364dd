"""Records per second of estimators A, B and D, from the paper's JSON, from Parquet and from a batch.

    python bench/bench_estimators.py [--records 2000] [--repeats 3] [--settings 12:3,12:127] [--csv out.csv]

For each setting (p, g) with K=32, d=4 and adversarial payloads it generates the records once
(timed: ``generate``), writes them as the paper's JSON and as Parquet, then times each estimator
three ways (best of ``--repeats``, one core): ``json`` reads the file, builds the batch and
evaluates; ``parquet`` the same from the Parquet file; ``batch`` evaluates the ready batch.
The reference columns are the paper's public code, measured side by side on the same machine (one thread,
JIT warm-up excluded). An estimator is skipped at a setting it does not support (B-exact runs at
g <= 3 only).
"""

from __future__ import annotations

import os

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")  # one core, as the issue asks

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.table import write_csv  # noqa: E402
from gf2env.agents.estimators import make_estimator  # noqa: E402
from gf2env.records.columns import generate_columns  # noqa: E402
from gf2env.records.files import read_record_columns  # noqa: E402
from gf2env.records.parquet import write_parquet  # noqa: E402
from gf2env.records.record import write_records  # noqa: E402
from gf2env.task.oracle import TaskConfig  # noqa: E402

# (64, 3) shows B's likelihood contraction at work: at p=64, g=31 every soft sample's mask
# probability rounds to exactly 1/2 in float64, the composite posterior is flat and it is skipped.
SETTINGS = ((12, 3), (12, 31), (12, 127), (32, 31), (64, 31), (64, 3))
REFERENCE = {  # records/s of the paper's code (docs/performance.md): generate, A, B, D
    (12, 31): {"generate": 1704, "A": 5287, "B": 4060, "D(g//2)": 4216},
    (12, 127): {"generate": 526, "A": 2382, "B": 501, "D(g//2)": 480},
    (32, 31): {"A": 575, "B": 678, "D(g//2)": 645},
    (64, 31): {"A": 91, "B": 90, "D(g//2)": 88},
}
AGENTS = ("A", "B", "B-exact", "D(g//2)")


def best_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def from_file(estimator, path: Path) -> list:
    """Read a records file, batch it and evaluate: what ``gf2 compare`` on a records file does."""
    return [estimator.evaluate(c.step_batch(), np.random.default_rng(0)) for c in read_record_columns(path)]


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
    tmp = Path(tempfile.mkdtemp(prefix="gf2-bench-"))
    print(
        f"{'p':>3} {'g':>4} {'R':>5} {'agent':>9} {'source':>8} {'rec/s':>11} {'ref rec/s':>9} {'x ref':>7}"
    )

    def report(p: int, g: int, R: int, agent: str, source: str, rate: float) -> None:
        ref = REFERENCE.get((p, g), {}).get(agent)
        ratio = f"{rate / ref:>6.1f}x" if ref else ""
        print(
            f"{p:>3} {g:>4} {R:>5} {agent:>9} {source:>8} {rate:>11,.0f} {ref or '':>9} {ratio:>7}",
            flush=True,
        )
        rows.append(dict(p=p, g=g, R=R, agent=agent, source=source, records_per_s=round(rate), reference=ref))

    for p, g in settings:
        R = args.records if p < 64 else max(1, args.records // 4)
        config = TaskConfig(p=p, d=4, K=32, n=g + 1)
        generate_s = best_time(lambda c=config, g=g, R=R: generate_columns(c, g, R, seed=0), args.repeats)
        report(p, g, R, "generate", "batch", R / generate_s)
        columns = generate_columns(config, g, R, seed=0)
        json_path, parquet_path = tmp / f"p{p}-g{g}.json", tmp / f"p{p}-g{g}.parquet"
        write_records(json_path, columns.records())
        write_parquet(parquet_path, [columns])
        batch = columns.step_batch()
        for spec in AGENTS:
            est = make_estimator(spec)
            if not est.supports(p, 4, 32, g):
                continue
            for source, run in (
                ("json", lambda e=est, f=json_path: from_file(e, f)),
                ("parquet", lambda e=est, f=parquet_path: from_file(e, f)),
                ("batch", lambda e=est, b=batch: e.evaluate(b, np.random.default_rng(0))),
            ):
                report(p, g, R, est.name, source, R / best_time(run, args.repeats))
        read_s = best_time(lambda f=json_path: [c.step_batch() for c in read_record_columns(f)], args.repeats)
        report(p, g, R, "read", "json", R / read_s)
        read_s = best_time(
            lambda f=parquet_path: [c.step_batch() for c in read_record_columns(f)], args.repeats
        )
        report(p, g, R, "read", "parquet", R / read_s)
    if args.csv:
        write_csv(args.csv, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
