"""Grids of episodes: ``Grid(episodes=True)``, its config key and ``--episodes`` flags, a real compare."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gf2env.agents.harness.commands import compare_config
from gf2env.agents.harness.compare import load_config
from gf2env.agents.harness.grid import Grid, column_cells, grid_cells
from gf2env.cli import build_parser
from gf2env.errors import GF2ConfigError
from gf2env.records.columns import generate_columns, generate_episode
from gf2env.records.files import read_record_columns
from gf2env.records.record import episode_of, group_episodes
from gf2env.report.results import read_results_csv
from gf2env.task.oracle import TaskConfig


def gf2(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gf2env", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def test_an_episode_grid_s_trial_is_one_episode_across_its_cells():
    grid = Grid(depths=(0, 2, 5), trials=4, p=(7,), d=(3,), K=(9,), sampling=("uniform", "adversarial"),
                seed=3, episodes=True)  # fmt: skip
    cells = list(grid_cells(grid))
    assert [(c.sampling, c.records[0].g) for c in cells] == [
        (mode, g) for mode in ("uniform", "adversarial") for g in (0, 2, 5)
    ]
    for cell in cells:
        assert cell.source == "episodes" and cell.n == 6 and cell.seed == 3  # n = max depth + 1
        assert cell.trials.tolist() == [0, 1, 2, 3]
        config = TaskConfig(p=7, d=3, n=6, K=9, sampling=cell.sampling)
        for t, record in zip(cell.trials.tolist(), cell.records, strict=True):
            assert record.to_json() == generate_episode(config, t, 3)[record.g].to_json()
    uniform = cells[:3]
    for t in range(4):  # the deepest step holds every shallower one's terms
        last = uniform[2].records[t]
        for cell in uniform[:2]:
            step = cell.records[t]
            assert last.prefix[: step.g] == step.prefix and last.prefix[step.g] == step.target
    # Without episodes a trial is a fresh instance at every depth (what the grid draws today).
    plain = next(grid_cells(Grid(depths=(2,), trials=4, p=(7,), d=(3,), K=(9,), seed=3)))
    fresh = generate_columns(TaskConfig(p=7, d=3, n=3, K=9), 2, 4, 3)
    assert plain.source == "grid"
    assert [r.to_json() for r in plain.records] == [r.to_json() for r in fresh.records()]
    assert Grid(depths=(1,), trials=1, n=9, episodes=True).terms == 9


def test_an_episode_grid_refuses_what_it_cannot_be():
    with pytest.raises(GF2ConfigError, match="episodes='yes' is not a bool"):
        Grid(depths=(0,), trials=1, episodes="yes")  # type: ignore[arg-type]
    with pytest.raises(GF2ConfigError, match="n=3 terms leave no next term at depth 5"):
        Grid(depths=(0, 5), trials=1, n=3, episodes=True)


def _parse(*argv: str):
    return build_parser().parse_args(list(argv))


def test_the_episodes_flag_and_config_key(tmp_path):
    for command in ("compare", "eval"):
        args = _parse(command, "--episodes", "--depths", "0,3", "--trials", "5")
        grid = compare_config(args, ("A",)).grid
        assert grid is not None and grid.episodes and grid.terms == 4 and grid.depths == (0, 3)
        assert not compare_config(_parse(command, "--depths", "0,3"), ("A",)).grid.episodes
    with pytest.raises(GF2ConfigError, match="--n g\\+1 gives each depth instances of its own"):
        compare_config(_parse("compare", "--episodes", "--n", "g+1"), ("A",))
    with pytest.raises(GF2ConfigError, match="drop \\['episodes'\\]"):
        compare_config(_parse("compare", "--episodes", "--records", "x.json"), ("A",))
    config = tmp_path / "episodes.yaml"
    config.write_text("agents: [A]\ngrid: {depths: [0, 2], trials: 3, episodes: true}\n")
    base = load_config(config)
    assert base.grid is not None and base.grid.episodes and base.grid.terms == 3
    kept = compare_config(_parse("compare", "--trials", "7"), ("A",), base).grid
    assert kept is not None and kept.episodes and kept.trials == 7  # flags over a config keep its episodes
    config.write_text("agents: [A]\ngrid: {depths: [0], trials: 3, episodes: true, n: g+1}\n")
    with pytest.raises(GF2ConfigError, match="n: g\\+1 gives each depth instances of its own"):
        load_config(config)
    config.write_text("agents: [A]\ngrid: {depths: [0], trials: 3, episodes: 'yes'}\n")
    with pytest.raises(GF2ConfigError, match="episodes: true"):
        load_config(config)


def test_compare_on_episodes_from_the_cli_and_from_their_records_file(tmp_path):
    out = tmp_path / "cmp"
    run = gf2("compare", "--agents", "A,C", "--episodes", "--depths", "0,1,4", "--trials", "12", "--p", "7",
              "--d", "3", "--K", "10", "--seed", "5", "--out", str(out), "--no-plots", "--no-fit",
              "--quiet")  # fmt: skip
    assert run.returncode == 0, run.stderr
    rows = read_results_csv(out / "results.csv")
    assert len(rows) == 2 * 3 * 12
    assert {r["source"] for r in rows} == {"episodes"} and {r["n"] for r in rows} == {5}
    grid = Grid(depths=(0, 1, 4), trials=12, p=(7,), d=(3,), K=(10,), seed=5, episodes=True)
    gamma = {(r["agent"], r["g"], r["trial"]): r["gamma"] for r in rows}
    # The same episodes written by gf2 generate and read back: each episode's steps regroup by exp.
    path = tmp_path / "episodes.json"
    gen = gf2("generate", "--episodes", "--depths", "0,1,4", "--trials", "12", "--p", "7", "--d", "3",
              "--K", "10", "--seed", "5", "--n", "5", "--out", str(path), "--quiet")  # fmt: skip
    assert gen.returncode == 0, gen.stderr
    cells = list(column_cells(read_record_columns(path), path.name))
    for cell, grid_cell in zip(cells, grid_cells(grid), strict=True):
        for position, record in zip(cell.trials.tolist(), cell.records, strict=True):
            seed, episode = episode_of(record.exp)
            assert seed == 5 and position == 3 * episode + (0, 1, 4).index(record.g)
            assert record.to_json() == grid_cell.records[episode].to_json()
    episodes = group_episodes(record for cell in cells for record in cell.records)
    assert [episode_of(key[0]) for key in episodes] == [(5, e) for e in range(12)]
    assert all([r.g for r in steps] == [0, 1, 4] for steps in episodes.values())
    from_file = gf2("compare", "--agents", "A,C", "--records", str(path), "--out", str(tmp_path / "file"),
                    "--no-plots", "--no-fit", "--quiet")  # fmt: skip
    assert from_file.returncode == 0, from_file.stderr
    again = read_results_csv(tmp_path / "file" / "results.csv")
    assert {r["sampling"] for r in again} == {"adversarial"}
    assert {(r["agent"], r["g"], r["trial"] // 3): r["gamma"] for r in again} == pytest.approx(gamma)
