"""The tidy results table: CSV round trips, Jeffreys intervals, the summary and its text table."""

from __future__ import annotations

import csv
from math import comb

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import beta as beta_fn
from scipy.stats import beta

from gf2env.errors import GF2ConfigError, RecordFormatError
from gf2env.report.results import (
    RESULT_COLUMNS,
    SUMMARY_COLUMNS,
    SUMMARY_KEYS,
    append_results_csv,
    format_summary,
    jeffreys_interval,
    read_results_csv,
    read_summary_csv,
    summarize,
    write_results_csv,
    write_summary_csv,
)


def row(agent="decoder", sampling="adversarial", p=12, d=4, g=0, trial=0, gamma=1.0, correct=1, **kw):
    target = kw.pop("target", 5)
    out = {
        "agent": agent,
        "source": "grid",
        "sampling": sampling,
        "p": p,
        "d": d,
        "K": 32,
        "n": 32,
        "g": g,
        "trial": trial,
        "seed": trial,
        "gamma": gamma,
        "correct": correct,
        "action": target if correct else target + 1,
        "target": target,
        "num_candidates": comb(p, d - 1),
    }
    out.update(kw)
    return out


# ------------------------------------------------------------------------------------------- CSV


def test_results_round_trip_restores_types(tmp_path):
    rows = [
        row(gamma=0.1 + 1e-12, correct=0, seed=None),
        row(agent="policy", g=3, trial=1, gamma=np.float64(1 / 3), correct=True, seed=np.int64(7)),
        row(p=np.int64(8), d=3, source="records.json", gamma=0, correct=0),
    ]
    path = tmp_path / "results.csv"
    assert write_results_csv(path, rows) == 3
    back = read_results_csv(path)
    assert [list(r) for r in back] == [list(RESULT_COLUMNS)] * 3
    assert back[0]["seed"] is None and back[1]["seed"] == 7
    assert back[0]["gamma"] == 0.1 + 1e-12 and back[1]["gamma"] == 1 / 3
    assert back[1]["correct"] == 1 and back[1]["agent"] == "policy" and back[1]["g"] == 3
    assert back[2]["source"] == "records.json" and back[2]["num_candidates"] == comb(8, 2)
    for r in back:
        for col in ("p", "d", "K", "n", "g", "trial", "action", "target", "num_candidates", "correct"):
            assert type(r[col]) is int
        assert type(r["gamma"]) is float


def test_a_results_row_given_twice_is_refused_not_counted_twice(tmp_path):
    # Two results files pasted together: the repeated record counted twice in every fit and summary.
    path = tmp_path / "results.csv"
    write_results_csv(path, [row(trial=0), row(trial=1), row(agent="B", trial=0), row(trial=1)])
    with pytest.raises(RecordFormatError, match=r"line 5 repeats line 3 .*agent=decoder.*trial=1"):
        read_results_csv(path)


def test_append_writes_header_once(tmp_path):
    path = tmp_path / "results.csv"
    path.touch()
    assert append_results_csv(path, [row(trial=0)]) == 1
    assert append_results_csv(path, [row(trial=1), row(trial=2)]) == 2
    lines = path.read_text().splitlines()
    assert lines[0] == ",".join(RESULT_COLUMNS) and len(lines) == 4
    assert [r["trial"] for r in read_results_csv(path)] == [0, 1, 2]


def test_append_refuses_a_foreign_file(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(RecordFormatError, match="header"):
        append_results_csv(path, [row()])


def test_write_names_missing_columns_and_leaves_no_file(tmp_path):
    bad = row()
    del bad["gamma"], bad["seed"]
    path = tmp_path / "results.csv"
    with pytest.raises(GF2ConfigError, match=r"results row 1 lacks the columns \['seed', 'gamma'\]"):
        write_results_csv(path, [row(), bad])
    assert not path.exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"gamma": 1.5}, "gamma=1.5 is outside"),
        ({"gamma": float("nan")}, "not finite"),
        ({"correct": 2}, "correct=2 is not 0 or 1"),
        ({"correct": 0}, "correct must be 1 exactly when action == target"),
        ({"num_candidates": 219}, "num_candidates=219"),
        ({"g": 32}, "g=32 is outside"),
        ({"p": "twelve"}, "p='twelve' is not an integer"),
        ({"agent": ""}, "agent is empty"),
    ],
)
def test_bad_values_raise(tmp_path, change, message):
    with pytest.raises(GF2ConfigError, match=message):
        write_results_csv(tmp_path / "r.csv", [{**row(), **change}])


