"""Datasets as Hugging Face dataset folders: prompt rows in Parquet splits, and a dataset card.

One idea: a dataset folder, written (rows, card) and read back as records, in one place.

``gf2 generate --format hf --out data/gf2-p12`` writes ``data/<split>.parquet`` (one row a record:
the chat prompt, the scorer's columns, the setting, the record's JSON; :data:`COLUMNS`) and
``README.md``, whose YAML front matter (``configs``, ``dataset_info``, licence, task categories,
tags, size) is what ``datasets.load_dataset("data/gf2-p12")`` reads. Writing needs only pyarrow.

Each split has its own seed (:func:`split_seed`: derived from ``--seed`` and the split's name unless
given as ``name=N@SEED``), so splits are disjoint and each one's size can change without touching
another; record ``trial`` at depth ``g`` of a split is ``generate_record(config, g, trial, seed)``.
Every ``gf2`` command that takes a records file also reads a split (``data/<split>.parquet``, or
the folder when it has one split) through :func:`split_records_json`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from gf2env.config.settings import PER_DEPTH, TaskSettings, check_depths
from gf2env.errors import GF2ConfigError, RecordFormatError
from gf2env.records.columns import generate_columns
from gf2env.records.parquet import PARQUET_SUFFIXES, require_pyarrow
from gf2env.records.record import check_record_count
from gf2env.records.rows import prompt_row
from gf2env.text.prompt import check_prompt_id

CARD = "README.md"
DATA_DIR = "data"
ROW_GROUP = 2048  # rows rendered and written at once
SPLIT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
LICENSE = "mit"  # the licence of gf2env, which generates the data (LICENSE)

# Each column: its name, its type ("int64", "string", "int64 list" or "messages") and what it holds.
COLUMNS = (
    ("prompt", "messages", "the chat prompt, a list of `{role, content}` messages (`prompt_row`)"),
    ("target", "int64 list", "the next term: its d−1 payload indices, 0-based, ascending"),
    ("answer_offset", "int64", "what an answer's indices carry (n for `paper`, `plain-v1`; 0 for compact)"),
    ("p", "int64", "payload bits"),
    ("g", "int64", "depth: the terms already known (the prompt's prefix)"),
    ("d", "int64", "term degree (a term has d−1 payload indices)"),
    ("K", "int64", "labelled samples in the prompt"),
    ("n", "int64", "terms of the record's instance (address bits)"),
    ("sampling", "string", "how the samples were drawn (adversarial, diagnostic or uniform)"),
    ("seed", "int64", "the split's seed"),
    ("trial", "int64", "index at its depth: the row's record is `generate_record(config, g, trial, seed)`"),
    ("prompt_id", "string", "the prompt rendering (`gf2env.text.prompt.PROMPT_IDS`)"),
    ("record", "string", "the record in the paper's JSON (`Record.from_json(json.loads(row['record']))`)"),
)  # fmt: skip


#: The largest seed a split can name: its rows' ``seed`` column is int64.
MAX_SPLIT_SEED = 2**63 - 1


@dataclass(frozen=True)
class Split:
    """One split: ``trials`` records at each depth, drawn with ``seed``."""

    name: str
    trials: int
    seed: int

    def __post_init__(self) -> None:
        if not SPLIT_NAME.match(self.name):
            raise GF2ConfigError(
                f"split name {self.name!r} is not a name of letters, digits and '_' starting with a letter; "
                "pass e.g. train=1000,test=200."
            )
        if self.trials < 1:
            raise GF2ConfigError(f"split {self.name} has {self.trials} records a depth; pass at least 1.")
        check_record_count(self.trials, f"split {self.name}, a depth")
        if not 0 <= self.seed <= MAX_SPLIT_SEED:
            raise GF2ConfigError(
                f"split {self.name} has seed {self.seed}; pass a seed in [0, 2**63 - 1] (the seed column "
                "of a split is int64)."
            )

    @property
    def path(self) -> str:
        """The split's file inside the folder."""
        return f"{DATA_DIR}/{self.name}.parquet"


