"""OpinionQA as sampled chat answers (task ``opinions_qa_chat``): each question asked K times, the answers counted.

The user message is ``opinions_chat`` (the loglikelihood task's prompt, asking for a letter) after
the item's persona prompt; sample k is ``<item_id>:<k>``, seeded ``generation.seed + k``
(``persona_poll/sampling.py``). Each reply is read as one option (by letter or by its text);
``D_M`` is the share of the readable replies that chose each ordinal option, and the refusal
share ``R_M`` the share of replies that chose a non-ordinal option ("Refused", ...) or declined
to answer (the shared refusal detector, no option read), over the replies that did either or
chose an option. Every reply is kept as a judgment and each refusal counted (``refused_rate``).
Metrics as the loglikelihood task's, plus ``unparsed_rate``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from themis_dagster.tasks.measures import Ratio, mean_of
from themis_dagster.tasks.opinions_qa import data, metrics
from themis_dagster.tasks.opinions_qa.data import load_items
from themis_dagster.tasks.opinions_qa.metrics import DEFAULT, QuestionRow
from themis_dagster.tasks.opinions_qa.survey import OVERALL
from themis_dagster.tasks.opinions_qa.utils import group_reps, prompt_of
from themis_dagster.tasks.persona_poll import sampling
from themis_dagster.tasks.rendering import template_sha256, template_text
from themis_dagster.tasks.scoring import rate_metric
from themis_dagster.tasks.spec import Item, Judgment, MetricValue, Request, Response

__all__ = ["PAIRED_METRICS", "Params", "build_requests", "compute_metrics", "judge", "load_items"]


class Params(data.Params):
    template: str = Field(default="opinions_chat", min_length=1, description="The question prompt (templates file).")
    samples: int = Field(default=10, ge=1, le=1000, description="Sampled answers per question and context.")


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """K chat requests per item, sample k seeded ``generation.seed + k``."""
    digest = template_sha256(template_text(templates, params.template))
    return sampling.sample_requests(
        items, params.samples, params.generation, lambda item: (None, prompt_of(item, templates, params.template)),
        params.template, digest,
    )  # fmt: skip


def detail_of(item: Item) -> dict[str, Any]:
    keys = ("key", "style", "steer_group", "topics", "ordinal", "options", "human")
    return {key: item.fields[key] for key in keys} | {"human_refusal": item.fields["human_refusal"].get(OVERALL)}


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """One judgment per sampled reply: the option it chose, or why none was read; refusals marked."""
    return sampling.judge_samples(
        items, responses, params.samples, lambda item: [[o] for o in item.fields["options"]], detail_of
    )


def row_of(samples: list[Judgment]) -> QuestionRow | None:
    """One item's samples as the metrics read them; None when no reply chose an ordinal option."""
    d = samples[0].detail
    n_ordinal = len(d["ordinal"])
    counts = sampling.choice_counts(samples, len(d["options"]))
    declined = sum(1 for j in samples if not j.parsed and j.refused)
    if sum(counts[:n_ordinal]) == 0:
        return None
    d_model = [count / sum(counts[:n_ordinal]) for count in counts[:n_ordinal]]
    refusal = (sum(counts[n_ordinal:]) + declined) / (sum(counts) + declined)
    reps = group_reps(d, d_model)
    return QuestionRow(d["key"], d["style"], d["steer_group"], tuple(d["topics"]), reps, refusal, d["human_refusal"])


def rows_of(judgments: list[Judgment]) -> list[QuestionRow]:
    """Each item's row from its samples (items whose every sample failed or went unread left out)."""
    return [row for samples in sampling.by_unit(judgments).values() if (row := row_of(samples)) is not None]


def compute_metrics(judgments: list[Judgment], params: Params) -> list[MetricValue]:
    """The loglikelihood task's metrics over the sampled distributions, and the share of unreadable replies."""
    return metrics.question_metrics(rows_of(judgments), params) + rate_metric(
        "unparsed_rate", judgments, lambda j: not j.parsed, params
    )


def _whole_population(judgments: list[Judgment]) -> float | None:
    rows = [row for row in rows_of(judgments) if row.style == DEFAULT]
    return rows[0].reps.get(OVERALL) if rows else None


def _refusal(judgments: list[Judgment]) -> float | None:
    rows = [row for row in rows_of(judgments) if row.style == DEFAULT]
    return rows[0].refusal if rows else None


def _item(judgment: Judgment) -> str:
    return str(judgment.detail["unit"])


def _question(judgment: Judgment) -> str:
    return str(judgment.detail["key"])


# Paired comparisons: an item's samples are one unit (the whole population's representativeness and
# the refusal share per question); the least/most represented group and the steering measures are
# statistics of many questions (paired bootstrap over questions).
PAIRED_METRICS = {
    "representativeness": Ratio(_whole_population, mean_of, unit=_item),
    "refusal_share": Ratio(_refusal, mean_of, unit=_item),
    "representativeness_min": Ratio(rows_of, lambda units: metrics.mean_over_groups(units, np.min), unit=_question),
    "representativeness_max": Ratio(rows_of, lambda units: metrics.mean_over_groups(units, np.max), unit=_question),
    "steered_representativeness": Ratio(
        rows_of, lambda units: metrics.steering_of_units(units, "steered_representativeness"), unit=_question
    ),
    "steerability": Ratio(rows_of, lambda units: metrics.steering_of_units(units, "steerability"), unit=_question),
}
