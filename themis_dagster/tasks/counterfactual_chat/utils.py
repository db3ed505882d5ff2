"""Counterfactual chat (task ``counterfactual_chat``): the same request asked in the first person by different users.

As OpenAI's first-person fairness study (Eloundou et al., 2024, arXiv 2410.19803) asks the same
request under different user names, and COMPL-AI's counterfactual assessment under different
stated identities: each item is one request asked by user a and user b of an identity axis
(``data.py``); every reply is kept. ``judge`` reads what needs no judge (refusals by the one
refusal detector, reply lengths); the ``SECOND_OPINION`` (``second_opinion.py``) asks a
registered judge model the pairwise question in both orders and each reply's regard, and embeds
both replies; ``metrics.py`` turns them into the measures, paired by request.
"""

from __future__ import annotations

from pathlib import Path

from themis_dagster.errors import load_yaml
from themis_dagster.refusals import detect_refusal
from themis_dagster.tasks.counterfactual_chat.data import Params, load_items
from themis_dagster.tasks.counterfactual_chat.judge import reply_text
from themis_dagster.tasks.counterfactual_chat.metrics import PAIRED_METRICS, compute_metrics, pair_detail
from themis_dagster.tasks.counterfactual_chat.second_opinion import CounterfactualJudge
from themis_dagster.tasks.rendering import compile_template, template_sha256
from themis_dagster.tasks.spec import Item, Judgment, Request, Response

__all__ = [
    "PAIRED_METRICS",
    "SECOND_OPINION",
    "Params",
    "build_requests",
    "compute_metrics",
    "judge",
    "load_items",
]

LANGUAGE = "en"


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """Two chat requests per item, ``<item>:a`` and ``<item>:b``: the request in its framing, from each user."""
    framings = params.request_set().framings
    gen_params = params.generation.model_dump(mode="json")
    requests = []
    for item in items:
        name = item.fields["framing"]
        framing = framings[name]
        for side in ("a", "b"):
            content = compile_template(framing).render(
                identity=item.fields[f"identity_{side}"], request=item.fields["request"]
            )
            requests.append(
                Request.user_message(
                    content,
                    f"{item.item_id}:{side}",
                    item.item_id,
                    f"framing_{name}",
                    template_sha256(framing),
                    gen_params,
                )
            )
    return requests


def _refused(reply: str | None) -> bool | None:
    return None if reply is None else detect_refusal(reply, LANGUAGE).refused


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """One judgment per pair: both replies (their answers only), each one's refusal and length.

    A pair missing either reply (a failed request, a reasoning model's reply that is no answer) is
    ``missing_response`` and compared by no one; the others wait for the judge (``unjudged``, score
    None) or stay so without one. ``refused``: either reply refuses (``refused_rate`` counts pairs).
    """
    by_id = {response.request_id: response for response in responses}
    judgments = []
    for item in items:
        replies = (reply_text(by_id.get(f"{item.item_id}:a")), reply_text(by_id.get(f"{item.item_id}:b")))
        refused = (_refused(replies[0]), _refused(replies[1]))
        detail = pair_detail(item.fields, replies, refused)
        complete = None not in replies
        any_refused = None if not complete else bool(refused[0] or refused[1])
        outcome = "unjudged" if complete else "missing_response"
        judgments.append(Judgment(item.item_id, item.subset, outcome, None, complete, detail, any_refused))
    return judgments


TEMPLATES = load_yaml(Path(__file__).with_name("counterfactual_chat_templates.yaml").read_text(encoding="utf-8"))
SECOND_OPINION = CounterfactualJudge(TEMPLATES)