def split_seed(seed: int, name: str) -> int:
    """The seed of split ``name`` of a dataset generated with ``seed``: 63 bits of a SHA-256 of both,
    so no two (seed, name) pairs share one (``test`` at ``--seed 0`` is never ``train`` at ``--seed 1``)."""
    digest = hashlib.sha256(f"gf2env-split/{seed}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def parse_splits(text: str, seed: int) -> tuple[Split, ...]:
    """``--splits``: ``name=N`` (N records a depth, seed :func:`split_seed`) or ``name=N@SEED``,
    comma-separated, e.g. ``train=1000,test=200``."""
    splits = []
    for item in (part.strip() for part in text.split(",")):
        match = re.fullmatch(r"([^=@]+)=(\d+)(?:@(\d+))?", item)
        if not match:
            raise GF2ConfigError(
                f"--splits item {item!r} is not name=N or name=N@SEED; pass e.g. train=1000,test=200@7."
            )
        name, trials, given = match.group(1), int(match.group(2)), match.group(3)
        splits.append(Split(name, trials, split_seed(seed, name) if given is None else int(given)))
    return tuple(splits)


@dataclass(frozen=True)
class DatasetSpec:
    """What a dataset folder holds: one task setting, its depths, the splits and the prompt."""

    task: TaskSettings
    depths: tuple[int, ...]
    n: int | None  # terms an instance; None: g + 1 at each depth
    splits: tuple[Split, ...]
    prompt_id: str
    seed: int  # the --seed the splits' seeds derive from

    def __post_init__(self) -> None:
        check_depths(self.depths, "--depths", below=self.n)
        check_prompt_id(self.prompt_id, "--prompt")
        if not self.splits:
            raise GF2ConfigError("A dataset folder needs at least one split; pass e.g. --splits train=1000.")
        for key in ("name", "seed"):
            values = [getattr(s, key) for s in self.splits]
            if len(set(values)) < len(values):
                raise GF2ConfigError(f"--splits repeat a {key} ({values}); give each split its own {key}.")

    def n_at(self, g: int) -> int:
        return g + 1 if self.n is None else self.n


SIZE_CATEGORIES = ("n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M", "10M<n<100M", "100M<n<1B")


def size_category(rows: int) -> str:
    """The Hugging Face size category of a dataset of ``rows`` rows (each bucket a factor of 10)."""
    for power, name in enumerate(SIZE_CATEGORIES, start=3):
        if rows < 10**power:
            return name
    raise GF2ConfigError(f"{rows} rows is more than a dataset folder is written for (under 1B); split it.")


def _arrow_schema(pa: Any) -> Any:
    kinds = {
        "int64": pa.int64(),
        "string": pa.string(),
        "int64 list": pa.list_(pa.int64()),
        "messages": pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])),
    }
    return pa.schema([(name, kinds[kind]) for name, kind, _ in COLUMNS])


def _yaml_features() -> list[dict[str, Any]]:
    """``dataset_info.features`` as ``datasets`` writes it for :data:`COLUMNS`."""
    kinds: dict[str, dict[str, Any]] = {
        "int64": {"dtype": "int64"},
        "string": {"dtype": "string"},
        "int64 list": {"list": "int64"},
        "messages": {"list": [{"name": "role", "dtype": "string"}, {"name": "content", "dtype": "string"}]},
    }
    return [{"name": name, **kinds[kind]} for name, kind, _ in COLUMNS]