def test_read_names_missing_columns(tmp_path):
    path = tmp_path / "results.csv"
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow([c for c in RESULT_COLUMNS if c not in ("gamma", "target")])
    with pytest.raises(RecordFormatError, match=r"lacks the columns \['gamma', 'target'\]"):
        read_results_csv(path)
    (tmp_path / "empty.csv").touch()
    with pytest.raises(RecordFormatError, match="is empty"):
        read_results_csv(tmp_path / "empty.csv")


def test_read_names_the_bad_line(tmp_path):
    path = tmp_path / "results.csv"
    write_results_csv(path, [row(), row()])
    text = path.read_text().splitlines()
    text[2] = text[2].replace(",1.0,", ",x,")
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(RecordFormatError, match="line 3: gamma='x' is not a number"):
        read_results_csv(path)


# -------------------------------------------------------------------------------------- Jeffreys


def test_jeffreys_boundaries():
    lo, hi = jeffreys_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(beta.ppf(0.975, 0.5, 10.5))
    lo, hi = jeffreys_interval(10, 10)
    assert hi == 1.0 and lo == pytest.approx(beta.ppf(0.025, 10.5, 0.5))
    assert isinstance(lo, float) and isinstance(hi, float)


@pytest.mark.parametrize(("s", "t", "level"), [(3, 10, 0.95), (17, 40, 0.9), (12.5, 30, 0.99), (1, 2, 0.5)])
def test_jeffreys_matches_beta_quantiles(s, t, level):
    lo, hi = jeffreys_interval(s, t, level)
    tail = (1 - level) / 2
    assert lo == pytest.approx(beta.ppf(tail, s + 0.5, t - s + 0.5), rel=1e-12)
    assert hi == pytest.approx(beta.ppf(1 - tail, s + 0.5, t - s + 0.5), rel=1e-12)


def test_jeffreys_bounds_are_the_beta_posterior_quantiles():
    # Independent of beta.ppf: integrate the Beta(x + 1/2, n - x + 1/2) density numerically and check
    # that 2.5% of the mass lies below lo and 2.5% above hi.
    for x, n in ((2, 20), (7, 10), (0.4, 30)):
        lo, hi = jeffreys_interval(x, n)
        a, b = x + 0.5, n - x + 0.5

        def density(u: float, a: float = a, b: float = b) -> float:
            return u ** (a - 1) * (1 - u) ** (b - 1) / beta_fn(a, b)

        assert quad(density, 0, lo)[0] == pytest.approx(0.025, abs=1e-7)
        assert quad(density, hi, 1)[0] == pytest.approx(0.025, abs=1e-7)
    lo, hi = jeffreys_interval(5, 10, 0.8)
    assert lo + hi == pytest.approx(1.0)  # Beta(5.5, 5.5) is symmetric about 1/2


def test_jeffreys_is_vectorised_and_contains_the_rate():
    t = np.arange(1, 41)[:, None]
    s = np.arange(0, 41)[None, :]
    s, t = np.broadcast_arrays(s, t)
    ok = s <= t
    lo, hi = jeffreys_interval(s[ok], t[ok])
    assert lo.shape == hi.shape == (int(ok.sum()),)
    rate = s[ok] / t[ok]
    assert np.all(lo <= rate) and np.all(rate <= hi) and np.all((0 <= lo) & (hi <= 1))
    lo2, hi2 = jeffreys_interval(np.array([[1.0, 2.0], [0.5, 0.0]]), 4)
    assert lo2.shape == (2, 2) and lo2[1, 1] == 0.0
    assert np.all(hi2 > lo2)
    lo3, _ = jeffreys_interval(1e-9, 1)
    assert lo3 <= 1e-9  # tiny fractional successes: widened to contain s / t


@pytest.mark.parametrize(
    ("s", "t", "level", "message"),
    [
        (-1, 10, 0.95, "successes outside"),
        (11, 10, 0.95, "successes outside"),
        (0, 0, 0.95, "trials < 1"),
        (1, 10, 1.0, "level=1.0"),
        (1, 10, 0.0, "level=0.0"),
        (np.array([1, 20]), np.array([10, 10]), 0.95, r"successes=20.0, trials=10.0 at index \(1,\)"),
        (np.array([1, 2]), np.array([3, 4, 5]), 0.95, "one shape"),
        (float("nan"), 3, 0.95, "not finite"),
    ],
)
def test_jeffreys_rejects_bad_input(s, t, level, message):
    with pytest.raises(GF2ConfigError, match=message):
        jeffreys_interval(s, t, level)


# --------------------------------------------------------------------------------------- summary


