"""``run.json``: gf2 generate, compare and eval write one beside their results, keep earlier runs,
record a failure; ``gf2 --version``; the record's JSON of odd config values; the git commit's source."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest

from gf2env.errors import GF2ConfigError
from gf2env.run_record import PACKAGES, RECORD_FILE, plain, run_record
from gf2env.version import __version__
from tests.paths import REPO

KEYS = {"id", "command", "status", "started", "ended", "seconds", "error", "argv", "cwd", "config", "seeds",
        "version", "git", "python", "packages", "host", "previous"}  # fmt: skip
SETTING = ("--depths", "0,1", "--p", "6", "--d", "3", "--K", "8", "--quiet")
TINY = ("--trials", "2", *SETTING)


def gf2(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gf2env", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def read_record(folder: Path) -> dict:
    return json.loads((folder / RECORD_FILE).read_text())


def check_finished(record: dict, command: str, status: str = "ok") -> None:
    assert set(record) == KEYS
    assert (record["command"], record["status"], record["version"]) == (command, status, __version__)
    started, ended = datetime.fromisoformat(record["started"]), datetime.fromisoformat(record["ended"])
    assert started.utcoffset() is not None and started.utcoffset().total_seconds() == 0  # UTC
    assert ended >= started and record["seconds"] >= 0
    assert record["argv"][1] == command and record["python"]["version"] == ".".join(
        map(str, sys.version_info[:3])
    )
    assert set(record["packages"]) <= set(PACKAGES) and "numpy" in record["packages"]
    assert record["host"]["cpus"] == os.cpu_count() and isinstance(record["host"]["gpus"], list)


def test_gf2_version_prints_the_package_version():
    done = gf2("--version")
    assert done.returncode == 0 and done.stdout == f"gf2 {__version__}\n", done.stderr


def test_gf2_generate_records_its_run_beside_the_file_and_keeps_the_one_before(tmp_path):
    first = gf2("generate", *TINY, "--seed", "5", "--out", str(tmp_path / "a.json"))
    assert first.returncode == 0, first.stderr
    record = read_record(tmp_path)
    check_finished(record, "generate")
    assert record["config"]["dataset"]["depths"] == [0, 1] and record["config"]["dataset"]["trials"] == 2
    assert record["config"]["dataset"]["task"]["p"] == 6 and record["config"]["out"] == str(
        tmp_path / "a.json"
    )
    assert record["seeds"] == {"seed": 5} and record["error"] is None and record["previous"] == []
    second = gf2("generate", *TINY, "--format", "jsonl", "--out", str(tmp_path / "b.jsonl"))
    assert second.returncode == 0, second.stderr
    latest = read_record(tmp_path)
    assert latest["config"]["format"] == "jsonl" and latest["id"] != record["id"]
    assert latest["previous"] == [{k: v for k, v in record.items() if k != "previous"}]


def test_gf2_generate_keeps_a_dataset_folder_as_datasets_reads_it(tmp_path):
    pytest.importorskip("pyarrow")
    splits = ("--splits", "train=2,test=1")
    done = gf2("generate", *SETTING, "--format", "hf", *splits, "--out", str(tmp_path / "ds"))
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "ds" / RECORD_FILE).exists()  # the folder holds the dataset only
    record = read_record(tmp_path)
    check_finished(record, "generate")
    assert [s["name"] for s in record["config"]["dataset"]["splits"]] == ["train", "test"]
    assert set(record["seeds"]) == {"seed", "split train", "split test"}


def test_gf2_generate_to_a_device_writes_no_record_there(tmp_path):
    done = gf2("generate", *TINY, "--out", "/dev/null", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not Path("/dev", RECORD_FILE).exists() and list(tmp_path.iterdir()) == []


def test_gf2_compare_records_the_resolved_config(tmp_path):
    out = tmp_path / "cmp"
    flags = ("--seed", "3", "--no-plots", "--no-fit", "--out", str(out))
    done = gf2("compare", "--agents", "A,C", *TINY, *flags)
    assert done.returncode == 0, done.stderr
    record = read_record(out)
    check_finished(record, "compare")
    grid = record["config"]["grid"]
    assert (grid["depths"], grid["trials"], grid["p"], grid["K"], grid["seed"]) == ([0, 1], 2, [6], [8], 3)
    assert record["config"]["agents"] == ["A", "C"] and record["config"]["out"] == str(out)
    assert record["seeds"] == {"evaluate": 3} and (out / "results.csv").exists()


def test_gf2_eval_records_its_run_and_a_rerun_keeps_the_first(tmp_path):
    args = ("eval", "--agent", "A", *TINY, "--no-plots", "--no-fit", "--out", str(tmp_path))
    assert gf2(*args).returncode == 0
    done = gf2(*args)
    assert done.returncode == 0, done.stderr
    record = read_record(tmp_path)
    check_finished(record, "eval")
    assert record["config"]["agents"] == ["A"] and len(record["previous"]) == 1
    assert record["previous"][0]["status"] == "ok" and record["previous"][0]["id"] != record["id"]


def test_a_failed_run_is_recorded_and_a_refused_one_into_a_new_folder_leaves_nothing(tmp_path):
    records = tmp_path / "broken.json"
    records.write_text('[{"p": 6}]')
    out = tmp_path / "out"
    assert gf2("compare", "--agents", "A", *TINY, "--no-plots", "--no-fit", "--out", str(out)).returncode == 0
    done = gf2("compare", "--agents", "A", "--records", str(records), "--quiet", "--out", str(out))
    assert done.returncode == 2 and done.stderr.startswith("gf2: error:"), done.stderr
    record = read_record(out)
    check_finished(record, "compare", status="failed")
    assert record["error"]["type"] == "RecordFormatError" and record["error"]["message"] in done.stderr
    assert record["config"]["records"] == str(records) and record["config"]["grid"] is None
    assert [r["status"] for r in record["previous"]] == ["ok"]
    fresh = gf2(
        "compare", "--agents", "A", "--records", str(records), "--quiet", "--out", str(tmp_path / "new")
    )
    assert fresh.returncode == 2 and not (tmp_path / "new").exists()  # refused: nothing written


@dataclass(frozen=True)
class Inner:
    path: Path = Path("a/b")
    pair: tuple[int, ...] = (1, 2)


@dataclass
class Odd:
    inner: Inner = field(default_factory=Inner)
    table: dict = field(default_factory=lambda: {1: {"x"}, "nan": float("nan")})
    api_key: str = "sk-123"
    max_tokens: int = 16
    thing: object = field(default_factory=lambda: Unprintable())


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_a_record_holds_any_config_as_json():
    assert plain(Odd()) == {
        "inner": {"path": "a/b", "pair": [1, 2]},
        "table": {"1": ["x"], "nan": "nan"},
        "api_key": "<redacted>",
        "max_tokens": 16,
        "thing": "<Unprintable>",
    }
    assert plain(Odd) == repr(Odd)  # a class is no config: its repr


def test_the_body_s_error_propagates_and_is_recorded(tmp_path):
    with pytest.raises(KeyError, match="missing"), run_record(tmp_path, "demo", Odd(), {"seed": 1}) as record:
        assert read_record(tmp_path)["status"] == "running"
        record["extra"] = Path("x")
        raise KeyError("missing")
    record = read_record(tmp_path)
    assert record["status"] == "failed" and record["error"] == {"type": "KeyError", "message": "'missing'"}
    assert record["extra"] == "x" and record["config"]["api_key"] == "<redacted>"
    assert [p for p in tmp_path.iterdir() if p.name != RECORD_FILE] == []  # no temporary file left


def test_a_killed_run_and_an_unreadable_record_are_kept(tmp_path):
    (tmp_path / RECORD_FILE).write_text('{"status": "running", "command": "train"}')  # a run that was killed
    with run_record(tmp_path, "demo", None):
        pass
    assert read_record(tmp_path)["previous"] == [{"status": "running", "command": "train"}]
    (tmp_path / RECORD_FILE).write_text("not json {")
    with run_record(tmp_path, "demo", None):
        pass
    (aside,) = tmp_path.glob(f"{RECORD_FILE}.unreadable-*")
    assert aside.read_text() == "not json {" and read_record(tmp_path)["previous"] == []
    with pytest.raises(GF2ConfigError, match="is not a folder"), run_record(aside, "demo", None):
        pass


def test_a_refusal_before_anything_is_written_leaves_no_record_and_no_folder_it_made(tmp_path):
    with pytest.raises(GF2ConfigError, match="bad"), run_record(tmp_path / "a" / "b", "demo", None):
        raise GF2ConfigError("bad value")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(GF2ConfigError), run_record(tmp_path, "demo", None):
        raise GF2ConfigError("bad value")
    assert tmp_path.is_dir() and list(tmp_path.iterdir()) == []  # a folder that was there stays
    with pytest.raises(GF2ConfigError), run_record(tmp_path, "demo", None):
        (tmp_path / "partial.csv").write_text("x\n")
        raise GF2ConfigError("bad value")
    assert read_record(tmp_path)["status"] == "failed"  # something was written: the record says how


def test_the_commit_is_gf2env_s_own_checkout_never_the_project_around_it(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    with run_record(tmp_path, "demo", None) as record:
        pass
    if (REPO / ".git").exists():
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
        assert record["git"]["commit"] == head.stdout.strip() and isinstance(record["git"]["dirty"], bool)
    # gf2env copied as an installed package into a user's git project: no commit (not the project's).
    project = tmp_path / "project"
    copy = project / "site" / "gf2env"
    shutil.copytree(REPO / "gf2env", copy, ignore=shutil.ignore_patterns("__pycache__"))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=project, check=True)
    subprocess.run([*git, "add", "."], cwd=project, check=True)
    subprocess.run([*git, "commit", "-qm", "user"], cwd=project, check=True)
    code = "import json, gf2env.run_record as r; print(json.dumps([r.__file__, r.git_state()]))"
    env = {**os.environ, "PYTHONPATH": str(project / "site")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=project)
    assert done.returncode == 0, done.stderr
    where, state = json.loads(done.stdout)
    assert Path(where).is_relative_to(project / "site") and state is None
