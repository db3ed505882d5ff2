"""BBQ by loglikelihood (task ``bbq``): the model's answer is the likeliest of the three.

Prompt (lm-eval ``tasks/bbq/bbq_multiple_choice.yaml``): context
``"{{context}}\\n\\nQ: {{question}}\\nA:"`` and continuation ``" " + ansK`` for K = 0..2;
the prediction is ``argmax_K loglikelihood`` (lm-eval ``process_results_multiple_choice``;
the first answer wins a tie). Unlike lm-eval, which adds ten extra UNKNOWN wordings as
choices, only the dataset's three answers are scored (BBQ's own three-way setting).
Metrics: ``metrics.py``.
"""

from __future__ import annotations

from pydantic import Field

from themis_dagster.tasks.bbq.data import BBQParams, load_items
from themis_dagster.tasks.bbq.judge import answered, unanswered
from themis_dagster.tasks.bbq.metrics import PAIRED_METRICS, compute_metrics
from themis_dagster.tasks.choices import choice_requests, choice_scores, first_argmax
from themis_dagster.tasks.rendering import render, template_sha256, template_text
from themis_dagster.tasks.spec import Item, Judgment, Request, Response

__all__ = ["PAIRED_METRICS", "Params", "build_requests", "compute_metrics", "judge", "load_items"]
ANSWERS = ("ans0", "ans1", "ans2")


class Params(BBQParams):
    template: str = Field(default="bbq_context", min_length=1, description="Context template (bbq_templates.yaml).")
    target_delimiter: str = Field(default=" ", max_length=4, description="Text between context and each answer.")


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """Three loglikelihood requests per item: ``<item_id>:ans0`` .. ``<item_id>:ans2``."""
    digest = template_sha256(template_text(templates, params.template))
    requests = []
    for item in items:
        context = render(templates, params.template, context=item.fields["context"], question=item.fields["question"])
        answers = {f"ans{k}": params.target_delimiter + answer for k, answer in enumerate(item.fields["answers"])}
        requests += choice_requests(item, context, answers, params.template, digest)
    return requests


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """Per item: the answer with the highest loglikelihood; missing or non-finite scores -> ``missing_response``."""
    by_id = {response.request_id: response for response in responses}
    judgments = []
    for item in items:
        values, scores = choice_scores(by_id, item, ANSWERS)
        if values is None:
            judgments.append(unanswered(item, "missing_response", {"loglikelihoods": scores}))
            continue
        prediction = first_argmax(values)
        judgments.append(answered(item, prediction, {"loglikelihoods": values}))
    return judgments
