"""Records as columns: the compiled JSON scanner agrees with the general reader on every file,
falls back to it (and its errors) on everything else, Parquet round-trips, and batched generation
is bit for bit the per-record one."""

from __future__ import annotations

import json
import re
from itertools import combinations

import numpy as np
import pytest

from gf2env import RecordFormatError, read_record_columns, read_records, write_parquet
from gf2env.agents.harness.grid import column_cells, record_cells, sampling_of
from gf2env.records.columns import columns_from_records, generate_columns, records_in_file_order
from gf2env.records.files import _read_json_records
from gf2env.records.record import Record, generate_record, write_records
from gf2env.records.scan import scan_records
from gf2env.task.combinatorics import rank_support, rank_supports
from gf2env.task.oracle import TaskConfig
from tests.gf2env.test_records_cli import MALFORMED
from tests.paths import REFERENCE

PAPER_FILE = REFERENCE / "experiments_llm_large_adversarial.json"


def same(a: Record, b: Record) -> bool:
    return (
        (a.n, a.p, a.d, a.prefix, a.target, a.exp) == (b.n, b.p, b.d, b.prefix, b.target, b.exp)
        and np.array_equal(a.address, b.address)
        and np.array_equal(a.payload, b.payload)
        and np.array_equal(a.labels, b.labels)
    )


def mixed_records() -> list[Record]:
    """Records of several shapes, interleaved, with their own exp strings."""
    out = []
    for t in range(6):
        for config, g in [(TaskConfig(n=8), 2), (TaskConfig(p=7, d=3, K=5, n=9, sampling="uniform"), 0)]:
            rec = generate_record(config, g, t, seed=5)
            out.append(Record(**{**rec.__dict__, "exp": f"exp-{t}-{config.sampling}"}))
    out.append(generate_record(TaskConfig(p=64, n=70, K=3), 69, 0, seed=1))
    return out


@pytest.mark.parametrize("layout", ["json", "jsonl", "jsonl-spaced"])
def test_scanner_reads_what_the_general_reader_reads(tmp_path, layout):
    records = mixed_records()
    path = tmp_path / "r.json"
    objs = [r.to_json() for r in records]
    if layout == "json":
        write_records(path, records)
    elif layout == "jsonl":
        path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    else:  # JSON's own whitespace anywhere, keys in another order
        path.write_text("\n\n".join(json.dumps(dict(reversed(list(o.items()))), indent=2) for o in objs))
    assert scan_records(path.read_bytes())[1] == -1  # the compiled path, not the fallback
    got = read_records(path)
    assert len(got) == len(records) and all(same(a, b) for a, b in zip(got, records, strict=True))
    groups = read_record_columns(path)
    assert [(c.n, c.p, c.g, c.R) for c in groups] == [(8, 12, 2, 6), (9, 7, 0, 6), (70, 64, 69, 1)]


def test_the_papers_file_reads_alike_on_both_paths():
    if not PAPER_FILE.exists():
        pytest.skip(f"the paper's reference file is not at {PAPER_FILE}")
    data = PAPER_FILE.read_bytes()
    assert scan_records(data)[1] == -1
    fast, general = read_records(PAPER_FILE), _read_json_records(data)
    assert all(same(a, b) for a, b in zip(fast, general, strict=True))
    assert [r.to_json() for r in fast] == json.loads(data)


@pytest.mark.parametrize(
    "edit",
    [
        lambda o: o.update(exp="a\\u00e9b"),  # an escape: JSON's, read by the general path
        lambda o: o.update(note="extra keys are ignored"),
        lambda o: o["samples"][1].update(x=""),
    ],
)
def test_what_the_scanner_does_not_cover_is_read_by_the_general_path(tmp_path, edit):
    records = mixed_records()[:3]
    objs = [r.to_json() for r in records]
    edit(objs[1])
    path = tmp_path / "r.json"
    path.write_text(json.dumps(objs))
    expected = _read_json_records(path.read_bytes())
    got = read_records(path)
    assert all(same(a, b) for a, b in zip(got, expected, strict=True))


@pytest.mark.parametrize(
    "edit, match",
    [
        *MALFORMED,
        (lambda o: o.update(n=2), "need g < n"),
        (lambda o: o["samples"].pop(), None),  # a sample short: a shape of its own, still valid
    ],
)
def test_bad_records_in_a_file_are_named(tmp_path, edit, match):
    objs = [generate_record(TaskConfig(n=8), 2, t, 0).to_json() for t in range(4)]
    edit(objs[2])
    path = tmp_path / "r.json"
    path.write_text(json.dumps(objs))
    if match is None:
        assert [r.K for r in read_records(path)] == [32, 32, 31, 32]
        return
    with pytest.raises(RecordFormatError, match=f"Record 2: .*{match}"):
        read_records(path)


def test_broken_json_is_an_error_not_a_guess(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps([generate_record(TaskConfig(n=8), 2, 0, 0).to_json()])[:-30])
    with pytest.raises(ValueError):
        read_records(path)


