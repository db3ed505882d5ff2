"""MBBQ as a chat question (task ``mbbq_generate``): the three answers as letters, in the item's language.

The prompt (``mbbq_chat_<lang>``) lists ans0, ans1, ans2 as A, B, C in the file's order (the
UNKNOWN answer sits in any position, as in BBQ); the reply is read by the BBQ task's
``parser.parse_answer`` (a letter in many shapes, else an option's text), after the item
language's words for "answer" / "option" are rewritten to the parser's English ones. (The
repository's own reader, ``mbbq.py::detect_answer``, relies on long phrase lists per model;
this reader is the project's one BBQ-family reader.) Unreadable replies are judged
``unparsed_<reason>``, counted by ``unparsed_rate`` and left out of the scores (mbbq.py gives
them NaN); every reply is checked for a refusal in its language.
"""

from __future__ import annotations

import re

from pydantic import Field

from themis_dagster.refusals import mark_refusals, replies_by
from themis_dagster.tasks.bbq.chat_judging import judge_lettered_replies
from themis_dagster.tasks.bbq.rendering import lettered_chat_request
from themis_dagster.tasks.mbbq.data import Params as DataParams
from themis_dagster.tasks.mbbq.data import load_items
from themis_dagster.tasks.mbbq.metrics import PAIRED_METRICS, answered, detail_of
from themis_dagster.tasks.mbbq.metrics import compute_metrics as bias_scores
from themis_dagster.tasks.scoring import rate_metric
from themis_dagster.tasks.spec import Item, Judgment, MetricValue, Request, Response

__all__ = ["PAIRED_METRICS", "Params", "build_requests", "compute_metrics", "judge", "load_items"]
# "La respuesta es A", "Het antwoord is B", "Cevap: C", "Opción A", "Seçenek B"
_ANNOUNCEMENT = re.compile(
    r"\b(?:respuesta|opci[oó]n|antwoord|optie|cevap|se[cç]enek)\b(?:\s+(?:es|is|correcta|juiste))*", re.IGNORECASE
)


class Params(DataParams):
    template: str = Field(
        default="mbbq_chat", min_length=1, description="Chat template prefix; '_<language>' is added per item."
    )


def english_announcements(reply: str | None) -> str | None:
    """The reply with Spanish/Dutch/Turkish "answer"/"option" words read as the parser's English ones."""
    return None if reply is None else _ANNOUNCEMENT.sub("answer is", reply)


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """One chat request per item: ``<item_id>:chat``."""
    gen_params = params.generation.model_dump(mode="json")
    return [
        lettered_chat_request(
            item, templates, f"{params.template}_{item.fields['language']}", list(item.fields["answers"]), gen_params
        )
        for item in items
    ]


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """Per item: the answer the reply chose, or why none could be read; and whether it refused, in its language."""
    judgments = judge_lettered_replies(
        items, responses, choices_field="answers", announcements=english_announcements, detail_of=detail_of,
        answered=answered,
    )  # fmt: skip
    replies = replies_by(responses)
    languages = {item.item_id: str(item.fields["language"]) for item in items}
    return [mark_refusals([j], replies, languages[j.item_id])[0] for j in judgments]


def compute_metrics(judgments: list[Judgment], params: Params) -> list[MetricValue]:
    """The six scores over parsed replies, and the share of unreadable replies."""
    return bias_scores(judgments, params) + rate_metric("unparsed_rate", judgments, lambda j: not j.parsed, params)