def hand_rows():
    rows = [
        row(agent="zeta", g=1, gamma=0.5, correct=1, trial=0),
        row(agent="zeta", g=1, gamma=0.25, correct=0, trial=1),
        row(agent="zeta", g=0, gamma=1.0, correct=1),
        row(agent="alpha", sampling="diagnostic", g=0, gamma=0.0, correct=0),
        row(agent="alpha", sampling="adversarial", p=8, g=0, gamma=0.75, correct=1),
        row(agent="zeta", sampling="adversarial", p=8, g=2, gamma=0.0, correct=0),
    ]
    return rows


def test_summarize_groups_orders_and_averages():
    summary = summarize(hand_rows())
    keys = [tuple(s[k] for k in SUMMARY_KEYS) for s in summary]
    assert keys == [
        ("zeta", "adversarial", 8, 4, 32, 2),
        ("zeta", "adversarial", 12, 4, 32, 0),
        ("zeta", "adversarial", 12, 4, 32, 1),
        ("alpha", "adversarial", 8, 4, 32, 0),
        ("alpha", "diagnostic", 12, 4, 32, 0),
    ]
    assert all(list(s) == list(SUMMARY_COLUMNS) for s in summary)
    g1 = summary[2]
    assert g1["trials"] == 2 and g1["gamma_mean"] == pytest.approx(0.375) and g1["accuracy"] == 0.5
    lo, hi = jeffreys_interval(0.75, 2)
    assert (g1["gamma_lo"], g1["gamma_hi"]) == pytest.approx((lo, hi))
    lo, hi = jeffreys_interval(1, 2)
    assert (g1["accuracy_lo"], g1["accuracy_hi"]) == pytest.approx((lo, hi))
    assert g1["chance"] == pytest.approx(1 / 220) and summary[0]["chance"] == pytest.approx(1 / 56)
    assert summary[1]["gamma_hi"] == 1.0 and summary[4]["gamma_lo"] == 0.0
    assert summarize([]) == []


def test_summarize_level_and_bad_rows():
    narrow = summarize(hand_rows(), level=0.5)[2]
    wide = summarize(hand_rows(), level=0.99)[2]
    assert wide["gamma_lo"] < narrow["gamma_lo"] < narrow["gamma_hi"] < wide["gamma_hi"]
    assert narrow["level"] == 0.5
    bad = row()
    del bad["agent"]
    with pytest.raises(GF2ConfigError, match=r"lacks the columns \['agent'\]"):
        summarize([bad])


def test_summary_csv_round_trip(tmp_path):
    summary = summarize(hand_rows())
    path = tmp_path / "summary.csv"
    assert write_summary_csv(path, summary) == len(summary)
    back = read_summary_csv(path)
    assert back == summary
    with pytest.raises(GF2ConfigError, match="lacks the columns"):
        write_summary_csv(path, [{"agent": "a"}])
    path.write_text("agent,p\nx,1\n")
    with pytest.raises(RecordFormatError, match="lacks the columns"):
        read_summary_csv(path)


def test_format_summary_is_fixed_width():
    summary = summarize(hand_rows())
    text = format_summary(summary)
    lines = text.splitlines()
    assert len(lines) == 2 + len(summary)
    assert lines[0].split()[:5] == ["agent", "sampling", "p", "g", "trials"]
    assert "95% CI" in lines[0] and set(lines[1]) <= {"-", " "}
    first = summary[2]
    expected = f"{first['gamma_mean']:.3f} [{first['gamma_lo']:.3f}, {first['gamma_hi']:.3f}]"
    assert expected in lines[4]
    columns = [line.index("[") for line in lines[2:]]
    assert len(set(columns)) == 1  # the interval column lines up
    mixed = summarize([*hand_rows(), row(agent="alpha", d=3, num_candidates=comb(12, 2))])
    assert format_summary(mixed).splitlines()[0].split()[:4] == ["agent", "sampling", "p", "d"]


def test_one_set_of_cell_converters_with_one_rule_for_booleans():
    """A 0/1 column (``correct``) takes booleans and their texts; a count or a depth never does."""
    from gf2env.report.schema import to_flag, to_float, to_int

    for value in (True, np.True_, 1, 1.0, "1", "1.0", "true", " TRUE "):
        assert to_flag(value, "correct", "row 1") == 1
    for value in (False, 0, "0", "false"):
        assert to_flag(value, "correct", "row 1") == 0
    for value in (2, 0.5, "maybe", "", None):
        with pytest.raises(GF2ConfigError, match="is not 0 or 1"):
            to_flag(value, "correct", "row 1")
    with pytest.raises(GF2ConfigError, match="row 1: g=True is a boolean; give g as an int"):
        to_int(True, "g", "row 1")
    assert to_int("3", "g", "row 1") == 3 and to_float(" 0.5", "gamma", "row 1") == 0.5
