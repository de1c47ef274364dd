"""Where ``gf2 compare`` and ``gf2 fit`` write, and that a table of several settings says which is which.

A run without ``--out`` never lands on another run's folder; ``gf2 fit`` never replaces the ``fit.csv``
that compare wrote; fit tables carry (sampling, p, d, K); ``gf2 fit --p/--d/--K/--sampling`` picks a
setting, and a cached D curve of another setting is refused; the README's compare → fit example runs.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from gf2env.report.fit import read_fits_csv
from gf2env.report.results import read_results_csv
from tests.paths import REPO

GRID = ("--depths", "0,1,3", "--trials", "12", "--p", "6", "--d", "3", "--K", "8", "--quiet", "--no-plots")


def gf2(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gf2env", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def folders(root: Path) -> set[str]:
    return {p.name for p in (root / "results").iterdir()} if (root / "results").exists() else set()


def test_a_run_without_out_gets_a_folder_of_its_own(tmp_path):
    config = tmp_path / "mine.yaml"
    config.write_text("agents: [A, C]\ngrid: {p: [6], d: [3], K: [8], depths: [0, 1], trials: 10}\n")
    exact = gf2("compare", "--config", str(config), "--quiet", cwd=tmp_path)
    assert exact.returncode == 0, exact.stderr
    assert folders(tmp_path) == {"mine"}  # a config without out: gets results/<its name>
    before = (tmp_path / "results/mine/results.csv").read_bytes()
    other = gf2("compare", "--config", str(config), "--trials", "5", "--quiet", cwd=tmp_path)
    assert other.returncode == 0, other.stderr
    assert (tmp_path / "results/mine/results.csv").read_bytes() == before  # not overwritten
    (mine_5,) = folders(tmp_path) - {"mine"}
    assert re.fullmatch(r"mine-[0-9a-f]{8}", mine_5) and f"results/{mine_5}/results.csv" in other.stdout
    assert len(read_results_csv(tmp_path / "results" / mine_5 / "results.csv")) == 2 * 2 * 5

    runs = {}
    for agents in ("A", "B", "A"):
        run = gf2("compare", "--agents", agents, *GRID, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        (written,) = re.findall(r"wrote (\S+)/results\.csv", run.stdout)
        runs.setdefault(agents, set()).add(written)
    assert len(runs["A"]) == 1  # the same command finds its folder again
    assert runs["A"].isdisjoint(runs["B"])
    assert all(re.fullmatch(r"results/compare-[0-9a-f]{8}", w) for w in runs["A"] | runs["B"])


@pytest.mark.parametrize("out", ["/dev/null", "/proc/gf2-results", "a-file", "a-file/below"])
def test_compare_refuses_an_out_that_cannot_be_a_folder_before_any_work(tmp_path, out):
    (tmp_path / "a-file").write_text("not a folder\n")
    run = gf2("compare", "--agents", "A", *GRID, "--out", out, cwd=tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.count("\n") == 1 and run.stderr.startswith(f"gf2: error: --out {out}")
    assert "Traceback" not in run.stderr and run.stdout == ""  # refused before the evaluation


def test_fit_tables_name_their_setting_and_gf2_fit_picks_one(tmp_path):
    out = tmp_path / "two"
    run = gf2("compare", "--agents", "A,D(k=1)", *GRID[:-6], "--p", "6,7", "--d", "3", "--K", "8",
              "--quiet", "--no-plots", "--out", str(out), cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    rows = read_fits_csv(out / "fit.csv")
    assert {(r["agent"], r["p"], r["method"]) for r in rows} == {
        (a, p, m) for a in ("A", "D(k=1)") for p in (6, 7) for m in ("interpolated", "paper")
    }
    assert all((r["d"], r["K"], r["sampling"], r["value"]) == (3, 8, "adversarial", "gamma") for r in rows)
    assert re.search(r"D\(k=1\)\s+p=7 d=3 K=8 adversarial\s+paper", run.stdout)  # the printed table too

    compared = (out / "fit.csv").read_bytes()
    curve = tmp_path / "curve-p7.csv"
    both = gf2("fit", str(out / "results.csv"), "--curve", str(curve), "--quiet", cwd=tmp_path)
    assert both.returncode == 2 and "--p/--d/--K/--sampling" in both.stderr and "p=6 d=3 K=8" in both.stderr
    picked = gf2("fit", str(out / "results.csv"), "--p", "7", "--curve", str(curve), "--curve-trials", "40",
                 "--quiet", cwd=tmp_path)  # fmt: skip
    assert picked.returncode == 0, picked.stderr
    assert {r["p"] for r in read_fits_csv(out / "fit-correct-p7.csv")} == {7}
    assert (out / "fit.csv").read_bytes() == compared
    assert "p=7 d=3 K=8 adversarial" in picked.stdout
    wrong = gf2("fit", str(out / "results.csv"), "--p", "6", "--curve", str(curve), "--quiet", cwd=tmp_path)
    assert wrong.returncode == 2 and "simulated with {'p': 7}" in wrong.stderr  # not silently reused
    fewer = gf2("fit", str(out / "results.csv"), "--p", "7", "--curve", str(curve), "--curve-trials", "41",
                "--quiet", cwd=tmp_path)  # fmt: skip
    assert fewer.returncode == 2 and "'trials': 40" in fewer.stderr
    absent = gf2("fit", str(out / "results.csv"), "--p", "9", "--quiet", cwd=tmp_path)
    assert absent.returncode == 2 and "no rows at {'p': 9}" in absent.stderr
    assert "p=7 d=3 K=8" in absent.stderr  # the settings it has
    every = gf2("fit", str(out / "results.csv"), "--quiet", cwd=tmp_path)  # no --curve: each setting its own
    assert every.returncode == 0, every.stderr
    assert {r["p"] for r in read_fits_csv(out / "fit-correct.csv")} == {6, 7}
    itself = gf2("fit", str(out / "results.csv"), "--out", str(out / "results.csv"), cwd=tmp_path)
    assert itself.returncode == 2 and "the results file itself" in itself.stderr


def test_the_readmes_compare_then_fit_example_runs(tmp_path):
    lines = (REPO / "README.md").read_text().splitlines()
    compare = next(x for x in lines if x.startswith('gf2 compare --agents A,B,"D(k=2)"'))
    fit = next(x for x in lines if x.startswith("gf2 fit results/mine/results.csv"))
    for line in (compare.replace("--trials 500", "--trials 15") + " --quiet --no-plots", fit + " --quiet"):
        args = shlex.split(line.split("#")[0])
        run = gf2(*args[1:], cwd=tmp_path)
        assert run.returncode == 0, f"{line}\n{run.stderr}"
    assert list((tmp_path / "results/mine").glob("fit-*.csv"))