def command_line(spec: DatasetSpec, out: str | Path) -> str:
    """The ``gf2 generate`` command that writes ``spec`` to ``out`` (every setting and seed spelt out)."""
    t = spec.task
    splits = ",".join(
        f"{s.name}={s.trials}" + ("" if s.seed == split_seed(spec.seed, s.name) else f"@{s.seed}")
        for s in spec.splits
    )
    return " ".join(
        [
            f"gf2 generate --format hf --p {t.p} --d {t.d} --K {t.K} --sampling {t.sampling}",
            *([f"--w {t.w}"] if t.w is not None else []),
            f"--depths {','.join(map(str, spec.depths))} --n {PER_DEPTH if spec.n is None else spec.n}",
            f"--splits {splits} --prompt {spec.prompt_id} --seed {spec.seed} --out {out}",
        ]
    )


def write_dataset_folder(
    out: str | Path, spec: DatasetSpec, progress: Callable[[int], object] | None = None
) -> dict[str, int]:
    """Write ``spec`` as a dataset folder at ``out`` (absent or an empty directory); returns the rows
    of each split. The folder appears whole or not at all (it is written beside ``out``, then moved)."""
    pa, pq = require_pyarrow()
    out = Path(out)
    if out.suffix.lower() in PARQUET_SUFFIXES:
        raise GF2ConfigError(
            f"--out {out} ends in {out.suffix}, which every gf2 command reads as one Parquet records file; "
            "name the dataset folder without it (e.g. --out data/gf2-p12), or pass --format parquet with "
            "the .parquet name for a records file."
        )
    if (out.exists() and not out.is_dir()) or (out.is_dir() and any(out.iterdir())):
        raise GF2ConfigError(
            f"--out {out} already exists and is not an empty folder; remove it or pick another --out."
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / DATA_DIR).mkdir(parents=True)
    schema = _arrow_schema(pa)
    sizes: dict[str, int] = {}
    arrow_bytes = dict.fromkeys((s.name for s in spec.splits), 0)
    file_bytes: dict[str, int] = {}
    try:
        for split in spec.splits:
            setting = {"d": spec.task.d, "K": spec.task.K, "sampling": spec.task.sampling}
            with pq.ParquetWriter(str(tmp / split.path), schema, compression="zstd") as writer:
                for g in spec.depths:
                    n = spec.n_at(g)
                    columns = generate_columns(spec.task.config(n), g, split.trials, split.seed, n=n)
                    for lo in range(0, columns.R, ROW_GROUP):
                        rows = [
                            {
                                **prompt_row(columns.record(i), spec.prompt_id),
                                **setting,
                                "n": n,
                                "seed": split.seed,
                                "trial": i,
                                "prompt_id": spec.prompt_id,
                            }
                            for i in range(lo, min(lo + ROW_GROUP, columns.R))
                        ]
                        table = pa.Table.from_pylist(rows, schema=schema)
                        writer.write_table(table)
                        arrow_bytes[split.name] += table.nbytes
                        if progress is not None:
                            progress(len(rows))
            sizes[split.name] = split.trials * len(spec.depths)
            file_bytes[split.name] = (tmp / split.path).stat().st_size
        (tmp / CARD).write_text(dataset_card(spec, out, sizes, arrow_bytes, file_bytes))
        if out.is_dir():
            out.rmdir()
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return sizes


