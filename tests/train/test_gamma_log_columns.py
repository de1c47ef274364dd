"""A training run's gamma.csv: the summary's compute columns are written, and a run resumed on a file
written before them keeps that file's columns (its rows stay aligned)."""

from __future__ import annotations

import csv
import time

import pytest

from gf2env.errors import RecordFormatError
from gf2env.report.results import summarize
from gf2env.train.gamma_log import GAMMA, GammaLog, read_gamma_csv
from tests.gf2env.test_results import row

HEAD = {"active_depths": "0 1", "eval_seed": 7, "prompt_id": "plain-v1"}


def summary(wall_ms: float | None):
    rows = [row(g=g, trial=t, gamma=0.5, correct=1, wall_ms=wall_ms) for g in (0, 1) for t in range(2)]
    return summarize(rows)


def test_a_new_log_has_the_compute_columns(tmp_path):
    GammaLog(tmp_path).record(0, summary(0.25), HEAD)
    rows = read_gamma_csv(tmp_path / "gamma.csv")
    assert [r["wall_ms"] for r in rows] == [0.25, 0.25] and all(r["prompt_tokens"] is None for r in rows)


def test_a_resumed_log_written_before_the_compute_columns_keeps_its_columns(tmp_path):
    path = tmp_path / "gamma.csv"
    with open(path, "w", newline="") as fh:  # an old run's file: no compute columns
        writer = csv.DictWriter(fh, fieldnames=GAMMA.required, extrasaction="ignore")
        writer.writeheader()
        writer.writerows({"step": 0, **HEAD, **s, "time": 1.0} for s in summary(None))
    log = GammaLog(tmp_path)
    assert log.done_steps == {0}
    before = time.time()
    log.record(1, summary(0.25), HEAD)
    rows = read_gamma_csv(path)
    assert path.read_text().splitlines()[0] == ",".join(GAMMA.required)
    assert [(r["step"], r["g"]) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(r["gamma_mean"] == 0.5 and r["level"] == 0.95 and r["wall_ms"] is None for r in rows)
    assert all(r["time"] >= before for r in rows[2:])  # aligned: the time is the time
    path.write_text("step,loss\n1,0.5\n")  # not a gamma log: refused, by name
    with pytest.raises(RecordFormatError, match=r"gamma.csv lacks the columns \['active_depths'"):
        GammaLog(tmp_path)
    path.write_text(",".join(GAMMA.required) + ",loss\n")  # a column of something else
    with pytest.raises(RecordFormatError, match="not a gamma log's"):
        GammaLog(tmp_path).record(2, summary(0.25), HEAD)
