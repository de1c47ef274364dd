"""``gf2 generate --format hf``: a dataset folder that ``datasets.load_dataset`` reads, its card, and
its splits read back as records by ``gf2`` itself (real subprocesses, real files)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gf2env.config.settings import TaskSettings
from gf2env.errors import GF2ConfigError
from gf2env.records.files import read_records
from gf2env.records.generate import register
from gf2env.records.hf_dataset import (
    COLUMNS,
    DatasetSpec,
    Split,
    size_category,
    split_seed,
    write_dataset_folder,
)
from gf2env.records.record import generate_record
from gf2env.records.rows import prompt_row
from gf2env.report.results import read_results_csv
from gf2env.task.oracle import TaskConfig
from gf2env.text.answers import score_answer
from tests.extras import require_extra
from tests.paths import REPO

CONFIG = TaskConfig(p=8, d=3, K=8, n=4)
DEPTHS = (0, 2)
SEED = 5
PROMPT = "plain-v1"  # answers carry offset n, and a system message: both shapes of a prompt row
TEST_SEED = 77  # given as test=3@77; train's is derived
SIZES = {"train": 6, "test": 3}  # records a depth
FOLDER_ARGS = ["--p", "8", "--d", "3", "--K", "8", "--depths", "0,2", "--n", "4", "--seed", str(SEED)]


def gf2(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``gf2`` as its users run it: a fresh process, this checkout's code first on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "gf2env", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


def front_matter(folder: Path) -> dict:
    text = (folder / "README.md").read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n", 2)[1])


def expected_rows(name: str) -> list[dict]:
    """What split ``name`` must hold: ``prompt_row`` of ``generate_record`` at its seed, depth by depth."""
    seed = split_seed(SEED, name) if name == "train" else TEST_SEED
    return [
        {"seed": seed, "trial": t, **prompt_row(generate_record(CONFIG, g, t, seed), PROMPT)}
        for g in DEPTHS
        for t in range(SIZES[name])
    ]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hf") / "gf2-p8"
    run = gf2("generate", "--format", "hf", *FOLDER_ARGS, "--splits", f"train=6,test=3@{TEST_SEED}",
              "--prompt", PROMPT, "--out", str(out), "--quiet")  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "wrote 18 rows (train: 12, test: 6)" in run.stderr
    return out


@pytest.fixture(scope="module")
def loaded(folder, tmp_path_factory):
    datasets = require_extra("datasets", "datasets")
    return datasets.load_dataset(str(folder), cache_dir=str(tmp_path_factory.mktemp("hf-cache")))


def test_load_dataset_gives_the_splits_with_the_cards_features(folder, loaded):
    datasets = require_extra("datasets", "datasets")
    assert {name: split.num_rows for name, split in loaded.items()} == {"train": 12, "test": 6}
    card_features = datasets.Features._from_yaml_list(front_matter(folder)["dataset_info"]["features"])
    for split in loaded.values():
        assert split.features == card_features
        assert list(split.features) == [name for name, _, _ in COLUMNS]
    prompt = loaded["train"].features["prompt"]
    assert prompt == datasets.List({"role": datasets.Value("string"), "content": datasets.Value("string")})


def test_rows_are_prompt_rows_of_the_generated_records(loaded):
    for name in ("train", "test"):
        rows, expected = loaded[name].to_list(), expected_rows(name)
        assert len(rows) == len(expected)
        for row, want in zip(rows, expected, strict=True):
            for key in ("prompt", "target", "p", "answer_offset", "g", "seed", "trial"):
                assert row[key] == want[key], (name, key, row["g"], row["trial"])
            assert (row["d"], row["K"], row["n"], row["sampling"], row["prompt_id"]) == (
                3,
                8,
                4,
                "adversarial",
                PROMPT,
            )
            # Round trip: the row's record is the generated record, field for field.
            assert json.loads(row["record"]) == json.loads(want["record"])
    assert loaded["train"][0]["seed"] != loaded["test"][0]["seed"] == TEST_SEED


def test_target_and_answer_offset_grade_a_boxed_answer_with_the_scorer(loaded):
    offsets = set()
    for row in loaded["test"]:
        off = row["answer_offset"]
        offsets.add(off)
        right = "\\boxed{[" + ", ".join(str(i + off) for i in row["target"]) + "]}"
        assert score_answer("so " + right, row["target"], row["p"], off).correct
        unshifted = "\\boxed{[" + ", ".join(str(i) for i in row["target"]) + "]}"
        assert not score_answer(unshifted, row["target"], row["p"], off).correct  # the offset matters
    assert offsets == {CONFIG.n}


def test_the_card_names_splits_sizes_seeds_licence_and_the_command(folder):
    front = front_matter(folder)
    assert front["license"] == "mit" and front["task_categories"] == ["text-generation"]
    assert front["size_categories"] == ["n<1K"] and "gf2env" in front["tags"]
    assert front["configs"] == [
        {
            "config_name": "default",
            "data_files": [{"split": "train", "path": "data/train.parquet"},
                           {"split": "test", "path": "data/test.parquet"}],
        }
    ]  # fmt: skip
    splits = {s["name"]: s["num_examples"] for s in front["dataset_info"]["splits"]}
    assert splits == {"train": 12, "test": 6}
    prose = (folder / "README.md").read_text().split("---\n", 2)[2]
    assert f"| `train` | 12 | 6 | {split_seed(SEED, 'train')} |" in prose
    assert f"| `test` | 6 | 3 | {TEST_SEED} |" in prose
    assert "## Licence\n\nMIT" in prose
    assert f"--splits train=6,test=3@{TEST_SEED} --prompt {PROMPT} --seed {SEED} --out {folder}" in prose


def test_the_cards_commands_rebuild_the_folder_and_each_split_as_a_records_file(folder, tmp_path):
    pq = require_extra("pyarrow.parquet", "parquet")
    commands = re.findall(r"^gf2 generate .*$", (folder / "README.md").read_text(), flags=re.MULTILINE)
    assert len(commands) == 3  # the folder's, then train's and test's records files
    again = tmp_path / "again"
    run = gf2(*shlex.split(commands[0].replace(f"--out {folder}", f"--out {again}"))[1:], "--quiet")
    assert run.returncode == 0, run.stderr
    for name in ("train", "test"):
        assert pq.read_table(again / f"data/{name}.parquet").equals(
            pq.read_table(folder / f"data/{name}.parquet")
        )
    run = gf2(*shlex.split(commands[2])[1:], "--quiet", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    from_file = [r.to_json() for r in read_records(tmp_path / "test.json")]
    assert from_file == [json.loads(row["record"]) for row in expected_rows("test")]


def test_the_cards_python_example_runs(folder, tmp_path):
    require_extra("datasets", "datasets")
    code = re.search(r"```python\n(.*?)```", (folder / "README.md").read_text(), flags=re.DOTALL)
    assert code is not None and "load_dataset(" in code.group(1) and "score_answer(" in code.group(1)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_DATASETS_CACHE": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-c", code.group(1)], capture_output=True, text=True, env=env,
                         timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr


def test_size_categories_are_the_hubs_buckets():
    assert [size_category(n) for n in (0, 999, 1000, 99_999, 100_000, 10**8)] == [
        "n<1K", "n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "100M<n<1B"
    ]  # fmt: skip
    with pytest.raises(GF2ConfigError, match="under 1B"):
        size_category(10**9)


def test_gf2_commands_read_a_split_as_records(folder, tmp_path):
    split = folder / "data" / "test.parquet"
    records = read_records(split)
    assert [r.to_json() for r in records] == [json.loads(row["record"]) for row in expected_rows("test")]
    with pytest.raises(GF2ConfigError, match=r"holds the splits \['test', 'train'\]; pass one split's file"):
        read_records(folder)
    # gf2 compare on the split equals gf2 compare on the same records as the paper's JSON.
    (tmp_path / "test.json").write_text(json.dumps([r.to_json() for r in records]))
    gammas = []
    for source in (split, tmp_path / "test.json"):
        out = tmp_path / source.stem / source.suffix[1:]
        run = gf2("compare", "--records", str(source), "--agents", "A,B", "--out", str(out), "--quiet")
        assert run.returncode == 0, run.stderr
        rows = read_results_csv(out / "results.csv")
        gammas.append([(r["agent"], r["g"], r["gamma"]) for r in rows])
    assert len(gammas[0]) == 2 * 6 and gammas[0] == gammas[1]


def spec(splits: tuple[Split, ...], seed: int = 0, prompt_id: str = "paper") -> DatasetSpec:
    return DatasetSpec(
        task=TaskSettings(p=8, d=3, K=8), depths=(1, 3), n=None, splits=splits, prompt_id=prompt_id, seed=seed
    )


def test_splits_are_disjoint_and_each_grows_without_changing_the_others(tmp_path):
    pq = require_extra("pyarrow.parquet", "parquet")

    def split_of(seed: int, name: str, trials: int) -> Split:
        return Split(name, trials, split_seed(seed, name))

    small = tmp_path / "small"
    big = tmp_path / "big"
    write_dataset_folder(small, spec((split_of(0, "train", 4), split_of(0, "test", 2))))
    write_dataset_folder(big, spec((split_of(0, "train", 6), split_of(0, "test", 2))))
    small_train, big_train = (pq.read_table(f / "data/train.parquet").to_pylist() for f in (small, big))
    assert [r for r in big_train if r["trial"] < 4] == small_train  # n = g+1 at depths 1 and 3
    assert [(r["g"], r["n"]) for r in small_train] == [(1, 2)] * 4 + [(3, 4)] * 4
    assert pq.read_table(small / "data/test.parquet").equals(pq.read_table(big / "data/test.parquet"))
    # Derived seeds differ across names and generation seeds (test at 0 is never train at 1).
    seeds = {split_seed(s, name) for s in range(50) for name in ("train", "test", "validation")}
    assert len(seeds) == 150
    # A folder of one split is read whole by every gf2 command; the paper's prompt is the default.
    one = tmp_path / "one"
    write_dataset_folder(one, spec((split_of(3, "train", 2),), seed=3))
    config = TaskConfig(p=8, d=3, K=8, n=2)
    records = read_records(one)
    first = generate_record(config, 1, 0, split_seed(3, "train"))
    assert records[0].to_json() == first.to_json() and len(records) == 4
    row = pq.read_table(one / "data/train.parquet").to_pylist()[0]
    assert row["prompt"] == prompt_row(first, "paper")["prompt"] and row["prompt_id"] == "paper"


def generate(*args: str) -> int:
    """``gf2 generate`` in-process (for the errors: their messages, not a subprocess's exit code)."""
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    parsed = parser.parse_args(["generate", "--quiet", *args])
    return int(parsed.func(parsed))


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--format", "hf", "--out", "{tmp}/x.parquet"], r"ends in \.parquet.*--format parquet"),
        (
            ["--format", "json", "--splits", "train=3", "--out", "{tmp}/x.json"],
            "--splits shape a dataset folder",
        ),
        (["--prompt", "paper", "--out", "{tmp}/x.parquet"], "--prompt shape a dataset folder"),
        (["--format", "hf", "--trials", "3", "--splits", "train=3", "--out", "{tmp}/f"], "drop --trials"),
        (["--splits", "train=3,train=4", "--out", "{tmp}/f"], "repeat a name"),
        (["--splits", "train=3@1,test=2@1", "--out", "{tmp}/f"], "repeat a seed"),
        (["--splits", "train=3x", "--out", "{tmp}/f"], "'train=3x' is not name=N"),
        (["--splits", "3train=3", "--out", "{tmp}/f"], "not a name of letters"),
        (["--splits", "train=0", "--out", "{tmp}/f"], "pass at least 1"),
        (["--format", "hf", "--prompt", "nope", "--out", "{tmp}/f"], "--prompt='nope' is unknown"),
        (["--format", "hf", "--out", "{tmp}/full"], "not an empty folder"),
        (["--format", "hf", "--depths", "4", "--n", "4", "--out", "{tmp}/f"], "more than n=4"),
    ],
)
def test_bad_folder_options_are_typed_errors_naming_the_fix(tmp_path, args, match):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("not ours")
    with pytest.raises(GF2ConfigError, match=match):
        generate("--p", "8", "--d", "3", "--K", "8", *(a.format(tmp=tmp_path) for a in args))
    assert not (tmp_path / "f").exists() and (tmp_path / "full" / "keep.txt").read_text() == "not ours"