def _gf2env_version() -> str:
    try:
        return metadata.version("gf2env")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def dataset_card(
    spec: DatasetSpec,
    out: str | Path,
    sizes: dict[str, int],
    arrow_bytes: dict[str, int],
    file_bytes: dict[str, int],
) -> str:
    """The folder's ``README.md``: YAML front matter for ``datasets`` and the Hub, then the prose.
    ``sizes`` are each split's rows, ``arrow_bytes`` its size in memory, ``file_bytes`` on disk."""
    t = spec.task
    config = t.config(spec.n_at(max(spec.depths)))
    total = sum(sizes.values())
    front = {
        "license": LICENSE,
        "language": ["en"],
        "pretty_name": f"gf2env GF(2) circuit reconstruction, p={t.p} d={t.d} K={t.K} {t.sampling}",
        "task_categories": ["text-generation"],
        "tags": ["gf2env", "reasoning", "boolean-circuits", "gf2", "synthetic", "reinforcement-learning"],
        "size_categories": [size_category(total)],
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": s.name, "path": s.path} for s in spec.splits],
            }
        ],
        "dataset_info": {
            "config_name": "default",
            "features": _yaml_features(),
            "splits": [
                {"name": s.name, "num_bytes": arrow_bytes[s.name], "num_examples": sizes[s.name]}
                for s in spec.splits
            ],
            "download_size": sum(file_bytes.values()),
            "dataset_size": sum(arrow_bytes.values()),
        },
    }
    depths = ", ".join(map(str, spec.depths))
    n_text = "g+1 (each depth's own)" if spec.n is None else str(spec.n)
    w_text = f", payload weight w={config.weight}" if t.sampling == "adversarial" else ""
    split_rows = [
        f"| `{s.name}` | {sizes[s.name]} | {s.trials} | {s.seed} | `{s.path}` | {file_bytes[s.name]:,} |"
        for s in spec.splits
    ]
    field_rows = [f"| `{name}` | {kind} | {what} |" for name, kind, what in COLUMNS]
    rebuild = [
        f"gf2 generate --p {t.p} --d {t.d} --K {t.K} --sampling {t.sampling}"
        + (f" --w {t.w}" if t.w is not None else "")
        + f" --depths {','.join(map(str, spec.depths))} --n {PER_DEPTH if spec.n is None else spec.n}"
        + f" --trials {s.trials} --seed {s.seed} --out {s.name}.json"
        for s in spec.splits
    ]
    first = spec.splits[-1]
    body = f"""
# gf2env: GF(2) circuit reconstruction (p={t.p}, d={t.d}, K={t.K}, {t.sampling})

Each row is one step of a hidden Boolean circuit over GF(2): `y` is the XOR of `n` terms, term `j`
the AND of address bit `a_j` and {t.d - 1} of the {t.p} payload bits. The prompt shows the `g` terms
already known and {t.K} labelled samples; the answer is the next term's {t.d - 1} payload indices, in
the form the prompt asks for. Grade a reply with gf2env's scorer:
`gf2env.text.answers.score_answer(reply, row["target"], row["p"], row["answer_offset"]).correct`.

## Setting

p={t.p} payload bits, degree d={t.d}, K={t.K} samples a step, {t.sampling} sampling{w_text}; depths
{depths}; n={n_text} terms an instance; prompt `{spec.prompt_id}` (the indices an answer
carries are offset by the row's `answer_offset`). A uniform guess is right with probability
1/C({t.p}, {t.d - 1}) = {config.trivial_baseline:.4g}.

## Splits

| split | rows | records a depth | seed | file | bytes |
|---|---|---|---|---|---|
{chr(10).join(split_rows)}

Rows are in depth order ({depths}), trials `0..N-1` within a depth. A split's seed is
`gf2env.records.hf_dataset.split_seed({spec.seed}, name)` (63 bits of a SHA-256 of the generation seed and
the split's name) unless the command gave it as `name=N@SEED`, so splits never share a record
stream, and a split's size can change without changing the others.

## Fields

| field | type | holds |
|---|---|---|
{chr(10).join(field_rows)}

## How it was generated

With gf2env {_gf2env_version()}:

```bash
{command_line(spec, out)}
```

Record `trial` at depth `g` of a split is a pure function of `(seed, g, trial)`
(`gf2env.records.record.generate_record`), so the command writes the same rows on any machine. Each split
is also the records file these commands write (read by every `gf2` command):

```bash
{chr(10).join(rebuild)}
```

and every `gf2` command that takes `--records` reads a split directly, e.g.
`gf2 compare --records {Path(out) / first.path} --agents A,B,decoder --out results/`.

## Use

```python
from datasets import load_dataset
from gf2env.text.answers import score_answer

ds = load_dataset("{out}")
row = ds["{first.name}"][0]  # row["prompt"]: the chat messages; a model's reply is graded so:
reply = "\\\\boxed{{[" + ", ".join(str(i + row["answer_offset"]) for i in row["target"]) + "]}}"
assert score_answer(reply, row["target"], row["p"], row["answer_offset"]).correct
```

## What it does not hold

Each row is one step of a fresh instance, not an episode: the environment's multi-step dynamics
(reveal, retry, step modes), tool use (a model running code on the samples) and a training
curriculum over depths are the environment's (`GF2Recon-v1`, `GF2ReconText-v1`, `gf2 train`), not
the dataset's. One task setting and one prompt rendering a folder; another rendering of the same
records is `prompt_row(Record.from_json(json.loads(row["record"])), prompt_id)`.

## Licence

MIT, as gf2env, which generated the data (synthetic: no personal or third-party content).
"""
    return "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---\n" + body


