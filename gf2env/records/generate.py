"""Datasets of records: the paper's presets and ``gf2 generate``, which writes them as the paper's
JSON, JSON Lines or Parquet (:mod:`gf2env.records.columns`), drawn a depth at a time in batches, or
as a Hugging Face dataset folder of prompt rows with splits and a card (:mod:`gf2env.records.hf_dataset`).

Record ``trial`` at depth ``g`` is a pure function of ``(seed, g, trial)``
(:func:`gf2env.records.record.generate_record`), so a dataset is reproducible from its command line. With
``--episodes`` the records are the steps of episodes instead (:func:`_episode_groups`).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from tqdm import tqdm

from gf2env.config.flags import add_flags, int_list, n_arg
from gf2env.config.options import option
from gf2env.config.settings import DEPTH_LADDER, PER_DEPTH, TaskSettings, check_episode_terms
from gf2env.errors import GF2ConfigError
from gf2env.records.columns import RecordColumns, generate_columns, generate_episode_columns
from gf2env.records.hf_dataset import DatasetSpec, Split, parse_splits, split_seed, write_dataset_folder
from gf2env.records.parquet import PARQUET_SUFFIXES, write_parquet
from gf2env.records.record import check_record_count, check_seed
from gf2env.run_record import RECORD_FILE, run_record
from gf2env.task.oracle import TaskConfig
from gf2env.text.prompt import PAPER_PROMPT_ID, PROMPT_IDS


@dataclass(frozen=True)
class DatasetPreset:
    """A named dataset grid. ``n=None`` means each depth's instances have ``g + 1`` terms."""

    depths: tuple[int, ...] = field(
        metadata=option(type=int_list, help="comma-separated depths, e.g. 0,1,3,7")
    )
    trials: int = field(metadata=option(help="records a depth (a folder without --splits: its train)"))
    n: int | None = field(
        metadata=option(type=n_arg, help="terms an instance, or 'g+1' (default: the preset's)")
    )
    task: TaskSettings = field(default_factory=TaskSettings, metadata=option(flag=False))


PRESETS = {
    # The paper's estimator / small-depth LLM grid: n = 32 address bits at every depth.
    "paper-small": DatasetPreset(depths=DEPTH_LADDER, trials=500, n=32),
    # The paper's large-depth LLM files: n = g + 1 address bits.
    "paper-large": DatasetPreset(depths=(63, 127), trials=10, n=None),
}


def cmd_generate(args: argparse.Namespace) -> int:
    preset = PRESETS[args.preset] if args.preset else DatasetPreset(depths=(0,), trials=100, n=32)
    depths = args.depths if args.depths is not None else preset.depths
    trials = check_record_count(args.trials if args.trials is not None else preset.trials, "--trials")
    check_episode_terms(args.episodes, args.n, default_n="the preset's n, or max depth + 1")
    n = preset.n if args.n is None else (None if args.n == PER_DEPTH else args.n)
    if args.episodes and n is None:
        n = max(depths) + 1
    task = preset.task
    check_seed(args.seed, "--seed")
    settings = TaskSettings(
        p=task.p if args.p is None else args.p,
        d=task.d if args.d is None else args.d,
        K=task.K if args.K is None else args.K,
        sampling=task.sampling if args.sampling is None else args.sampling,
        w=args.w,
    )
    config = settings.config(max(depths) + 1 if n is None else n)
    too_deep = [g for g in depths if n is not None and not 0 <= g < n]
    if too_deep:
        raise GF2ConfigError(
            f"depths {too_deep} need more than n={n} terms (or are negative); pass "
            + ("a larger --n." if args.episodes else "--n g+1 or a larger --n.")
        )
    fmt = output_format(args.format, args.out, args.splits, args.prompt)
    if fmt == "hf":
        if args.episodes:
            raise GF2ConfigError(
                "--episodes writes one records file (json, jsonl or parquet), not a dataset folder; "
                "drop --format hf, --splits and --prompt, or drop --episodes."
            )
        return _write_folder(args, settings, depths, n, trials)
    check_record_count(trials * len(depths), f"--trials {trials} at {len(depths)} depths")
    held = hold_records_out(args.out)
    dataset = DatasetPreset(depths=tuple(depths), trials=trials, n=n, task=settings)
    run = {"preset": args.preset, "dataset": dataset, "episodes": args.episodes, "seed": args.seed}
    try:
        with recorded(args.out, False, {**run, "format": fmt, "out": args.out}, {"seed": args.seed}):
            return _write_records_of(args, fmt, config, depths, n, trials)
    except OSError as err:
        if err.filename is not None:
            raise
        why = err.strerror or str(err)
        raise GF2ConfigError(f"--out {args.out}: {why}; nothing usable was written.") from None
    finally:
        if held is not None:
            os.close(held)


