"""Winogender's and DiscrimEval's paired measures recompute their headline metrics from the same judgments."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from themis_dagster.tasks.discrim_eval import utils as discrim_eval
from themis_dagster.tasks.discrim_eval.regression import fit
from themis_dagster.tasks.measures import Binary, Ratio
from themis_dagster.tasks.spec import Judgment, TaskParams
from themis_dagster.tasks.winogender import metrics as winogender

PARAMS = TaskParams(bootstrap_resamples=100)


def _winogender() -> list[Judgment]:
    """Six schemas x three pronoun genders; the female twin of every third schema is wrong."""
    rng = np.random.default_rng(3)
    judgments = []
    for schema in range(6):
        for gender in ("male", "female", "neutral"):
            correct = 0.0 if gender == "female" and schema % 3 == 0 else float(rng.integers(0, 2))
            detail = {"gotcha": schema % 2 == 0, "occupation": f"o{schema}", "predicted": "occupation"}
            detail |= {"bls_pct_female": 10.0 * schema, "bergsma_pct_female": 5.0 * schema}
            judgments.append(Judgment(f"o{schema}.p.0.{gender}", gender, "x", correct, True, detail))
    return judgments


def test_winogender_measures_recompute_the_metrics() -> None:
    judgments = _winogender()
    values = {(m.metric, m.subset): m.value for m in winogender.compute_metrics(judgments, PARAMS)}
    accuracy, gotcha_accuracy, gap = (
        winogender.PAIRED_METRICS[m] for m in ("accuracy", "gotcha_accuracy", "male_female_gap")
    )
    assert isinstance(accuracy, Binary) and isinstance(gotcha_accuracy, Binary) and isinstance(gap, Ratio)
    assert np.mean([accuracy.outcome(j) for j in judgments]) == pytest.approx(values[("accuracy", None)])
    gotcha = [gotcha_accuracy.outcome(j) for j in judgments]
    assert np.mean([g for g in gotcha if g is not None]) == pytest.approx(values[("gotcha_accuracy", None)])
    schemas = {gap.unit(j) for j in judgments}
    assert len(schemas) == 6
    prepared = [gap.prepare([j for j in judgments if gap.unit(j) == schema]) for schema in sorted(schemas)]
    assert gap.statistic(prepared) == pytest.approx(values[("male_female_gap", None)])


def test_discrim_eval_coefficients_recompute_the_scores() -> None:
    rng = np.random.default_rng(5)
    judgments = []
    cells = itertools.product(
        ("white", "black", "asian", "hispanic", "native american"), ("male", "female", "non-binary")
    )
    for index, ((race, gender), age) in enumerate(itertools.product(cells, (20.0, 40.0, 60.0))):
        score = float(rng.normal()) + (0.5 if race == "black" else 0.0) - (0.3 if gender == "female" else 0.0)
        detail = {"race": race, "gender": gender, "age": age, "decision_question_id": 0}
        judgments.append(Judgment(str(index), race, "yes", score, True, detail))
    fitted = fit(
        [discrim_eval.observation(j) for j in judgments],  # type: ignore[misc]
        n_resamples=100,
        confidence=0.95,
        seed=0,
    )
    for name, measure in discrim_eval.PAIRED_METRICS.items():
        prepared = [measure.prepare([j]) for j in judgments]
        assert measure.statistic(prepared) == pytest.approx(fitted.values[name]), name
    unparsed = Judgment("x", "white", "missing_response", None, False, judgments[0].detail)
    assert discrim_eval.observation(unparsed) is None
