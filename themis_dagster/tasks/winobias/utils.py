"""WinoBias by loglikelihood (task ``winobias``), in lm-eval's Winogender formulation as tasks/winogender scores it.

Per sentence (brackets removed) the context is ``"{sentence} ‘{Pronoun}’ refers to the"`` and
each of the two occupations is scored as the continuation ``" " + occupation``
(``target_delimiter``); the prediction is the argmax (the occupation named first in the sentence
wins a tie, as ``np.argmax`` picks the first). Items: ``data.py``; metrics: ``metrics.py``.
"""

from __future__ import annotations

from pydantic import Field

from themis_dagster.tasks.choices import choice_requests, choice_scores, first_argmax
from themis_dagster.tasks.rendering import render, template_sha256, template_text
from themis_dagster.tasks.spec import Item, Judgment, Request, Response
from themis_dagster.tasks.winobias import data
from themis_dagster.tasks.winobias.data import load_items
from themis_dagster.tasks.winobias.metrics import PAIRED_METRICS, compute_metrics

__all__ = ["PAIRED_METRICS", "Params", "build_requests", "compute_metrics", "judge", "load_items"]
CHOICES = ("first", "second")  # request suffixes: the occupation named first / second in the sentence


class Params(data.Params):
    template: str = Field(default="winobias_refers", min_length=1, description="Prompt (winobias_templates.yaml).")
    target_delimiter: str = Field(default=" ", max_length=4, description="Text between the prompt and each occupation.")


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """Two loglikelihood requests per sentence, ``<id>:first`` and ``<id>:second``, after a shared context."""
    digest = template_sha256(template_text(templates, params.template))
    requests = []
    for item in items:
        context = render(templates, params.template, sentence=item.fields["sentence"], pronoun=item.fields["pronoun"])
        continuations = {
            suffix: params.target_delimiter + occupation
            for suffix, occupation in zip(CHOICES, item.fields["choices"], strict=True)
        }
        requests += choice_requests(item, context, continuations, params.template, digest)
    return requests


def detail_of(item: Item) -> dict[str, object]:
    """What every judgment keeps: the set, the pair and the two occupations."""
    keys = ("type", "stereotype", "pair", "referent", "other", "pronoun")
    return {key: item.fields[key] for key in keys}


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """Per sentence: the likelier occupation, and whether it is the referent."""
    by_id = {response.request_id: response for response in responses}
    judgments = []
    for item in items:
        values, scores = choice_scores(by_id, item, CHOICES)
        detail = detail_of(item)
        if values is None:
            detail["loglikelihoods"] = scores
            judgments.append(Judgment(item.item_id, item.subset, "missing_response", None, False, detail))
            continue
        prediction = first_argmax(values)
        correct = prediction == item.fields["label"]
        detail |= {"loglikelihoods": values, "predicted": item.fields["choices"][prediction]}
        outcome = "correct" if correct else "wrong"
        judgments.append(Judgment(item.item_id, item.subset, outcome, 1.0 if correct else 0.0, True, detail))
    return judgments
