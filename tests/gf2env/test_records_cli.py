"""The paper's JSON records (incl. the real reference file) and the gf2 CLI as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from gf2env import RecordFormatError, read_records
from gf2env.records.record import Record, generate_record
from gf2env.task.oracle import TaskConfig
from tests.paths import REFERENCE as REFERENCE_DIR

REFERENCE = REFERENCE_DIR / "experiments_llm_large_adversarial.json"


@pytest.fixture(scope="module")
def reference_records():
    if not REFERENCE.exists():
        pytest.skip(f"the paper's reference file is not at {REFERENCE}")
    return read_records(REFERENCE)


def test_reference_labels_are_reproduced_from_prefix_and_target(reference_records):
    assert len(reference_records) == 20
    for r in reference_records:
        assert r.n == r.g + 1 and r.p == 12 and r.d == 4 and r.K == 32
        np.testing.assert_array_equal(r.recomputed_labels(), r.labels)
        assert (r.address[:, r.g] == 1).all()
        assert (r.payload.sum(axis=1) == 10).all()


def test_reference_round_trips_exactly(reference_records):
    original = json.loads(REFERENCE.read_text())
    assert [r.to_json() for r in reference_records] == original


def test_generated_records_round_trip_and_are_consistent():
    config = TaskConfig(p=12, d=4, n=40, K=32)
    for g in (0, 1, 39):
        rec = generate_record(config, g, trial=3, seed=7)
        back = Record.from_json(json.loads(json.dumps(rec.to_json())))
        assert back.prefix == rec.prefix and back.target == rec.target
        np.testing.assert_array_equal(back.address, rec.address)
        np.testing.assert_array_equal(back.payload, rec.payload)
        np.testing.assert_array_equal(back.recomputed_labels(), rec.labels)


def test_hex_strings_in_any_case_with_or_without_0x_and_leading_zeros_read_alike():
    rec = generate_record(TaskConfig(n=8, p=12), 2, 0, 0)
    obj = rec.to_json()
    for s in obj["samples"]:
        s["x"] = s["x"][2:].upper().rjust(9, "0") if s["y"] else "0X" + s["x"][2:]
    back = Record.from_json(obj)
    np.testing.assert_array_equal(back.address, rec.address)
    np.testing.assert_array_equal(back.payload, rec.payload)
    assert back.to_json() == rec.to_json()
    odd = generate_record(TaskConfig(n=9, p=12), 2, 0, 0).to_json()  # 21 bits: 6 digits, 3 pad bits
    odd["samples"][4]["x"] = hex(1 << 22)
    with pytest.raises(RecordFormatError, match="x=0x400000 has more than n\\+p=21 bits"):
        Record.from_json(odd)


MALFORMED = [  # an edit of a valid record, and what the error says (also read from files elsewhere)
    (lambda o: o.pop("target"), "lacks"),
    (lambda o: o.update(g=5), "prefix has"),
    (lambda o: o.update(target=[1, 1, 2]), "invalid term"),
    (lambda o: o["samples"][0].update(x=hex(1 << 80)), "more than"),
    (lambda o: o["samples"][0].update(y=2), "not 0 or 1"),
    (lambda o: o["samples"][0].update(y="1"), "not 0 or 1"),
    (lambda o: o["samples"][1].update(x="0x12g4"), "'0x12g4' is not a hex string"),
    (lambda o: o["samples"][1].update(x="0x1é"), "is not a hex string"),
    (lambda o: o["samples"][2].update(x=255), "x=255 is not a hex string"),
    (lambda o: o["samples"][3].pop("x"), "needs 'x'"),
    (lambda o: o["samples"][3].update(x=hex((1 << 20) | 1)), "more than n\\+p=20 bits"),
    (lambda o: o["prefix"][1].__setitem__(0, True), "entry True is not an integer"),
    (lambda o: o["prefix"][1].__setitem__(0, 99), "invalid term"),
    (lambda o: o["prefix"][0].append(5), "invalid term"),
]


@pytest.mark.parametrize("edit, match", MALFORMED)
def test_malformed_records_are_rejected(edit, match):
    obj = generate_record(TaskConfig(n=8), 2, 0, 0).to_json()
    edit(obj)
    with pytest.raises(RecordFormatError, match=match):
        Record.from_json(obj)


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "gf2env", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_generate_preset_and_custom_grid(tmp_path):
    out = tmp_path / "large.json"
    proc = run_cli("generate", "--preset", "paper-large", "--trials", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    records = read_records(out)
    assert [(r.g, r.n) for r in records] == [(63, 64), (63, 64), (127, 128), (127, 128)]
    assert all((r.recomputed_labels() == r.labels).all() for r in records)

    out2 = tmp_path / "grid.jsonl"
    args = ["generate", "--depths", "0,2", "--trials", "3", "--n", "5", "--p", "8", "--d", "3"]
    proc = run_cli(*args, "--sampling", "diagnostic", "--format", "jsonl", "--out", str(out2))
    assert proc.returncode == 0, proc.stderr
    records = read_records(out2)
    assert [(r.g, r.n, r.p, r.d) for r in records] == [(0, 5, 8, 3)] * 3 + [(2, 5, 8, 3)] * 3
    # Per-index determinism: the same command writes the same file.
    out3 = tmp_path / "again.jsonl"
    run_cli(*args, "--sampling", "diagnostic", "--format", "jsonl", "--out", str(out3))
    assert out2.read_text() == out3.read_text()


def test_cli_reports_bad_configs_without_a_traceback(tmp_path):
    out = str(tmp_path / "x.json")
    proc = run_cli("generate", "--depths", "40", "--n", "32", "--out", out)
    assert proc.returncode == 2 and "40" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("generate", "--depths", "0", "--w", "1", "--out", out)
    assert proc.returncode == 2 and "w=1" in proc.stderr


def test_cli_reports_a_malformed_records_file_without_a_traceback(tmp_path):
    obj = generate_record(TaskConfig(n=8), 2, 0, 0).to_json()
    obj["samples"][0]["y"] = 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([obj]))
    proc = run_cli("compare", "--records", str(bad), "--agents", "A", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "not 0 or 1" in proc.stderr and "Record 0" in proc.stderr


def test_cli_demo_prints_reward_per_depth():
    proc = run_cli("demo", "--episodes", "3", "--n", "8", "--quiet")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "trivial baseline" in lines[1] and "0.0045" in lines[1]
    rows = [line.split() for line in lines[3:11]]
    assert [int(r[0]) for r in rows] == list(range(8))
    assert all(float(r[1]) >= 0.0 for r in rows)