def test_parquet_round_trips_and_any_parquet_reader_opens_it(tmp_path):
    pytest.importorskip("pyarrow")
    records = mixed_records()
    path = tmp_path / "r.parquet"
    assert write_parquet(path, read_record_columns_of(records, tmp_path)) == len(records)
    back = read_records(path)
    assert all(same(a, b) for a, b in zip(back, records, strict=True))
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    assert table.column_names == ["exp", "n", "p", "d_max", "g", "prefix", "target", "bits", "labels"]
    row = table.slice(1, 1).to_pylist()[0]
    assert row["exp"] == records[1].exp and row["target"] == list(records[1].target)
    bits = np.unpackbits(np.frombuffer(row["bits"], dtype=np.uint8).reshape(records[1].K, -1), axis=1)
    np.testing.assert_array_equal(bits[:, : records[1].n], records[1].address)


def read_record_columns_of(records: list[Record], tmp_path) -> list:
    path = tmp_path / "src.json"
    write_records(path, records)
    return read_record_columns(path)


@pytest.mark.parametrize(
    "config, g, n",
    [
        (TaskConfig(), 31, None),
        (TaskConfig(p=8, d=3, K=9, sampling="diagnostic"), 3, 5),
        (TaskConfig(sampling="uniform", n=40), 39, None),
        (TaskConfig(p=64, n=16, K=4), 0, None),
    ],
)
def test_batched_generation_is_the_per_record_generation(config, g, n):
    columns = generate_columns(config, g, 9, seed=3, n=n)
    for t in range(9):
        assert same(columns.record(t), generate_record(config, g, t, 3, n=n))


def test_ranks_on_arrays_are_the_ranks():
    supports = np.array(list(combinations(range(7), 3)))
    np.testing.assert_array_equal(rank_supports(supports, 7), [rank_support(s, 7) for s in supports])


def test_column_cells_are_record_cells(tmp_path):
    records = mixed_records()
    path = tmp_path / "r.json"
    write_records(path, records)
    by_columns = list(column_cells(read_record_columns(path), "r.json"))
    read = read_records(path)
    by_records = list(record_cells(read, "r.json"))
    assert len(by_columns) == len(by_records)
    assert sorted(id(r) for c in by_records for r in c.records) == sorted(map(id, read))  # the caller's
    assert all(sampling_of(r) == c.sampling for c in by_records for r in c.records)
    assert len({c.sampling for c in by_records}) > 1
    for a, b in zip(by_columns, by_records, strict=True):
        assert (a.sampling, a.n) == (b.sampling, b.n)
        np.testing.assert_array_equal(a.trials, b.trials)
        for name in ("prefix", "address", "payload", "labels", "target"):
            np.testing.assert_array_equal(getattr(a.batch, name), getattr(b.batch, name), err_msg=name)
        assert all(same(x, y) for x, y in zip(a.records, b.records, strict=True))
    assert len(records_in_file_order(read_record_columns(path))) == len(records)


def _trial_file(tmp_path, change) -> tuple:
    """A file of 8 good records (two shapes) with ``change(objs)`` applied to their JSON."""
    config = TaskConfig(p=6, d=3, n=5, K=12)
    objs = [generate_record(config, g, t, seed=4).to_json() for g in (0, 3) for t in range(4)]
    change(objs)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(objs))
    return path, objs


def _flip_label(objs):
    objs[5]["samples"][2]["y"] ^= 1


def _no_samples(objs):
    objs[6]["samples"] = []


def _repeat(objs):
    objs.append(json.loads(json.dumps(objs[1])))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_flip_label, r"Record 5: the label of sample 2 is not what its prefix and target give"),
        (_no_samples, r"Record 6 has no samples \(K=0\)"),
        (_repeat, r"Records 1 and 8 are the same record \(1 repeat"),
    ],
)
def test_cells_refuse_records_that_would_count_wrongly(tmp_path, change, message):
    good, _ = _trial_file(tmp_path, lambda objs: None)
    assert sum(len(c.trials) for c in column_cells(read_record_columns(good), "f")) == 8
    path, _ = _trial_file(tmp_path, change)
    with pytest.raises(RecordFormatError, match=message):
        column_cells(read_record_columns(path), "f")  # refused before the first cell is asked for
    with pytest.raises(RecordFormatError, match=message):
        record_cells(read_records(path), "f")
    # Through the CLI: a typed message naming the record, no traceback, nothing written.
    from tests.agents.test_compare import gf2

    run = gf2("compare", "--records", str(path), "--agents", "A", "--out", str(tmp_path / "o"), "--quiet")
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr
    assert re.search(message, run.stderr), run.stderr
    assert not (tmp_path / "o").exists()


def test_recomputed_labels_of_columns_are_the_records_own():
    records = mixed_records()
    for c in columns_from_records(records):
        np.testing.assert_array_equal(c.recomputed_labels(), c.labels)
        for row in range(c.R):
            np.testing.assert_array_equal(c.recomputed_labels()[row], c.record(row).recomputed_labels())
