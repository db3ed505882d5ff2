"""OpinionQA by loglikelihood (task ``opinions_qa``): each question as multiple choice, its answer distribution from
the option letters' probabilities (Santurkar et al. 2023; HELM's ``opinions_qa`` scenario).

Per item the context is ``opinions_mc`` (HELM's format) after the item's persona prompt, if any
(``steer_qa``, ``steer_bio``, ``steer_portray``); every option's letter is one loglikelihood
request ``<item_id>:<letter>`` (continuation ``" " + letter``, sent together so vLLM's prefix cache
reuses the context). The persona prompt is part of the request's context, so of its fingerprint.
Judging: ``D_M`` and ``R_M`` (``representativeness.model_distribution``) and the
representativeness of every group the item carries; an item missing any finite score is
``missing_response``, never guessed. Items: ``data.py``; metrics: ``metrics.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from themis_dagster.kinds.choices import choice_requests, choice_scores
from themis_dagster.tasks.measures import Continuous, Ratio
from themis_dagster.tasks.opinions_qa import metrics
from themis_dagster.tasks.opinions_qa.data import Params, load_items
from themis_dagster.tasks.opinions_qa.metrics import DEFAULT, QuestionRow
from themis_dagster.tasks.opinions_qa.representativeness import model_distribution, representativeness
from themis_dagster.tasks.opinions_qa.survey import OVERALL
from themis_dagster.tasks.persona_poll.parser import letters
from themis_dagster.tasks.rendering import render, template_sha256, template_text
from themis_dagster.tasks.spec import Item, Judgment, MetricValue, Request, Response

__all__ = ["PAIRED_METRICS", "Params", "build_requests", "compute_metrics", "judge", "load_items"]


def prompt_of(item: Item, templates: dict[str, str], template: str) -> str:
    """The item's question under its persona prompt (none for the default context), rendered by ``template``."""
    fields = item.fields
    context = (
        None if fields["persona"] is None else render(templates, f"steer_{fields['style']}", persona=fields["persona"])
    )
    options = list(zip(letters(len(fields["options"])), fields["options"], strict=True))
    return render(templates, template, context=context, question=fields["question"], options=options)


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """One loglikelihood request per option letter after the item's prompt."""
    digest = template_sha256(template_text(templates, params.template))
    requests = []
    for item in items:
        context = prompt_of(item, templates, params.template)
        continuations = {letter: f" {letter}" for letter in letters(len(item.fields["options"]))}
        requests += choice_requests(item, context, continuations, params.template, digest)
    return requests


def detail_of(item: Item) -> dict[str, Any]:
    keys = ("key", "style", "steer_group", "topics")
    return {key: item.fields[key] for key in keys}


def group_reps(fields: dict[str, Any], d_model: list[float]) -> dict[str, float]:
    """The representativeness of the model's distribution for each group the item carries."""
    reps = {}
    for group, d_group in fields["human"].items():
        value = representativeness(fields["ordinal"], d_model, d_group)
        if value is not None:
            reps[group] = value
    return reps


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """Per item: D_M, R_M and each group's representativeness; the score is the whole population's (default
    context) or the steered group's."""
    by_id = {response.request_id: response for response in responses}
    judgments = []
    for item in items:
        detail = detail_of(item)
        values, scores = choice_scores(by_id, item, letters(len(item.fields["options"])))
        if values is None:
            detail["logprobs"] = scores
            judgments.append(Judgment(item.item_id, item.subset, "missing_response", None, False, detail))
            continue
        d_model, refusal = model_distribution(values, len(item.fields["ordinal"]))
        reps = group_reps(item.fields, d_model)
        target = OVERALL if item.fields["style"] == DEFAULT else item.fields["steer_group"]
        detail |= {
            "logprobs": values,
            "d_model": d_model,
            "refusal": refusal,
            "human_refusal": item.fields["human_refusal"].get(OVERALL),
            "representativeness": reps,
        }
        outcome = "scored" if reps else "nominal_question"  # all positions equal: no distance to measure
        judgments.append(Judgment(item.item_id, item.subset, outcome, reps.get(target), True, detail))
    return judgments


def row_of(judgment: Judgment) -> QuestionRow | None:
    """A scored judgment as the metrics read it."""
    if not judgment.parsed:
        return None
    d = judgment.detail
    topics = tuple(d["topics"])
    return QuestionRow(
        d["key"], d["style"], d["steer_group"], topics, dict(d["representativeness"]), d["refusal"], d["human_refusal"]
    )


def compute_metrics(judgments: list[Judgment], params: Params) -> list[MetricValue]:
    """Representativeness, its least and most represented groups, refusal shares, steerability (``metrics.py``)."""
    return metrics.question_metrics([row for j in judgments if (row := row_of(j)) is not None], params)


def _default_score(judgment: Judgment) -> float | None:
    return judgment.score if judgment.parsed and judgment.detail["style"] == DEFAULT else None


def _default_refusal(judgment: Judgment) -> float | None:
    return float(judgment.detail["refusal"]) if judgment.parsed and judgment.detail["style"] == DEFAULT else None


def question_unit(judgment: Judgment) -> str:
    """The resampling unit of the steering comparisons: the question (its default and steered items)."""
    return str(judgment.detail["key"])


def rows_of(judgments: list[Judgment]) -> list[QuestionRow]:
    return [row for j in judgments if (row := row_of(j)) is not None]


# Paired comparisons (themis_dagster/comparisons): the whole population's representativeness and the
# refusal share are per-question scores (sign-flip test per question); the least/most represented
# group and the steering measures are statistics of many questions (paired bootstrap over questions).
PAIRED_METRICS = {
    "representativeness": Continuous(_default_score),
    "refusal_share": Continuous(_default_refusal),
    "representativeness_min": Ratio(rows_of, lambda units: metrics.mean_over_groups(units, np.min), unit=question_unit),
    "representativeness_max": Ratio(rows_of, lambda units: metrics.mean_over_groups(units, np.max), unit=question_unit),
    "steered_representativeness": Ratio(
        rows_of, lambda units: metrics.steering_of_units(units, "steered_representativeness"), unit=question_unit
    ),
    "steerability": Ratio(rows_of, lambda units: metrics.steering_of_units(units, "steerability"), unit=question_unit),
}
