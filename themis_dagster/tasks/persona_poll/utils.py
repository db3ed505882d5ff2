"""Persona polls by loglikelihood (task ``persona_poll``): each option's wordings scored after the persona's template.

Per persona the context is the set's template with ``{persona}`` filled in; every wording of every
option is one loglikelihood request ``<set>=<persona>:<option>#<k>`` (continuation ``delimiter +
wording``, sent consecutively so vLLM's prefix cache reuses the context). Each request records the
set's template as its template (``persona_poll:<set>`` and its sha256), and the persona prompt and
the wording are the request's text: both are part of its fingerprint. Judging: the option
distribution (``metrics.option_probabilities``); a persona missing any finite score is
``missing_response``, never guessed. Items: ``data.py``; the poll file: ``poll.py``.
"""

from __future__ import annotations

from themis_dagster.kinds.choices import choice_requests, choice_scores
from themis_dagster.tasks.persona_poll import metrics
from themis_dagster.tasks.persona_poll.data import Params, load_items
from themis_dagster.tasks.persona_poll.metrics import PAIRED_METRICS, PersonaAnswers
from themis_dagster.tasks.persona_poll.poll import fill
from themis_dagster.tasks.rendering import template_sha256
from themis_dagster.tasks.spec import Item, Judgment, MetricValue, Request, Response

__all__ = ["PAIRED_METRICS", "Params", "build_requests", "compute_metrics", "judge", "load_items"]


def suffixes(item: Item) -> dict[str, str]:
    """Request suffix -> wording, ``<option>#<k>`` for the k-th wording of each option."""
    return {
        f"{option}#{k}": wording
        for option, wordings in zip(item.fields["options"], item.fields["wordings"], strict=True)
        for k, wording in enumerate(wordings)
    }


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """One loglikelihood request per wording of each option after the persona's filled template."""
    requests = []
    for item in items:
        fields = item.fields
        context = fill(fields["template"], fields["persona"])
        continuations = {suffix: fields["delimiter"] + wording for suffix, wording in suffixes(item).items()}
        name = f"persona_poll:{fields['persona_set']}"
        requests += choice_requests(item, context, continuations, name, template_sha256(fields["template"]))
    return requests


def detail_of(item: Item) -> dict[str, object]:
    keys = ("poll", "persona_set", "persona", "options", "reference")
    return {key: item.fields[key] for key in keys}


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """Per persona: the option distribution, and its distance to the reference where the poll gives one."""
    by_id = {response.request_id: response for response in responses}
    judgments = []
    for item in items:
        detail = detail_of(item)
        values, scores = choice_scores(by_id, item, list(suffixes(item)))
        if values is None:
            detail["loglikelihoods"] = scores
            judgments.append(Judgment(item.item_id, item.subset, "missing_response", None, False, detail))
            continue
        grouped, position = [], 0
        for wordings in item.fields["wordings"]:
            grouped.append(values[position : position + len(wordings)])
            position += len(wordings)
        distribution = metrics.option_probabilities(grouped, item.fields["options"])
        detail |= {
            "loglikelihoods": grouped,
            "distribution": distribution,
            "likeliest": metrics.likeliest(distribution),
        }
        reference = item.fields["reference"]
        score = None
        if reference is not None:
            answers = PersonaAnswers("", "", item.fields["options"], distribution, reference, {})
            score = metrics.reference_distance(answers)
            detail |= {"reference_distance": score, "reference_agreement": metrics.reference_agreement(answers)}
        judgments.append(Judgment(item.item_id, item.subset, "scored", score, True, detail))
    return judgments


def answers_of(judgments: list[Judgment]) -> list[PersonaAnswers]:
    """Each scored persona's answers as the metrics read them."""
    return [
        PersonaAnswers(
            str(j.detail["persona_set"]),
            str(j.detail["persona"]),
            list(j.detail["options"]),
            dict(j.detail["distribution"]),
            j.detail.get("reference"),
            {},
        )
        for j in judgments
        if j.parsed and j.detail.get("distribution")
    ]


def compute_metrics(judgments: list[Judgment], params: Params) -> list[MetricValue]:
    """The poll's metrics (``metrics.py``) over the scored personas."""
    return metrics.poll_metrics(answers_of(judgments), params)
