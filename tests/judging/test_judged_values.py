"""BOLD's judged metrics reported twice: as judged and corrected for the judge's measured confusion matrix.

Worked by hand on a judge that calls a fifth of neutral texts negative, by simulation (a noisy
judge, a known truth: the corrected disparity's CI covers it at about its nominal rate), and at
the edges: a judge no better than chance gets a reason and no value, a judge without a
calibration says "uncalibrated judge".
"""

from __future__ import annotations

import numpy as np
import pytest

from themis_dagster.judging.correction import UNCALIBRATED, JudgeCalibration, JudgedValue
from themis_dagster.stats import Estimate, Resampling
from themis_dagster.stats.misclassification import corrected_shares_by_group
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.spec import JudgedInputs, Judgment

JUDGE = "smollm2-135m-instruct"
LABELS = ("negative", "neutral", "positive")


def judgments(groups: dict[str, list[str]], domain: str = "gender") -> list[Judgment]:
    """Judged BOLD continuations: ``groups`` maps a group to the judge's regard label of each of its continuations."""
    out = []
    for group, labels in groups.items():
        for i, label in enumerate(labels):
            detail = {"domain": domain, "group": group, "regard": label, "toxicity": "non-toxic",
                      "sentiment": "neutral", "gender_polarity": "neutral"}  # fmt: skip
            out.append(Judgment(f"{domain}:{group}:{i}", f"{domain}:{group}", "neutral", 0.0, True, detail))
    return out


def calibration(cells: dict[tuple[str, str], int], kappa: float | None = 0.5) -> JudgeCalibration:
    human: list[str] = []
    judged: list[str] = []
    for (h, j), count in cells.items():
        human += [h] * count
        judged += [j] * count
    estimate = Estimate(kappa, 0.4, 0.6, len(human)) if kappa is not None else None
    return JudgeCalibration(JUDGE, "regard", LABELS, tuple(human), tuple(judged), estimate)


# the judge calls 20% of truly neutral texts negative and is otherwise right:
# M = P(judge | truth) = [[1, 0, 0], [0.2, 0.8, 0], [0, 0, 1]] (rows truth negative, neutral, positive)
FIFTH_OF_NEUTRAL_NEGATIVE = calibration(
    {
        ("negative", "negative"): 100,
        ("neutral", "neutral"): 80,
        ("neutral", "negative"): 20,
        ("positive", "positive"): 100,
    }
)


def _values(groups: dict[str, list[str]], calibrations: dict[str, JudgeCalibration | None]) -> dict:
    task = load_task("bold", {"judge_model": JUDGE, "bootstrap_resamples": 400})
    judged = judgments(groups)
    values = task.module.compute_metrics(judged, task.params)
    assert task.second_opinion is not None
    found: list[JudgedValue] = task.second_opinion.judged_values(  # type: ignore[attr-defined]
        JudgedInputs(judged, values, task.params, calibrations)
    )
    return {(v.metric, v.subset): v for v in found}


def test_corrected_shares_and_disparity_by_hand() -> None:
    # group A: judged 1 negative, 4 neutral (o = 0.2, 0.8, 0); B: 3 negative, 2 neutral (o = 0.6, 0.4, 0)
    groups = {"A": ["negative"] + ["neutral"] * 4, "B": ["negative"] * 3 + ["neutral"] * 2}
    found = _values(groups, {"regard": FIFTH_OF_NEUTRAL_NEGATIVE})
    # o = M^T t: o_neg = t_neg + 0.2 t_neu, o_neu = 0.8 t_neu, o_pos = t_pos
    # A: t_neu = 0.8 / 0.8 = 1, t_neg = 0.2 - 0.2 * 1 = 0; B: t_neu = 0.4 / 0.8 = 0.5, t_neg = 0.6 - 0.1 = 0.5
    a, b = found["negative_regard_share", "gender:A"], found["negative_regard_share", "gender:B"]
    assert (a.value, a.corrected) == (pytest.approx(0.2), pytest.approx(0.0, abs=1e-12))
    assert (b.value, b.corrected) == (pytest.approx(0.6), pytest.approx(0.5))
    # all ten: o = (0.4, 0.6, 0): t_neu = 0.75, t_neg = 0.25
    overall = found["negative_regard_share", None]
    assert (overall.value, overall.corrected) == (pytest.approx(0.4), pytest.approx(0.25))
    assert overall.corrected_ci_low is not None and overall.corrected_ci_high is not None
    assert overall.corrected_ci_low <= 0.25 <= overall.corrected_ci_high
    # the judged gap between A and B is 0.6 - 0.2 = 0.4; with the judge's errors removed, 0.5 - 0 = 0.5
    gap = found["negative_regard_disparity", "gender"]
    assert (gap.value, gap.corrected) == (pytest.approx(0.4), pytest.approx(0.5))
    assert found["negative_regard_disparity", None].corrected == pytest.approx(0.5)  # one domain: its mean
    assert found["positive_regard_share", None].corrected == pytest.approx(0.0)
    for value in (overall, gap):
        assert (value.judge, value.calibration_set, value.kappa, value.n_calibration) == (JUDGE, "regard", 0.5, 300)
        assert value.note is None
    # toxicity has no calibration set: judged, and said to be by an uncalibrated judge
    toxicity = found["toxicity_rate", None]
    assert (toxicity.value, toxicity.corrected, toxicity.note, toxicity.kappa) == (0.0, None, UNCALIBRATED, None)


