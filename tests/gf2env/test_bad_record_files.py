"""Bad records files: every kind ends in a typed error naming the file, the record (and for JSON Lines
its line) and the field; never a KeyError, TypeError, AssertionError or JSONDecodeError."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gf2env import RecordFormatError, read_records
from gf2env.errors import GF2ConfigError
from gf2env.records.record import generate_record
from gf2env.task.oracle import TaskConfig


def good(count: int = 4) -> list[dict[str, Any]]:
    return [generate_record(TaskConfig(n=8), 2, t, 0).to_json() for t in range(count)]


def edited(edit: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    """A writer of four records as a JSON array, record 2 edited."""

    def write(path: Path) -> None:
        objs = good()
        edit(objs[2])
        path.write_text(json.dumps(objs))

    return write


def text(content: str | bytes) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)

    return write


def jsonl_with(bad_line: str, at: int = 2) -> Callable[[Path], None]:
    """Four good JSON Lines, the ``at``-th (0-based) replaced by ``bad_line``."""

    def write(path: Path) -> None:
        lines = [json.dumps(o) for o in good()]
        lines[at] = bad_line
        path.write_text("\n".join(lines) + "\n")

    return write


def drop(key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda o: o.pop(key)


def put(**values: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda o: o.update(values)


ARRAY = "r.json"
LINES = "r.jsonl"
BAD = [  # (id, file name, writer, what the message must match)
    ("not-json", ARRAY, text("hello, records\n"), r"r\.json, line 1, is not JSON \(column 1"),
    ("truncated-json", ARRAY, lambda p: p.write_text(json.dumps(good())[:-40]),
     r"r\.json: Record 3 is not JSON \(line 1, column \d+: Unterminated string"),
    ("truncated-after-a-record", ARRAY, lambda p: p.write_text(json.dumps(good())[:-1]),
     r"r\.json: after Record 3, expected ',' or '\]' \(line 1, column \d+\)"),
    ("bad-json-in-record-1", ARRAY, None, r"r\.json: Record 1 is not JSON \(line 1, column \d+"),
    ("data-after-the-array", ARRAY, lambda p: p.write_text(json.dumps(good(2)) + "\n[]"),
     r"r\.json: data after the array \(line 2, column 1\)"),
    ("empty-file", ARRAY, text(""), r"r\.json.*is empty"),
    ("blank-file", ARRAY, text("\n  \n"), r"r\.json.*is empty"),
    ("object-not-list", ARRAY, text("{}"), r"Record 0.*lacks"),
    ("scalar-top", ARRAY, text("42"), r"r\.json, line 1: Record 0 is not a JSON object: 42"),
    ("list-of-numbers", ARRAY, text("[1, 2, 3]"), r"r\.json: Record 0 is not a JSON object: 1"),
    ("record-string", ARRAY, None, r"Record 2 is not a JSON object: 'a record'"),
    ("record-null", ARRAY, None, r"Record 2 is not a JSON object: None"),
    *[(f"missing-{k}", ARRAY, edited(drop(k)), rf"Record 2: .*lacks.*'{k}'") for k in
      ("n", "p", "d_max", "g", "prefix", "target", "samples")],  # fmt: skip
    ("n-string", ARRAY, edited(put(n="8")), r"Record 2: .*n='8' is not"),
    ("n-float", ARRAY, edited(put(n=32.5)), r"Record 2: .*n=32\.5 is not"),
    ("n-negative", ARRAY, edited(put(n=-3)), r"Record 2: .*n=-3"),
    ("n-bool", ARRAY, edited(put(n=True)), r"Record 2: .*n=True is not"),
    ("p-zero", ARRAY, edited(put(p=0)), r"Record 2: .*p=0"),
    ("d-one", ARRAY, edited(put(d_max=1)), r"Record 2: .*d_max=1"),
    ("g-null", ARRAY, edited(put(g=None)), r"Record 2: .*g=None is not"),
    ("prefix-not-list", ARRAY, edited(put(prefix=7)), r"Record 2: .*prefix=7 is not a list"),
    ("target-not-list", ARRAY, edited(put(target="01")), r"Record 2: .*target"),
    ("samples-not-list", ARRAY, edited(put(samples={"x": "0x1", "y": 1})), r"Record 2: .*samples=\{.*not a"),
    ("samples-string", ARRAY, edited(put(samples="0x1")), r"Record 2: .*samples.*not a list"),
    ("sample-not-dict", ARRAY, edited(lambda o: o["samples"].__setitem__(1, 5)), r"Record 2: .*Sample 1 "),
    ("x-int", ARRAY, edited(lambda o: o["samples"][0].update(x=12)), r"Record 2: .*x=12 is not a hex"),
    ("y-true", ARRAY, edited(lambda o: o["samples"][3].update(y=True)),
     r"r\.json: Record 2: Sample 3's label y=True is not 0 or 1 \(the integer\)"),
    ("jsonl-y-bool", LINES, jsonl_with(json.dumps(good()[2]).replace('"y": 0', '"y": false')),
     r"r\.jsonl, line 3: Record 2: Sample \d+'s label y=False is not 0 or 1"),
    ("y-half", ARRAY, edited(lambda o: o["samples"][0].update(y=0.5)), r"Record 2: .*y=0\.5 is not 0 or 1"),
    ("n-nan", ARRAY, lambda p: p.write_text(json.dumps(good()).replace('"n": 8', '"n": NaN', 3)),
     r"Record 0: .*n=nan is not"),  # fmt: skip
    ("p-infinity", ARRAY, lambda p: p.write_text(json.dumps(good()).replace('"p": 12', '"p": Infinity')),
     r"Record 0: .*p=inf is not"),  # fmt: skip
    ("y-nan", ARRAY, lambda p: p.write_text(json.dumps(good()).replace('"y": 1', '"y": NaN', 1)),
     r"Record 0: .*y=nan is not 0 or 1"),  # fmt: skip
    ("jsonl-bad-line-3", LINES, jsonl_with("{not json"), r"r\.jsonl.*line 3.*not JSON"),
    ("jsonl-bad-record-line-3", LINES, jsonl_with(json.dumps({"n": 8})),
     r"r\.jsonl, line 3: Record 2: .*lacks"),
    ("jsonl-list-line", LINES, jsonl_with("[1, 2]", at=3),
     r"r\.jsonl, line 4: Record 3 is not a JSON object"),
    ("non-utf8", ARRAY, text(b'[{"exp": "\xff\xfe"}]'), r"r\.json.*not UTF-8.*byte 10"),
]  # fmt: skip


def _string_record(path: Path) -> None:
    objs: list[Any] = good()
    objs[2] = "a record"
    path.write_text(json.dumps(objs))


def _null_record(path: Path) -> None:
    objs: list[Any] = good()
    objs[2] = None
    path.write_text(json.dumps(objs))


def _bad_json_in_record_1(path: Path) -> None:
    a, b = (json.dumps(o) for o in good(2))
    path.write_text("[" + a + ", " + b.replace('"y": 1', '"y": 01') + "]")


WRITERS = {
    "bad-json-in-record-1": _bad_json_in_record_1,
    "record-string": _string_record,
    "record-null": _null_record,
}


@pytest.mark.parametrize("name, file, write, match", BAD, ids=[b[0] for b in BAD])
def test_bad_records_files_raise_a_typed_error_naming_the_record(tmp_path, name, file, write, match):
    path = tmp_path / file
    (write or WRITERS[name])(path)
    with pytest.raises(RecordFormatError, match=match):
        read_records(path)


def test_blank_lines_in_json_lines_are_skipped_and_lines_still_counted(tmp_path):
    lines = [json.dumps(o) for o in good()]
    path = tmp_path / "r.jsonl"
    path.write_text(lines[0] + "\n\n   \n" + lines[1] + "\n")
    assert len(read_records(path)) == 2
    path.write_text(lines[0] + "\n\n" + json.dumps({"n": 8}) + "\n")
    with pytest.raises(RecordFormatError, match=r"r\.jsonl, line 3: Record 1: "):
        read_records(path)


def test_the_first_problem_in_file_order_is_named(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"n": 8}) + "\n\n{oops\n")
    with pytest.raises(RecordFormatError, match=r"r\.jsonl, line 1: Record 0: Record lacks"):
        read_records(path)
    path = tmp_path / "r.json"
    path.write_text("[" + json.dumps({"n": 8}) + ", {oops]")
    with pytest.raises(RecordFormatError, match=r"r\.json: Record 0: Record lacks"):
        read_records(path)


def test_paths_that_are_not_records_files(tmp_path):
    with pytest.raises(
        GF2ConfigError, match=r"no records file at .*nowhere\.json .*fix the path, or write one"
    ):
        read_records(tmp_path / "nowhere.json")
    with pytest.raises(GF2ConfigError, match="without a dataset card"):
        read_records(tmp_path)


def test_bad_parquet_records_files(tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gf2env import read_record_columns, write_parquet

    src = tmp_path / "r.json"
    src.write_text(json.dumps(good()))
    path = tmp_path / "r.parquet"
    write_parquet(path, read_record_columns(src))
    table = pq.read_table(path)

    def swap(name: str, values: list[Any]) -> pa.Table:
        return table.set_column(table.column_names.index(name), name, pa.array(values))

    cases = [
        (table.drop(["bits"]), r"lack the columns \['bits'\]"),
        (swap("n", ["8"] * 4), r"column 'n' holds string, not integers"),
        (swap("prefix", [1] * 4), r"column 'prefix' holds int64, not lists of integers"),
        (swap("labels", [[1]] * 4), r"column 'labels' holds list<.*>, not binary"),
        (swap("g", [2, None, 2, 2]), r"column 'g' is null at record 1"),
        (swap("p", [12, 0, 12, 12]), r"record 1 of .* inconsistent sizes"),
    ]  # fmt: skip
    for bad, match in cases:
        pq.write_table(bad, path)
        with pytest.raises(RecordFormatError, match=match):
            read_records(path)
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(RecordFormatError, match="not a readable Parquet file"):
        read_records(path)


def test_gf2_compare_names_the_bad_line_without_a_traceback(tmp_path):
    path = tmp_path / "bad.jsonl"
    jsonl_with('{"n": 8, "p": 12')(path)
    proc = subprocess.run(
        [sys.executable, "-m", "gf2env", "compare", "--records", str(path), "--agents", "A",
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "gf2: error:" in proc.stderr and "line 3" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_dataset_split_names_the_row_of_a_bad_record(tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "train.parquet"
    rows = [json.dumps(o) for o in good(3)]
    for bad, match in [
        ("{broken", r"train\.parquet.*: Record 1 is not JSON"),
        (json.dumps({"n": 8}), r"train\.parquet.*: Record 1: Record lacks"),
        ("", r"train\.parquet.*: Record 1 is not JSON"),
    ]:
        table = pa.table({"prompt": ["q"] * 3, "record": [rows[0], bad, rows[2]]})
        pq.write_table(table, path)
        with pytest.raises(RecordFormatError, match=match):
            read_records(path)
    pq.write_table(pa.table({"prompt": ["q"] * 3, "record": [1, 2, 3]}), path)
    with pytest.raises(RecordFormatError, match=r"train\.parquet: its .record. column holds int64"):
        read_records(path)
