"""CBBQ as a chat question (task ``cbbq_generate``): the repository's prompt with options A/B/C.

The prompt (``cbbq_chat``) is the evaluation scripts' instruction, "题目：" context, "问题：" question
and "选项：A.ans0 B.ans1 C.ans2", ending "答案：". The reply is read by the BBQ family's
``parser.parse_answer`` (a letter in many shapes) after "答案" announcements are rewritten to the
parser's English words, else by an option's Chinese text at the reply's opening (the BBQ parser
compares ASCII words only). Unreadable replies are judged ``unparsed_<reason>``, counted by
``unparsed_rate`` and left out of the scores (the scripts skip a prediction they cannot index).
"""

from __future__ import annotations

import re

from pydantic import Field

from themis_dagster.refusals import mark_refusals, replies_by
from themis_dagster.tasks.bbq.chat_judging import judge_lettered_replies
from themis_dagster.tasks.bbq.rendering import lettered_chat_request
from themis_dagster.tasks.cbbq.data import load_items
from themis_dagster.tasks.cbbq.metrics import PAIRED_METRICS, answered, detail_of
from themis_dagster.tasks.cbbq.metrics import compute_metrics as scores
from themis_dagster.tasks.cbbq.utils import Params as LoglikelihoodParams
from themis_dagster.tasks.scoring import rate_metric
from themis_dagster.tasks.spec import Item, Judgment, MetricValue, Request, Response

__all__ = ["PAIRED_METRICS", "Params", "build_requests", "compute_metrics", "judge", "load_items"]
# "答案：B", "答案是A", "正确答案为 C"
_ANNOUNCEMENT = re.compile(r"(?:正确)?(?:答案|选项)\s*(?:是|为)?\s*[:：]?")


class Params(LoglikelihoodParams):
    template: str = Field(default="cbbq_chat", min_length=1, description="Chat template (templates file).")


def english_announcements(reply: str | None) -> str | None:
    """The reply with Chinese "answer"/"option" announcements read as the parser's English ones."""
    return None if reply is None else _ANNOUNCEMENT.sub(" answer is ", reply)


def answer_by_text(reply: str | None, answers: list[str]) -> int | None:
    """The answer whose text the reply's opening (up to its first full stop or line break) is."""
    found = re.match(r"\s*([^。.\n]*)", reply or "")
    text = (found.group(1) if found else "").strip()
    return answers.index(text) if text and text in answers else None


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """One chat request per item: ``<item_id>:chat``."""
    gen_params = params.generation.model_dump(mode="json")
    return [
        lettered_chat_request(item, templates, params.template, list(item.fields["answers"]), gen_params)
        for item in items
    ]


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """Per item: the answer the reply chose, or why none could be read; and whether it refused."""
    judgments = judge_lettered_replies(
        items, responses, choices_field="answers", announcements=english_announcements, detail_of=detail_of,
        answered=answered, by_text=answer_by_text, by_text_rule="answer_text",
    )  # fmt: skip
    return mark_refusals(judgments, replies_by(responses), "zh")


def compute_metrics(judgments: list[Judgment], params: Params) -> list[MetricValue]:
    """The scores over parsed replies, and the share of unreadable replies."""
    return scores(judgments, params) + rate_metric("unparsed_rate", judgments, lambda j: not j.parsed, params)
