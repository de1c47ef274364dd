"""The bench scripts run end to end (tiny sizes: they are measured by hand, not timed here)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.paths import REPO


@pytest.mark.parametrize(
    "script, args",
    [
        ("bench_vector.py", ["--num-envs", "2", "--seconds", "0.01", "--repeats", "1"]),
        ("bench_estimators.py", ["--records", "8", "--repeats", "1"]),
    ],
)
def test_bench_script_prints_its_table(script, args, tmp_path):
    out = tmp_path / "table.csv"
    run = subprocess.run(
        [sys.executable, script, *args, "--csv", str(out)],
        cwd=REPO / "bench",
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "steps/s" in run.stdout or "rec/s" in run.stdout
    assert len(out.read_text().splitlines()) > 5
