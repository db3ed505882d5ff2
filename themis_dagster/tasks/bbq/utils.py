"""BBQ by loglikelihood (task ``bbq``): the model's answer is the likeliest of the three.

Prompt (lm-eval ``tasks/bbq/bbq_multiple_choice.yaml``): context
``"{{context}}\\n\\nQ: {{question}}\\nA:"`` and continuation ``" " + ansK`` for K = 0..2;
the prediction is ``argmax_K loglikelihood`` (lm-eval ``process_results_multiple_choice``;
the first answer wins a tie). Unlike lm-eval, which adds ten extra UNKNOWN wordings as
choices, only the dataset's three answers are scored (BBQ's own three-way setting).
Metrics: ``metrics.py``.
"""

from __future__ import annotations

import math

from pydantic import Field

from themis_dagster.tasks.bbq.data import BBQParams, load_items
from themis_dagster.tasks.bbq.judging import answered, unanswered
from themis_dagster.tasks.bbq.metrics import PAIRED_METRICS, compute_metrics
from themis_dagster.tasks.bbq.rendering import render, sha256, template_text
from themis_dagster.tasks.spec import Item, Judgment, Request, Response

__all__ = ["PAIRED_METRICS", "Params", "build_requests", "compute_metrics", "judge", "load_items"]


class Params(BBQParams):
    template: str = Field(default="bbq_context", min_length=1, description="Context template (bbq_templates.yaml).")
    target_delimiter: str = Field(default=" ", max_length=4, description="Text between context and each answer.")


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """Three loglikelihood requests per item: ``<item_id>:ans0`` .. ``<item_id>:ans2``."""
    digest = sha256(template_text(templates, params.template))
    requests = []
    for item in items:
        context = render(templates, params.template, context=item.fields["context"], question=item.fields["question"])
        for k, answer in enumerate(item.fields["answers"]):
            requests.append(
                Request(
                    request_id=f"{item.item_id}:ans{k}",
                    item_id=item.item_id,
                    request_type="loglikelihood",
                    context=context,
                    continuation=params.target_delimiter + answer,
                    template=params.template,
                    template_sha256=digest,
                )
            )
    return requests


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """Per item: the answer with the highest loglikelihood; missing or non-finite scores -> ``missing_response``."""
    by_id = {response.request_id: response for response in responses}
    judgments = []
    for item in items:
        found = [by_id.get(f"{item.item_id}:ans{k}") for k in range(3)]
        scores = [r.logprob if r is not None and r.error is None else None for r in found]
        if any(score is None or not math.isfinite(score) for score in scores):
            judgments.append(unanswered(item, "missing_response", {"loglikelihoods": scores}))
            continue
        values = [float(score) for score in scores if score is not None]
        prediction = max(range(3), key=lambda k: (values[k], -k))
        judgments.append(answered(item, prediction, {"loglikelihoods": values}))
    return judgments