def _write_records_of(
    args: argparse.Namespace,
    fmt: str,
    config: TaskConfig,
    depths: tuple[int, ...],
    n: int | None,
    trials: int,
) -> int:
    """Draw the records (or episodes) and write them as one records file."""
    if args.episodes:
        return _write_records(args, fmt, _episode_groups(config, depths, trials, args.seed, args.quiet))
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
    return _write_records(args, fmt, groups)


def _episode_groups(
    config: TaskConfig, depths: tuple[int, ...], trials: int, seed: int, quiet: bool
) -> list[RecordColumns]:
    """``gf2 generate --episodes``: one group a depth, the record of episode ``e`` at the ``j``-th depth
    at file position ``e * len(depths) + j``: each episode's steps written together, depth ascending,
    and each record's ``exp`` naming its episode (:func:`gf2env.records.record.episode_of` reads it back)."""
    bar = tqdm(total=len(depths) * trials, desc="records", unit="rec", disable=quiet)
    groups = []
    for j, g in enumerate(depths):
        group = generate_episode_columns(config, g, trials, seed)
        groups.append(replace(group, index=group.index * len(depths) + j))
        bar.update(trials)
    bar.close()
    return groups


def _write_records(args: argparse.Namespace, fmt: str, groups: list[RecordColumns]) -> int:
    """Write ``groups`` to ``args.out`` as one records file, in the order of their ``index``."""
    if fmt == "parquet":
        count = write_parquet(args.out, groups)
    else:
        owner = np.concatenate([np.full(group.R, k) for k, group in enumerate(groups)]).tolist()
        rows = np.concatenate([np.arange(group.R) for group in groups]).tolist()
        order = np.argsort(np.concatenate([group.index for group in groups]), kind="stable").tolist()
        records = (groups[owner[i]].record(rows[i]) for i in order)
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


def record_folder(out: str, folder: bool) -> Path | None:
    """Where ``gf2 generate`` keeps its ``run.json``: the folder ``--out`` is written into, beside the
    records file or the dataset ``folder`` (which holds only what ``datasets`` reads). None for an
    ``--out`` that is no file or folder to keep (empty, a device, a FIFO, under /dev, /proc or /sys), or
    whose folder is missing for a records file (the write fails and says so) or is no folder."""
    path = Path(out)
    if not out.strip() or (path.exists() and not (path.is_dir() if folder else path.is_file())):
        return None
    parent = Path(os.path.abspath(out)).parent
    if parent.resolve().parts[:2] in (("/", "dev"), ("/", "proc"), ("/", "sys")):
        return None
    if (parent.exists() and not parent.is_dir()) or (not folder and not parent.exists()):
        return None
    return parent


@contextmanager
def recorded(out: str, folder: bool, config: dict[str, object], seeds: dict[str, int]) -> Iterator[None]:
    """The body with its :func:`~gf2env.run_record.run_record` in :func:`record_folder` (none where that
    is None; a folder that refuses it is a warning, the write itself then says what is wrong)."""
    where = record_folder(out, folder)
    with ExitStack() as stack:
        if where is not None:
            try:
                stack.enter_context(run_record(where, "generate", config, seeds))
            except OSError as err:
                why = err.strerror or str(err)
                print(
                    f"gf2: warning: no {RECORD_FILE} in {where} ({why}); writing --out all the same",
                    file=sys.stderr,
                )
        yield


