"""KoBBQ as a chat question (task ``kobbq_generate``): the repository's prompt 1 with choices A/B/C.

The prompt is ``evaluation/0_evaluation_prompts.tsv`` prompt 1 (``kobbq_chat``), the choices in
the file's order. The reply is read by the BBQ family's ``parser.parse_answer`` (a letter in many
shapes, else a choice's text) after Korean "정답/답" announcements are rewritten to the parser's
English words. A reply naming no choice is the repository's out-of-choice answer: judged
``unparsed_<reason>``, counted by ``ooc_ratio`` (its "out-of-choice ratio", over all samples)
and left out of the four scores, as ``evaluate_template`` drops ``ooc`` rows.
"""

from __future__ import annotations

import re

from pydantic import Field

from themis_dagster.refusals import mark_refusals, replies_by
from themis_dagster.tasks.bbq.chat_judging import judge_lettered_replies
from themis_dagster.tasks.bbq.rendering import lettered_chat_request
from themis_dagster.tasks.kobbq.data import load_items
from themis_dagster.tasks.kobbq.metrics import PAIRED_METRICS, answered, detail_of
from themis_dagster.tasks.kobbq.metrics import compute_metrics as scores
from themis_dagster.tasks.kobbq.utils import Params as LoglikelihoodParams
from themis_dagster.tasks.scoring import rate_metric
from themis_dagster.tasks.spec import Item, Judgment, MetricValue, Request, Response

__all__ = ["PAIRED_METRICS", "Params", "build_requests", "compute_metrics", "judge", "load_items"]
# "정답: B", "정답은 A입니다", "답변: C"
_ANNOUNCEMENT = re.compile(r"(?:정답|답변|답)\s*(?:은|는)?\s*:?")


class Params(LoglikelihoodParams):
    template: str = Field(default="kobbq_chat", min_length=1, description="Chat template (templates file).")


def english_announcements(reply: str | None) -> str | None:
    """The reply with Korean "answer" announcements read as the parser's English ones."""
    return None if reply is None else _ANNOUNCEMENT.sub(" answer is ", reply).replace("입니다", "")


def choice_by_text(reply: str | None, choices: list[str]) -> int | None:
    """The choice the reply's opening names by its text, as ``raw2prediction`` reads one: the reply up to its
    first full stop or line break, "없습니다" read as "없음" and "입니다" dropped, equal to a choice (case aside).

    The BBQ parser compares wordings in ASCII letters only, so a Korean choice's text is read here."""
    found = re.match(r"\s*\(?([^.\n]*)", reply or "")
    text = (found.group(1) if found else "").replace("없습니다", "없음").replace("입니다", "").strip().lower()
    lowered = [choice.lower() for choice in choices]
    return lowered.index(text) if text and text in lowered else None


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """One chat request per sample: ``<sample_id>:chat``."""
    gen_params = params.generation.model_dump(mode="json")
    return [
        lettered_chat_request(item, templates, params.template, list(item.fields["choices"]), gen_params)
        for item in items
    ]


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """Per sample: the choice the reply named, or why none could be read; and whether it refused."""
    judgments = judge_lettered_replies(
        items, responses, choices_field="choices", announcements=english_announcements, detail_of=detail_of,
        answered=answered, by_text=choice_by_text,
    )  # fmt: skip
    return mark_refusals(judgments, replies_by(responses), "ko")


def compute_metrics(judgments: list[Judgment], params: Params) -> list[MetricValue]:
    """The four scores over answered samples, and the out-of-choice ratio over all."""
    return scores(judgments, params) + rate_metric("ooc_ratio", judgments, lambda j: not j.parsed, params)
