"""Effective-prefix fit (Table 1): DCurve, DepthCounts, and the proportional vs constant ML fit."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from gf2env.errors import GF2ConfigError, RecordFormatError
from gf2env.report.d_curve import DCurve
from gf2env.report.depth_counts import DepthCounts
from gf2env.report.fit import (
    PAPER_U_GRID,
    binomial_loglik,
    fit_effective_prefix,
    model_probabilities,
    paper_k,
    read_fits_csv,
    write_fits_csv,
)

DEPTHS = (0, 1, 3, 7, 15, 31)
CHANCE = 1 / 220


def synthetic_curve(depths: tuple[int, ...] = DEPTHS) -> DCurve:
    """γ_D(g, k) = chance + (1 - chance)·exp(-(g - k)/2): strictly increasing in k."""
    table = {g: CHANCE + (1 - CHANCE) * np.exp(-(g - np.arange(g + 1)) / 2) for g in depths}
    return DCurve(depths=depths, table=table)


CURVE = synthetic_curve()


def exact_counts(model: str, param: float, trials: int = 1000) -> DepthCounts:
    a = model_probabilities(CURVE, DEPTHS, model, param)
    return DepthCounts(depths=DEPTHS, successes=trials * a, trials=np.full(len(DEPTHS), trials))


def drawn_counts(model: str, param: float, trials: int, seed: int) -> DepthCounts:
    a = model_probabilities(CURVE, DEPTHS, model, param)
    s = np.random.default_rng(seed).binomial(trials, a)
    return DepthCounts(depths=DEPTHS, successes=s, trials=np.full(len(DEPTHS), trials), agent="sim")


# ---------------------------------------------------------------------------------------------- fit


@pytest.mark.parametrize("seed", [0, 1])
def test_recovers_proportional_model(seed):
    fit = fit_effective_prefix(drawn_counts("proportional", 0.5, 20_000, seed), CURVE)
    assert fit.u == pytest.approx(0.5, abs=0.02)
    assert fit.delta_aic < 0 and fit.preferred == "proportional"
    assert fit.agent == "sim"


@pytest.mark.parametrize("seed", [0, 1])
def test_recovers_constant_model(seed):
    fit = fit_effective_prefix(drawn_counts("constant", 3.0, 20_000, seed), CURVE)
    assert fit.v == pytest.approx(3.0, abs=0.1)
    assert fit.delta_aic > 0 and fit.preferred == "constant"


def test_exact_counts_give_the_exact_parameter():
    fit_p = fit_effective_prefix(exact_counts("proportional", 0.5), CURVE)
    assert fit_p.u == pytest.approx(0.5, abs=1e-6)
    np.testing.assert_allclose(fit_p.predicted_proportional, fit_p.observed, atol=1e-6)
    fit_c = fit_effective_prefix(exact_counts("constant", 3.0), CURVE)
    assert fit_c.v == pytest.approx(3.0, abs=1e-6)
    np.testing.assert_allclose(fit_c.predicted_constant, fit_c.observed, atol=1e-6)
    # A parameter off the grid (v grid step is 31/2000) is found by the refinement.
    assert fit_effective_prefix(exact_counts("constant", 4.321), CURVE).v == pytest.approx(4.321, abs=1e-6)


def test_fit_fields_are_consistent():
    counts = drawn_counts("proportional", 0.3, 500, seed=2)
    fit = fit_effective_prefix(counts, CURVE)
    ll_p = binomial_loglik(
        counts.successes, counts.trials, model_probabilities(CURVE, DEPTHS, "proportional", fit.u)
    )
    assert fit.loglik_proportional == pytest.approx(ll_p)
    assert fit.aic_proportional == pytest.approx(2 - 2 * fit.loglik_proportional)
    assert fit.aic_constant == pytest.approx(2 - 2 * fit.loglik_constant)
    assert fit.delta_aic == pytest.approx(fit.aic_proportional - fit.aic_constant)
    assert 0 <= fit.u <= 1 and 0 <= fit.v <= max(DEPTHS)
    assert fit.depths == DEPTHS and fit.observed == pytest.approx(counts.successes / counts.trials)
    # The maximum beats every grid point of a coarser search.
    for u in np.linspace(0, 1, 51):
        probs = model_probabilities(CURVE, DEPTHS, "proportional", u)
        assert binomial_loglik(counts.successes, counts.trials, probs) <= fit.loglik_proportional + 1e-9


def test_fractional_successes_and_clipping():
    # Σγ successes; the observed rate 0 or 1 against a model probability near 0 or 1 stays finite.
    counts = DepthCounts(depths=(0, 3), successes=np.array([0.0, 7.25]), trials=np.array([10, 10]))
    curve = DCurve(depths=(0, 3), table={0: np.array([1.0]), 3: np.array([0.0, 0.2, 0.7, 1.0])})
    fit = fit_effective_prefix(counts, curve, grid_points=101)
    assert math.isfinite(fit.loglik_proportional) and math.isfinite(fit.loglik_constant)
    assert fit.predicted_proportional[0] == 1.0  # predictions are reported unclipped
    assert binomial_loglik(np.array([0.0]), np.array([5]), np.array([1.0])) == pytest.approx(
        5 * math.log(1e-12)
    )


def test_only_depth_zero_is_a_tie():
    counts = DepthCounts(depths=(0,), successes=np.array([3.0]), trials=np.array([4]))
    fit = fit_effective_prefix(counts, CURVE)
    assert fit.delta_aic == 0 and fit.preferred == "constant" and fit.v == 0


def test_fit_errors():
    counts = DepthCounts(depths=(0, 5), successes=np.array([1.0, 1.0]), trials=np.array([2, 2]))
    with pytest.raises(GF2ConfigError, match=r"depths \[5\].*\[0, 1, 3, 7, 15, 31\]"):
        fit_effective_prefix(counts, CURVE)
    for bad in (1, 0, 2.5, True):
        with pytest.raises(GF2ConfigError, match="grid_points"):
            fit_effective_prefix(exact_counts("proportional", 0.5), CURVE, grid_points=bad)


def test_model_probabilities_errors():
    with pytest.raises(GF2ConfigError, match="u=1.5"):
        model_probabilities(CURVE, DEPTHS, "proportional", 1.5)
    with pytest.raises(GF2ConfigError, match="v=-1"):
        model_probabilities(CURVE, DEPTHS, "constant", -1)
    with pytest.raises(GF2ConfigError, match="'linear'"):
        model_probabilities(CURVE, DEPTHS, "linear", 0.5)  # type: ignore[arg-type]
    with pytest.raises(GF2ConfigError, match="g=2"):
        model_probabilities(CURVE, (2,), "constant", 1.0)
    # v beyond a depth saturates at k = g.
    assert model_probabilities(CURVE, (3,), "constant", 100.0)[0] == CURVE.value(3, 3)


def test_fit_outputs(tmp_path: Path):
    fit = fit_effective_prefix(drawn_counts("constant", 3.0, 2000, seed=4), CURVE)
    row = fit.to_row()
    assert row["agent"] == "sim" and row["preferred"] == fit.preferred and row["u"] == fit.u
    assert row["depths"] == "0 1 3 7 15 31" and row["total_trials"] == 6 * 2000
    assert all(not isinstance(x, np.ndarray) for x in row.values())
    text = fit.format_table()
    assert "ΔAIC" in text and f"{fit.u:.4f}" in text and f"{fit.v:.4f}" in text
    assert len(text.splitlines()) == 2 + len(DEPTHS) + 3
    path = tmp_path / "fit.csv"
    fit.write_csv(path)
    with open(path, newline="") as fh:
        (read,) = list(csv.DictReader(fh))
    assert float(read["delta_aic"]) == pytest.approx(fit.delta_aic) and read["preferred"] == fit.preferred
    other = fit_effective_prefix(exact_counts("proportional", 0.5), CURVE)
    write_fits_csv(tmp_path / "fits.csv", [fit, other])
    with open(tmp_path / "fits.csv", newline="") as fh:
        assert [r["agent"] for r in csv.DictReader(fh)] == ["sim", ""]
    with pytest.raises(GF2ConfigError, match="no fits"):
        write_fits_csv(tmp_path / "none.csv", [])


# -------------------------------------------------------------------------------- the paper's method


def counts_at_k(ks: dict[int, int], curve: DCurve = CURVE, trials: int = 1000) -> DepthCounts:
    """Successes exactly ``trials · γ_D(g, k)`` at the given integer ``k`` of each depth."""
    depths = tuple(sorted(ks))
    s = np.array([trials * curve.table[g][ks[g]] for g in depths])
    return DepthCounts(depths=depths, successes=s, trials=np.full(len(depths), trials), agent="D")


def test_paper_k_rounds_a_half_to_even_as_the_papers_round():
    # u = 0.5: g = 1 -> 0.5 -> 0, g = 3 -> 1.5 -> 2, g = 5 -> 2.5 -> 2, g = 7 -> 3.5 -> 4 (half-up
    # would give 1, 2, 3, 4).
    assert [int(paper_k(0.5 * g, g)) for g in (1, 3, 5, 7)] == [0, 2, 2, 4]
    assert int(paper_k(-0.3, 3)) == 0 and int(paper_k(7.0, 3)) == 3  # clamped to [0, g]
    # The paper's grid and its own expression, int(round(max(0, min(g, u * g)))), agree everywhere.
    assert PAPER_U_GRID.tolist() == np.linspace(0.0, 1.0, 101).tolist()
    for g in range(128):
        ks = paper_k(PAPER_U_GRID * g, g)
        assert ks.dtype.kind == "i"
        assert ks.tolist() == [int(round(max(0, min(g, float(u) * g)))) for u in PAPER_U_GRID]


def test_paper_method_reads_the_curve_at_integer_k():
    for u in (0.0, 0.13, 0.5, 0.47, 0.99, 1.0):
        probs = model_probabilities(CURVE, DEPTHS, "proportional", u, method="paper")
        assert probs.tolist() == [CURVE.table[g][paper_k(u * g, g)] for g in DEPTHS]
    for v in (0, 2.5, 3.5, 40):
        probs = model_probabilities(CURVE, DEPTHS, "constant", v, method="paper")
        assert probs.tolist() == [CURVE.table[g][paper_k(min(v, g), g)] for g in DEPTHS]
    fit = fit_effective_prefix(drawn_counts("proportional", 0.3, 500, seed=3), CURVE, method="paper")
    assert fit.method == "paper" and fit.u in PAPER_U_GRID.tolist() and fit.v == int(fit.v)
    for g, a, c in zip(DEPTHS, fit.predicted_proportional, fit.predicted_constant, strict=True):
        assert a == CURVE.table[g][paper_k(fit.u * g, g)]  # an entry of the row: k is an integer
        assert c == CURVE.table[g][min(int(fit.v), g)]


def test_paper_fit_of_d_half_recovers_u_near_one_half():
    # D(g//2) itself: k = 0, 1, 3, 7, 15 of g = 1, 3, 7, 15, 31. round(u·g) = g//2 at every depth for
    # u in (0.4677, 0.5): the paper's fit is its first grid point, 0.47, reproducing each depth;
    # interpolating k = u·g instead is pulled down to about 1/3 by g = 3.
    counts = counts_at_k({g: g // 2 for g in DEPTHS})
    paper = fit_effective_prefix(counts, CURVE, method="paper")
    assert paper.u == PAPER_U_GRID[47] == pytest.approx(0.47) and paper.preferred == "proportional"
    np.testing.assert_array_equal(paper.predicted_proportional, paper.observed)
    interpolated = fit_effective_prefix(counts, CURVE)
    assert interpolated.method == "interpolated" and interpolated.u < 0.4


def test_paper_fit_decides_a_half_by_rounding_to_even():
    # k = round_half_even(0.5 g) at g = 1, 3, 5, 7 is 0, 2, 2, 4: only u = 0.5 gives all four (under
    # half-up 0.5 gives k = 1 at g = 1, and no u gives all four); interpolation cannot reach them.
    curve = synthetic_curve((1, 3, 5, 7))
    even = counts_at_k({1: 0, 3: 2, 5: 2, 7: 4}, curve)
    paper = fit_effective_prefix(even, curve, method="paper")
    assert paper.u == 0.5
    np.testing.assert_array_equal(paper.predicted_proportional, paper.observed)
    assert abs(fit_effective_prefix(even, curve).u - 0.5) > 0.02
    # Half-up's k for u = 0.5 (1, 2, 3, 4) is what u = 0.51 gives under half-to-even.
    up = counts_at_k({1: 1, 3: 2, 5: 3, 7: 4}, curve)
    assert fit_effective_prefix(up, curve, method="paper").u == PAPER_U_GRID[51]


def test_paper_constant_model_takes_integer_v():
    paper = fit_effective_prefix(counts_at_k({g: min(3, g) for g in DEPTHS}), CURVE, method="paper")
    assert paper.v == 3.0 and paper.preferred == "constant"
    # v = 3.4 sits between integers: the paper's fit takes the nearest, 3.
    near = fit_effective_prefix(exact_counts("constant", 3.4), CURVE, method="paper")
    assert near.v == 3.0
    assert fit_effective_prefix(exact_counts("constant", 3.4), CURVE).v == pytest.approx(3.4)


def test_method_errors():
    with pytest.raises(GF2ConfigError, match="method='exact'.*'interpolated', 'paper'"):
        fit_effective_prefix(exact_counts("proportional", 0.5), CURVE, method="exact")  # type: ignore[arg-type]
    with pytest.raises(GF2ConfigError, match="method='round'"):
        model_probabilities(CURVE, DEPTHS, "proportional", 0.5, method="round")  # type: ignore[arg-type]


def test_fits_csv_carries_the_method(tmp_path: Path):
    counts = counts_at_k({g: g // 2 for g in DEPTHS})
    fits = [fit_effective_prefix(counts, CURVE, method=m) for m in ("interpolated", "paper")]
    path = tmp_path / "fit.csv"
    write_fits_csv(path, fits)
    rows = read_fits_csv(path)
    assert [(r["agent"], r["method"]) for r in rows] == [("D", "interpolated"), ("D", "paper")]
    assert rows[1]["u"] == PAPER_U_GRID[47] and rows[0]["u"] == fits[0].u and rows[1]["total_trials"] == 6000
    assert "paper method" in fits[1].format_table() and "round(u*g)" in fits[1].format_table()
    old = tmp_path / "old.csv"
    header = path.read_text().splitlines()[0].split(",")
    old.write_text(",".join(n for n in header if n != "method") + "\n")
    with pytest.raises(RecordFormatError, match=r"lacks the columns \['method'\]"):
        read_fits_csv(old)
    path.write_text(path.read_text().replace(",paper,", ",exact,"))
    with pytest.raises(RecordFormatError, match="method='exact'"):
        read_fits_csv(path)


# ------------------------------------------------------------------------------------------- DCurve


def test_interpolation():
    row = CURVE.table[7]
    assert CURVE.value(7, 2) == row[2]
    assert CURVE.value(7, 2.5) == pytest.approx((row[2] + row[3]) / 2)
    assert CURVE.value(7, 2.25) == pytest.approx(0.75 * row[2] + 0.25 * row[3])
    assert CURVE.value(7, 7) == row[7] and CURVE.value(7, 0) == row[0]
    assert CURVE.value(0, 0.0) == CURVE.table[0][0]


def test_value_errors():
    with pytest.raises(GF2ConfigError, match=r"g=4.*\[0, 1, 3, 7, 15, 31\]"):
        CURVE.value(4, 0)
    with pytest.raises(GF2ConfigError, match=r"k=7.5.*\[0, 7\]"):
        CURVE.value(7, 7.5)
    with pytest.raises(GF2ConfigError, match="k=-0.1"):
        CURVE.value(7, -0.1)
    with pytest.raises(GF2ConfigError, match="not an integer"):
        CURVE.value(3.5, 1)  # type: ignore[arg-type]


def test_dcurve_rows_and_csv_round_trip(tmp_path: Path):
    rows = CURVE.to_rows()
    assert len(rows) == sum(g + 1 for g in DEPTHS) and rows[0] == (0, 0, CURVE.table[0][0])
    assert DCurve.from_rows(reversed(rows)).to_rows() == rows
    path = tmp_path / "curve.csv"
    CURVE.write_csv(path)
    back = DCurve.read_csv(path)
    assert back.depths == DEPTHS and back.to_rows() == rows  # exact: floats are written in full
    assert (
        DCurve.from_rows([{"g": "1", "k": "0", "gamma": "0.25"}, {"g": 1, "k": 1, "gamma": 1}]).value(1, 0.5)
        == 0.625
    )


def test_dcurve_construction_errors():
    with pytest.raises(GF2ConfigError, match=r"table\[3\].*g\+1 = 4"):
        DCurve(depths=(3,), table={3: np.zeros(3)})
    with pytest.raises(GF2ConfigError, match=r"table has depths \[1\] but depths=\[2\]"):
        DCurve(depths=(2,), table={1: np.zeros(2)})
    with pytest.raises(GF2ConfigError, match="probability"):
        DCurve(depths=(1,), table={1: np.array([0.5, 1.5])})
    with pytest.raises(GF2ConfigError, match="repeat"):
        DCurve(depths=(1, 1), table={1: np.zeros(2)})
    with pytest.raises(GF2ConfigError, match="negative"):
        DCurve(depths=(-1,), table={-1: np.zeros(0)})
    with pytest.raises(GF2ConfigError, match="no depths"):
        DCurve(depths=(), table={})
    with pytest.raises(GF2ConfigError, match=r"g=2 lack k=\[1\]"):
        DCurve.from_rows([(2, 0, 0.1), (2, 2, 0.3)])
    with pytest.raises(GF2ConfigError, match=r"repeat \(g=1, k=0\)"):
        DCurve.from_rows([(1, 0, 0.1), (1, 0, 0.2), (1, 1, 0.3)])
    with pytest.raises(GF2ConfigError, match="k=3 outside"):
        DCurve.from_rows([(2, 3, 0.1)])
    with pytest.raises(GF2ConfigError, match="triple"):
        DCurve.from_rows([(2, 3)])
    with pytest.raises(GF2ConfigError, match="lacks"):
        DCurve.from_rows([{"g": 0, "k": 0}])
    with pytest.raises(GF2ConfigError, match="no rows"):
        DCurve.from_rows([])


def test_dcurve_read_csv_errors(tmp_path: Path):
    path = tmp_path / "bad.csv"
    path.write_text("g,k,value\n0,0,0.5\n")
    with pytest.raises(GF2ConfigError, match=r"lacking \['gamma'\]"):
        DCurve.read_csv(path)
    path.write_text("")
    with pytest.raises(GF2ConfigError, match="empty"):
        DCurve.read_csv(path)


# -------------------------------------------------------------------------------------- DepthCounts


def test_depth_counts_sorted_and_readonly():
    c = DepthCounts(depths=(7, 0), successes=[3, 1.5], trials=[4.0, 2])
    assert c.depths == (0, 7) and c.successes.tolist() == [1.5, 3.0] and c.trials.tolist() == [2, 4]
    assert c.trials.dtype.kind == "i" and c.observed.tolist() == [0.75, 0.75]
    with pytest.raises(ValueError):
        c.successes[0] = 0


@pytest.mark.parametrize(
    ("depths", "successes", "trials", "match"),
    [
        ((0, 1), [3, 1], [2, 2], r"0 <= s <= t.*\(0, 3.0, 2\)"),
        ((0,), [-1], [2], "0 <= s <= t"),
        ((0,), [0], [0], "integers >= 1"),
        ((0,), [0], [2.5], "integers >= 1"),
        ((1, 1), [0, 0], [1, 1], "repeat"),
        ((-2,), [0], [1], "negative"),
        ((0, 1), [0], [1, 1], "one success count"),
        ((), [], [], "no depths"),
        ((0,), [float("nan")], [1], "0 <= s <= t"),
    ],
)
def test_depth_counts_validation(depths, successes, trials, match):
    with pytest.raises(GF2ConfigError, match=match):
        DepthCounts(depths=depths, successes=successes, trials=trials)


def tidy_rows() -> list[dict]:
    rows = []
    for agent, rate in (("llm", 0.5), ("random", 0.0)):
        for g in (0, 3):
            for i in range(4):
                rows.append(
                    {"agent": agent, "g": g, "correct": i < 4 * rate, "gamma": 0.25 + 0.5 * rate, "exp": "x"}
                )
    return rows


def test_from_rows():
    rows = tidy_rows()
    c = DepthCounts.from_rows(rows, agent="llm")
    assert c.agent == "llm" and c.depths == (0, 3)
    assert c.successes.tolist() == [2.0, 2.0] and c.trials.tolist() == [4, 4]
    g = DepthCounts.from_rows(rows, agent="llm", value="gamma")
    assert g.successes.tolist() == [2.0, 2.0]
    single = DepthCounts.from_rows([r for r in rows if r["agent"] == "random"])
    assert single.agent == "random" and single.successes.tolist() == [0.0, 0.0]
    strings = [{"agent": "a", "g": "2", "correct": s} for s in ("True", "false", "1", "0")]
    assert DepthCounts.from_rows(strings).successes.tolist() == [2.0]


def test_from_rows_errors():
    rows = tidy_rows()
    with pytest.raises(GF2ConfigError, match=r"\['llm', 'random'\]; pass agent="):
        DepthCounts.from_rows(rows)
    with pytest.raises(GF2ConfigError, match="agent='oracle' is not in"):
        DepthCounts.from_rows(rows, agent="oracle")
    with pytest.raises(GF2ConfigError, match="value='reward'"):
        DepthCounts.from_rows(rows, value="reward")
    with pytest.raises(GF2ConfigError, match=r"lacks \['gamma'\]"):
        DepthCounts.from_rows([{"agent": "a", "g": 0, "correct": True}], value="gamma")
    with pytest.raises(GF2ConfigError, match="correct='maybe' is not 0 or 1"):
        DepthCounts.from_rows([{"agent": "a", "g": 0, "correct": "maybe"}])
    with pytest.raises(GF2ConfigError, match="correct=0.5 is not 0 or 1"):
        DepthCounts.from_rows([{"agent": "a", "g": 0, "correct": 0.5}])
    with pytest.raises(GF2ConfigError, match="outside"):
        DepthCounts.from_rows([{"agent": "a", "g": 0, "gamma": 1.5}], value="gamma")
    with pytest.raises(GF2ConfigError, match="empty"):
        DepthCounts.from_rows([{"agent": "a", "g": 0, "gamma": ""}], value="gamma")
    with pytest.raises(GF2ConfigError, match="g='x' is not an integer"):
        DepthCounts.from_rows([{"agent": "a", "g": "x", "correct": 1}])
    with pytest.raises(GF2ConfigError, match="no rows"):
        DepthCounts.from_rows([])


def test_from_csv(tmp_path: Path):
    tidy = tmp_path / "results.csv"
    with open(tidy, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["agent", "g", "correct", "gamma", "exp"])
        writer.writeheader()
        writer.writerows(tidy_rows())
    c = DepthCounts.from_csv(tidy, agent="llm")
    assert c.successes.tolist() == [2.0, 2.0] and c.trials.tolist() == [4, 4]
    assert DepthCounts.from_csv(tidy, agent="llm", value="gamma").successes.tolist() == [2.0, 2.0]
    with pytest.raises(GF2ConfigError, match="pass agent="):
        DepthCounts.from_csv(tidy)

    per_depth = tmp_path / "counts.csv"
    per_depth.write_text("g,successes,trials\n3,1.5,4\n0,2,2\n")
    p = DepthCounts.from_csv(per_depth)
    assert p.depths == (0, 3) and p.successes.tolist() == [2.0, 1.5] and p.agent is None

    written = tmp_path / "written.csv"
    c.write_csv(written)
    back = DepthCounts.from_csv(written)
    assert back.agent == "llm" and back.depths == c.depths and back.successes.tolist() == c.successes.tolist()

    bad = tmp_path / "bad.csv"
    bad.write_text("depth,hits\n0,1\n")
    with pytest.raises(GF2ConfigError, match=r"columns \['depth', 'hits'\]"):
        DepthCounts.from_csv(bad)
    bad.write_text("g,successes,trials\n")
    with pytest.raises(GF2ConfigError, match="no rows"):
        DepthCounts.from_csv(bad)