def _front_matter(card: Path) -> dict[str, Any]:
    text = card.read_text()
    parts = text.split("---\n", 2)
    if not text.startswith("---\n") or len(parts) < 3:
        raise GF2ConfigError(f"{card} has no YAML front matter; is {card.parent} a gf2 dataset folder?")
    front = yaml.safe_load(parts[1])
    return front if isinstance(front, dict) else {}


def _split_files(folder: Path) -> dict[str, Path]:
    """The split files a dataset folder's card names (its ``configs``' data files)."""
    card = folder / CARD
    if not card.exists():
        raise GF2ConfigError(
            f"{folder} is a folder without a dataset card ({CARD}); pass a records file, or a folder "
            "written by gf2 generate --format hf (or one of its data/<split>.parquet files)."
        )
    files = {}
    for config in _front_matter(card).get("configs") or []:
        for entry in config.get("data_files") or []:
            if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                files[str(entry.get("split"))] = folder / entry["path"]
    if not files:
        raise GF2ConfigError(f"{card} names no data files under configs; is {folder} a gf2 dataset folder?")
    return files


def split_records_json(path: str | Path) -> bytes | None:
    """The records of a dataset split as a JSON array (the paper's layout), or ``None`` when ``path``
    is neither a dataset folder nor a split file (a records file, read as such).

    ``path`` is a split's Parquet file (it has ``prompt`` and ``record`` columns), or a dataset
    folder with one split; a folder with several is an error naming each split's file."""
    path = Path(path)
    if path.is_dir():
        files = _split_files(path)
        if len(files) > 1:
            choices = ", ".join(f"{name}: {file}" for name, file in files.items())
            raise GF2ConfigError(
                f"{path} holds the splits {sorted(files)}; pass one split's file ({choices})."
            )
        path = next(iter(files.values()))
        if not path.is_file():
            raise GF2ConfigError(f"{path}, the split its card names, does not exist; regenerate the folder.")
    elif path.suffix.lower() not in PARQUET_SUFFIXES or not path.is_file():
        return None
    pa, pq = require_pyarrow()
    try:
        names = pq.read_schema(str(path)).names
    except (OSError, pa.ArrowInvalid):
        return None  # not Parquet at all: the records reader names the problem
    if not {"prompt", "record"} <= set(names):
        return None
    column = pq.read_table(str(path), columns=["record"]).column("record")
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        raise RecordFormatError(
            f"{path}: its 'record' column holds {column.type}, not the records' JSON strings."
        )
    records = column.to_pylist()
    missing = [i for i, record in enumerate(records) if not isinstance(record, str)]
    if missing:
        raise RecordFormatError(f"Row {missing[0]} of {path} has no record (its 'record' is null).")
    return ("[" + ",".join(records) + "]").encode("utf-8")


__all__ = [
    "COLUMNS",
    "DatasetSpec",
    "Split",
    "command_line",
    "dataset_card",
    "parse_splits",
    "size_category",
    "split_records_json",
    "split_seed",
    "write_dataset_folder",
]
