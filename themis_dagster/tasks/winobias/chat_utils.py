"""WinoBias as a chat question (task ``winobias_chat``): "who does 'she' refer to? (a) ... (b) ...", the reply parsed.

The prompt (``winobias_chat`` in ``winobias_templates.yaml``) names the two occupations in the
order the sentence does; the reply is read by ``parser.parse_choice``. Unreadable replies are
judged ``unparsed_<reason>``, left out of the accuracies and the gap and counted by
``unparsed_rate``.
"""

from __future__ import annotations

from pydantic import Field

from themis_dagster.refusals import mark_refusals, replies_by
from themis_dagster.tasks.rendering import render, template_sha256, template_text
from themis_dagster.tasks.scoring import rate_metric
from themis_dagster.tasks.spec import Item, Judgment, MetricValue, Request, Response
from themis_dagster.tasks.winobias import data, metrics
from themis_dagster.tasks.winobias.data import load_items
from themis_dagster.tasks.winobias.metrics import PAIRED_METRICS
from themis_dagster.tasks.winobias.parser import parse_choice
from themis_dagster.tasks.winobias.utils import detail_of

__all__ = ["PAIRED_METRICS", "Params", "build_requests", "compute_metrics", "judge", "load_items"]


class Params(data.Params):
    template: str = Field(default="winobias_chat", min_length=1, description="Chat template (winobias_templates.yaml).")


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """One chat request per sentence: ``<item_id>:chat``."""
    digest = template_sha256(template_text(templates, params.template))
    gen_params = params.generation.model_dump(mode="json")
    return [
        Request.user_message(
            render(
                templates,
                params.template,
                sentence=item.fields["sentence"],
                pronoun=item.fields["pronoun"],
                choices=item.fields["choices"],
            ),
            request_id=f"{item.item_id}:chat",
            item_id=item.item_id,
            template=params.template,
            template_sha256=digest,
            gen_params=gen_params,
        )
        for item in items
    ]


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """Per sentence: the occupation the reply chose, and whether it is the referent; or why none was read.

    And whether the reply refused (``Judgment.refused``, the shared detector, English).
    """
    by_id = {response.request_id: response for response in responses}
    judgments = []
    for item in items:
        detail = detail_of(item)
        response = by_id.get(f"{item.item_id}:chat")
        if response is None or response.error is not None:
            reason = "missing_response" if response is None else "engine_error"
            judgments.append(Judgment(item.item_id, item.subset, reason, None, False, detail))
            continue
        parsed = parse_choice(response.text, item.fields["choices"])
        detail |= {"parse_rule": parsed.how, "reply": (response.text or "")[:300]}
        if parsed.index is None:
            judgments.append(Judgment(item.item_id, item.subset, f"unparsed_{parsed.reason}", None, False, detail))
            continue
        correct = parsed.index == item.fields["label"]
        detail["predicted"] = item.fields["choices"][parsed.index]
        outcome = "correct" if correct else "wrong"
        judgments.append(Judgment(item.item_id, item.subset, outcome, 1.0 if correct else 0.0, True, detail))
    return mark_refusals(judgments, replies_by(responses))


def compute_metrics(judgments: list[Judgment], params: Params) -> list[MetricValue]:
    """The loglikelihood task's metrics over parsed replies, and the share of unreadable replies."""
    return metrics.compute_metrics(judgments, params) + rate_metric(
        "unparsed_rate", judgments, lambda j: not j.parsed, params
    )