def hold_records_out(out: str) -> int | None:
    """Refuse at once an ``--out`` that a records file cannot be written to without waiting forever: a
    FIFO no process reads (opening it to write blocks until one does). A FIFO with a reader, or a pipe
    (``--out /dev/stdout`` piped into another command), is written as a file is: the writer end opened
    to find the reader is returned, to be closed once the file is written (closing it before would
    show the reader an end of file)."""
    try:
        mode = os.stat(out).st_mode
    except OSError:
        return None  # absent, or not reachable: opening it names the problem
    if not stat.S_ISFIFO(mode):
        return None
    try:
        return os.open(out, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as err:
        if err.errno != errno.ENXIO:
            raise
        raise GF2ConfigError(
            f"--out {out} is a FIFO that no process reads, so writing it would wait forever; start its "
            "reader first, or pass a file."
        ) from None


def output_format(fmt: str | None, out: str, splits: str | None, prompt: str | None) -> str:
    """What ``gf2 generate`` writes: ``json``, ``jsonl`` or ``parquet`` (one records file), or ``hf``
    (a dataset folder). ``--format parquet`` with an ``--out`` ending in ``.parquet``/``.pq`` is a
    records file, with any other ``--out`` the dataset folder (whose splits are Parquet); ``--splits``
    and ``--prompt`` shape a folder and are an error with a records file."""
    parquet_name = Path(out).suffix.lower() in PARQUET_SUFFIXES
    folder_flags = [flag for flag, value in (("--splits", splits), ("--prompt", prompt)) if value is not None]
    if fmt is None:
        fmt = "parquet" if parquet_name else ("hf" if folder_flags else "json")
    if fmt == "parquet" and not parquet_name:
        fmt = "hf"
    if fmt != "hf" and folder_flags:
        raise GF2ConfigError(
            f"{' and '.join(folder_flags)} shape a dataset folder, but --format {fmt} --out {out} writes one "
            "records file; pass --format hf and a folder --out (no .parquet suffix), or drop them."
        )
    return fmt


def _write_folder(
    args: argparse.Namespace, task: TaskSettings, depths: tuple[int, ...], n: int | None, trials: int
) -> int:
    """``gf2 generate --format hf``: the dataset folder (without ``--splits``, one ``train`` split of
    ``--trials`` records a depth)."""
    if args.splits is not None and args.trials is not None:
        raise GF2ConfigError(
            f"--trials {args.trials} and --splits {args.splits} both size the dataset; with --splits, give "
            "each split its records a depth there (e.g. --splits train=1000,test=200) and drop --trials."
        )
    if args.splits is not None:
        splits = parse_splits(args.splits, args.seed)
    else:
        splits = (Split("train", trials, split_seed(args.seed, "train")),)
    spec = DatasetSpec(
        task=task, depths=tuple(depths), n=n, splits=splits,
        prompt_id=PAPER_PROMPT_ID if args.prompt is None else args.prompt, seed=args.seed,
    )  # fmt: skip
    total = sum(s.trials for s in splits) * len(depths)
    for split in splits:
        check_record_count(split.trials * len(depths), f"split {split.name} at {len(depths)} depths")
    run = {"preset": args.preset, "dataset": spec, "format": "hf", "out": args.out}
    seeds = {"seed": args.seed, **{f"split {s.name}": s.seed for s in splits}}
    with (
        recorded(args.out, True, run, seeds),
        tqdm(total=total, desc="rows", unit="row", disable=args.quiet) as bar,
    ):
        sizes = write_dataset_folder(args.out, spec, progress=bar.update)
    counts = ", ".join(f"{name}: {rows}" for name, rows in sizes.items())
    print(f"wrote {sum(sizes.values())} rows ({counts}) and a dataset card to {args.out}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """``gf2 generate``."""
    gen = sub.add_parser(
        "generate", help="write a dataset of records (the paper's JSON, JSONL, Parquet) or a dataset folder"
    )
    gen.add_argument("--preset", choices=sorted(PRESETS), help="a paper grid (overridable below)")
    add_flags(gen, DatasetPreset, overrides=True)  # each overrides the preset's
    add_flags(gen, TaskSettings, overrides=True)
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument(
        "--episodes",
        action="store_true",
        help="write episodes: --trials episodes of one instance each (n = the preset's, or max depth + 1), "
        "its records at --depths written together, depth ascending, exp naming the episode "
        "('episode E seed S SAMPLING'); default: a fresh instance a record",
    )
    gen.add_argument(
        "--format",
        choices=("json", "jsonl", "parquet", "hf"),
        help="json (the paper's array; default), jsonl, or parquet (columnar, needs pyarrow; default for "
        "an --out ending in .parquet): one records file, which every command reads. hf: a dataset folder "
        "for datasets.load_dataset (prompt rows in Parquet splits and a dataset card), also what "
        "parquet writes to an --out without the .parquet suffix",
    )
    gen.add_argument(
        "--splits",
        help="a folder's splits, name=N (N records a depth, the seed derived from --seed and the name) "
        "or name=N@SEED, e.g. train=1000,test=200 (default: train=--trials)",
    )
    gen.add_argument(
        "--prompt",
        help=f"a folder's prompt rendering: {', '.join(PROMPT_IDS)} (default {PAPER_PROMPT_ID}, as gf2 eval)",
    )
    gen.add_argument("--out", required=True, help="output file, or the dataset folder (--format hf)")
    gen.add_argument("--quiet", action="store_true", help="no progress bar")
    gen.set_defaults(func=cmd_generate)


__all__ = ["PRESETS", "DatasetPreset", "cmd_generate", "register"]