def test_parquet_to_a_parquet_name_is_still_one_records_file_and_to_a_folder_name_the_folder(tmp_path):
    require_extra("pyarrow", "parquet")
    args = ["--p", "8", "--d", "3", "--K", "8", "--depths", "0,2", "--n", "4", "--trials", "3", "--seed", "1"]
    assert generate(*args, "--format", "parquet", "--out", str(tmp_path / "r.parquet")) == 0
    assert generate(*args, "--out", str(tmp_path / "r.pq")) == 0  # the suffix alone picks Parquet
    assert generate(*args, "--out", str(tmp_path / "r.json")) == 0
    want = [r.to_json() for r in read_records(tmp_path / "r.json")]
    assert [r.to_json() for r in read_records(tmp_path / "r.parquet")] == want
    assert [r.to_json() for r in read_records(tmp_path / "r.pq")] == want
    assert generate(*args, "--format", "parquet", "--out", str(tmp_path / "folder")) == 0
    assert sorted(p.name for p in (tmp_path / "folder").rglob("*")) == ["README.md", "data", "train.parquet"]
    assert front_matter(tmp_path / "folder")["dataset_info"]["splits"][0]["num_examples"] == 6


def test_gf2env_and_gf2_generate_import_without_datasets():
    code = (
        "import sys, gf2env, gf2env.records.hf_dataset, gf2env.records.generate; "
        "assert 'datasets' not in sys.modules"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    assert run.returncode == 0, run.stderr
