"""Throughput and per-run overhead of gf2env.agents.sandbox on warm workers: sequential runs and SandboxPool,
for an empty snippet and a numpy solver, and what starting a worker costs.

The solver is tests/agents/sandbox_corpus/benign_solver.py (reads the samples, uses numpy, prints a
boxed term) on a default-config record; the empty snippet (``pass``) measures what the sandbox itself
costs a run: sending the job, the fork of a fresh process, its limits and seccomp filter, the wipe
of the scratch and the report. The workers are started (and timed) before the runs are.

    python bench/bench_sandbox.py [--runs 200] [--isolation bwrap] [--pool-size N] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from table import write_csv

from gf2env.agents.sandbox import ISOLATIONS, Sandbox, SandboxPool, SandboxResult, record_view
from gf2env.records.record import generate_record
from gf2env.task.oracle import TaskConfig

SOLVER = Path(__file__).resolve().parent.parent / "tests" / "agents" / "sandbox_corpus" / "benign_solver.py"


def measure(label: str, run: Callable[[], list[SandboxResult]], runs: int) -> dict:
    """Time ``run()`` (which returns the runs' results) and summarise it as one table row."""
    start = time.perf_counter()
    results = run()
    elapsed = time.perf_counter() - start
    failed = [r for r in results if not r.ok]
    if failed:
        raise SystemExit(f"{label}: {len(failed)} of {runs} runs failed, e.g. {failed[0].to_dict()}")
    return {
        "case": label,
        "runs": runs,
        "runs_per_s": round(runs / elapsed, 2),
        "wall_ms_per_run": round(1000 * sum(r.wall_s for r in results) / runs, 1),
        "cpu_ms_per_run": round(1000 * sum(r.cpu_s for r in results) / runs, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--isolation", choices=ISOLATIONS, default=ISOLATIONS[0])
    parser.add_argument("--pool-size", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--csv", help="also write the table as CSV here")
    args = parser.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sandbox = Sandbox(isolation=args.isolation, workers=args.pool_size)
    started = time.perf_counter()
    sandbox.start()
    start_ms = 1000 * (time.perf_counter() - started)
    view = record_view(generate_record(TaskConfig(), 3, 0, seed=0))
    solver = SOLVER.read_text()
    check = sandbox.run(solver, view)
    if not check.ok:
        raise SystemExit(f"the solver does not run: {check.to_dict()}")
    print(f"isolation {args.isolation}; layers {', '.join(sandbox.layers)}")
    print(f"{sandbox.workers} warm workers started in {start_ms:.0f} ms (in parallel)")
    print(f"the solver prints {check.stdout.strip()}; whole-tree peak {check.memory_mb} MiB")
    n = args.runs
    pool = SandboxPool(sandbox, args.pool_size)
    rows = [
        measure("empty, sequential", lambda: [sandbox.run("pass") for _ in range(n)], n),
        measure(f"empty, pool of {pool.size}", lambda: pool.map([("pass", None)] * n), n),
        measure("solver, sequential", lambda: [sandbox.run(solver, view) for _ in range(n)], n),
        measure(f"solver, pool of {pool.size}", lambda: pool.map([(solver, view)] * n), n),
    ]
    sandbox.close()
    print(f"{'case':<22} {'runs':>5} {'runs/s':>8} {'wall ms/run':>12} {'cpu ms/run':>11}")
    for row in rows:
        print(
            f"{row['case']:<22} {row['runs']:>5} {row['runs_per_s']:>8.2f} {row['wall_ms_per_run']:>12.1f}"
            f" {row['cpu_ms_per_run']:>11.1f}"
        )
    if args.csv:
        write_csv(args.csv, rows)


if __name__ == "__main__":
    main()