def test_a_judge_no_better_than_chance_gets_a_reason_not_a_value() -> None:
    # at "negative" the judge answers negative for half the true negatives and half the true neutrals:
    # Se + Sp = 0.5 + 0.5 = 1 for that label, so there is nothing to invert
    chance = calibration(
        {
            ("negative", "negative"): 10,
            ("negative", "neutral"): 10,
            ("neutral", "negative"): 10,
            ("neutral", "neutral"): 10,
            ("positive", "positive"): 20,
        }
    )
    found = _values({"A": ["negative", "neutral"] * 3, "B": ["neutral"] * 6}, {"regard": chance})
    for key in (("negative_regard_share", None), ("negative_regard_disparity", None), ("positive_regard_share", None)):
        value = found[key]
        assert value.corrected is None and value.corrected_ci_low is None
        assert value.note is not None and "no better than chance" in value.note, value.note
        assert value.kappa == 0.5 and value.value is not None  # still reported as judged, beside its kappa


def test_a_judge_without_calibration_says_uncalibrated_judge() -> None:
    found = _values({"A": ["negative", "neutral"], "B": ["neutral", "positive"]}, {"regard": None})
    assert {v.note for v in found.values()} == {UNCALIBRATED}
    assert {metric for metric, _ in found} == {
        "negative_regard_share", "positive_regard_share", "negative_regard_disparity", "positive_regard_disparity",
        "toxicity_rate",
    }  # fmt: skip
    assert all(v.corrected is None and v.judge == JUDGE for v in found.values())


def test_no_judge_model_no_judged_values() -> None:
    task = load_task("bold", {})
    judged = judgments({"A": ["negative"], "B": ["neutral"]})
    values = task.module.compute_metrics(judged, task.params)
    assert task.second_opinion.judged_values(JudgedInputs(judged, values, task.params, {})) == []  # type: ignore[union-attr]


def test_simulation_corrected_disparity_covers_the_truth() -> None:
    """Two groups with known true negative shares, a judge with known errors; over seeds the corrected
    disparity's 95% CI covers the true gap at about its nominal rate, the judged gap's bias shows."""
    rng = np.random.default_rng(7)
    confusion = np.array([[0.8, 0.15, 0.05], [0.25, 0.7, 0.05], [0.05, 0.15, 0.8]])  # P(judge | truth)
    truth = {"A": np.array([0.1, 0.7, 0.2]), "B": np.array([0.4, 0.4, 0.2])}
    true_gap = 0.3
    covered, judged_gaps, runs = 0, [], 120
    for seed in range(runs):
        human = rng.choice(3, size=600, p=[1 / 3] * 3)
        said = np.array([rng.choice(3, p=confusion[h]) for h in human])
        groups = {}
        for name, shares in truth.items():
            true_items = rng.choice(3, size=400, p=shares)
            groups[name] = [LABELS[rng.choice(3, p=confusion[t])] for t in true_items]
        result = corrected_shares_by_group(
            groups,
            [LABELS[h] for h in human],
            [LABELS[s] for s in said],
            LABELS,
            resampling=Resampling(n_resamples=300, seed=seed),
        )
        assert result.reason is None
        gap = result.replicates["B"][:, 0] - result.replicates["A"][:, 0]
        low, high = np.percentile(gap, [2.5, 97.5])
        covered += low <= true_gap <= high
        judged_gaps.append(result.observed["B"][0] - result.observed["A"][0])
    assert 0.88 <= covered / runs <= 1.0, covered / runs
    # the judge shrinks the gap: E[o_B - o_A] = (M^T (t_B - t_A))[0] = 0.3 * (0.8 - 0.25) = 0.165
    assert np.mean(judged_gaps) == pytest.approx(0.165, abs=0.02)


def test_a_calibration_without_readable_answers_gives_a_reason() -> None:
    """Every calibration answer unreadable (the fake engine's "1"): no rows to measure on, said so, no value."""
    empty = JudgeCalibration(JUDGE, "regard", LABELS, (), (), None)
    found = _values({"A": ["negative", "neutral"], "B": ["neutral", "neutral"]}, {"regard": empty})
    value = found["negative_regard_share", None]
    assert value.corrected is None and value.n_calibration == 0 and value.calibration_set == "regard"
    assert value.note is not None and value.note.startswith("no calibration rows to measure the judge on")
