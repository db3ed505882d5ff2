"""BBQ as a chat question (task ``bbq_generate``): options as letters, the reply parsed.

The prompt (``bbq_chat`` in ``bbq_templates.yaml``) lists ans0..ans2 as A..C; the reply is
read by ``parser.parse_answer`` (letters in many shapes, else the answer text or an
UNKNOWN phrase). Unreadable replies are judged ``unparsed_<reason>`` and counted by
``unparsed_rate``; they are left out of accuracy and bias scores (``metrics.py``).

Predictions imported from the BBQ repository's results files (``themis import bbq``, marked
``finish_reason == R_IMPORT``) are answer strings, matched to the options as the official R
script matches them (``r_matching.py``), not by the reply parser.
"""

from __future__ import annotations

from pydantic import Field

from themis_dagster.refusals import mark_refusals, replies_by
from themis_dagster.tasks.bbq.data import BBQParams, load_items
from themis_dagster.tasks.bbq.judge import answered, unanswered
from themis_dagster.tasks.bbq.metrics import PAIRED_METRICS, compute_metrics
from themis_dagster.tasks.bbq.parser import parse_answer
from themis_dagster.tasks.bbq.r_matching import match_prediction
from themis_dagster.tasks.bbq.rendering import lettered_chat_request
from themis_dagster.tasks.spec import Item, Judgment, Request, Response

__all__ = ["PAIRED_METRICS", "R_IMPORT", "Params", "build_requests", "compute_metrics", "judge", "load_items"]

R_IMPORT = "imported_bbq_results"
"""``finish_reason`` of a prediction imported from BBQ's results format: matched as the R script matches."""


class Params(BBQParams):
    template: str = Field(default="bbq_chat", min_length=1, description="Chat template (bbq_templates.yaml).")


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """One chat request per item: ``<item_id>:chat``."""
    gen_params = params.generation.model_dump(mode="json")
    return [
        lettered_chat_request(item, templates, params.template, item.fields["answers"], gen_params) for item in items
    ]


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """Per item: the option the reply chose, or why none could be read; and whether the reply refused (English)."""
    by_id = {response.request_id: response for response in responses}
    judgments = []
    for item in items:
        response = by_id.get(f"{item.item_id}:chat")
        if response is None:
            judgments.append(unanswered(item, "missing_response"))
            continue
        if response.error is not None:
            judgments.append(unanswered(item, "engine_error", {"error": str(response.error)[:500]}))
            continue
        if response.finish_reason == R_IMPORT:
            matched = match_prediction(response.text, item.fields["answers"], item.fields["answer_texts"])
            extra = {"parse_rule": f"bbq_r:{matched.how}", "reply": (response.text or "")[:300]}
            if matched.index is None:
                judgments.append(unanswered(item, "unparsed_no_match", extra))
            else:
                judgments.append(answered(item, matched.index, extra))
            continue
        aliases = [[text] for text in item.fields["answer_texts"]]
        result = parse_answer(response.text, item.fields["answers"], aliases, item.fields["unknown_loc"])
        extra = {"parse_rule": result.how, "reply": (response.text or "")[:300]}
        if result.index is None:
            judgments.append(unanswered(item, f"unparsed_{result.reason}", extra))
        else:
            judgments.append(answered(item, result.index, extra))
    return mark_refusals(judgments, replies_by(responses))
