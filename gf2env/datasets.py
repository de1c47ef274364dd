"""Datasets of records: the paper's presets and ``gf2 generate``, which writes them as the paper's
JSON, JSON Lines or Parquet (:mod:`gf2env.record_columns`), drawn a depth at a time in batches.

Record ``trial`` at depth ``g`` is a pure function of ``(seed, g, trial)``
(:func:`gf2env.records.generate_record`), so a dataset is reproducible from its command line.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from tqdm import tqdm

from gf2env.cli import int_list, n_arg
from gf2env.errors import GF2ConfigError
from gf2env.oracle import SAMPLING_MODES
from gf2env.record_columns import generate_columns
from gf2env.record_parquet import PARQUET_SUFFIXES, write_parquet
from gf2env.settings import PER_DEPTH, TaskSettings


@dataclass(frozen=True)
class DatasetPreset:
    """A named dataset grid. ``n=None`` means each depth's instances have ``g + 1`` terms."""

    depths: tuple[int, ...]
    trials: int
    n: int | None
    task: TaskSettings = field(default_factory=TaskSettings)


PRESETS = {
    # The paper's estimator / small-depth LLM grid: n = 32 address bits at every depth.
    "paper-small": DatasetPreset(depths=(0, 1, 3, 7, 15, 31), trials=500, n=32),
    # The paper's large-depth LLM files: n = g + 1 address bits.
    "paper-large": DatasetPreset(depths=(63, 127), trials=10, n=None),
}


def cmd_generate(args: argparse.Namespace) -> int:
    preset = PRESETS[args.preset] if args.preset else DatasetPreset(depths=(0,), trials=100, n=32)
    depths = args.depths if args.depths is not None else preset.depths
    trials = args.trials if args.trials is not None else preset.trials
    n = preset.n if args.n is None else (None if args.n == PER_DEPTH else args.n)
    task = preset.task
    settings = TaskSettings(
        p=args.p or task.p,
        d=args.d or task.d,
        K=args.K or task.K,
        sampling=args.sampling or task.sampling,
        w=args.w,
    )
    config = settings.config(max(depths) + 1 if n is None else n)
    too_deep = [g for g in depths if n is not None and not 0 <= g < n]
    if too_deep:
        raise GF2ConfigError(
            f"depths {too_deep} need more than n={n} terms (or are negative); pass --n g+1 or a larger --n."
        )
    fmt = args.format or ("parquet" if Path(args.out).suffix.lower() in PARQUET_SUFFIXES else "json")
    bar = tqdm(total=len(depths) * trials, desc="records", unit="rec", disable=args.quiet)
    groups = []
    for g in depths:
        groups.append(generate_columns(config, g, trials, args.seed, n=g + 1 if n is None else n))
        bar.update(trials)
    bar.close()
    offset = 0
    for i, group in enumerate(groups):  # file order: depth by depth, trials in order
        groups[i] = replace(group, index=group.index + offset)
        offset += group.R
    if fmt == "parquet":
        count = write_parquet(args.out, groups)
    else:
        records = (group.record(row) for group in groups for row in range(group.R))
        with open(args.out, "w") as fh:
            count = 0
            if fmt == "jsonl":
                for record in records:
                    fh.write(json.dumps(record.to_json()) + "\n")
                    count += 1
            else:
                fh.write("[")
                for record in records:
                    fh.write(("," if count else "") + json.dumps(record.to_json()))
                    count += 1
                fh.write("]\n")
    print(f"wrote {count} records to {args.out}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """``gf2 generate``."""
    gen = sub.add_parser("generate", help="write a dataset of records in the paper's JSON format")
    gen.add_argument("--preset", choices=sorted(PRESETS), help="a paper grid (overridable below)")
    gen.add_argument("--depths", type=int_list, help="comma-separated depths, e.g. 0,1,3,7")
    gen.add_argument("--trials", type=int, help="records a depth")
    gen.add_argument("--n", type=n_arg, help="terms an instance, or 'g+1' (default: the preset's)")
    gen.add_argument("--p", type=int)
    gen.add_argument("--d", type=int)
    gen.add_argument("--K", type=int)
    gen.add_argument("--sampling", choices=SAMPLING_MODES)
    gen.add_argument("--w", type=int, help="adversarial payload weight (default w*)")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument(
        "--format",
        choices=("json", "jsonl", "parquet"),
        help="json (the paper's array; default), jsonl, or parquet (columnar, needs pyarrow; default for "
        "an --out ending in .parquet); every command reads all three",
    )
    gen.add_argument("--out", required=True, help="output file")
    gen.add_argument("--quiet", action="store_true", help="no progress bar")
    gen.set_defaults(func=cmd_generate)


__all__ = ["PRESETS", "DatasetPreset", "cmd_generate", "register"]
