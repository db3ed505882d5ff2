"""KoBBQ as a chat question (task ``kobbq_generate``): the repository's prompt 1 with choices A/B/C.

The prompt is ``evaluation/0_evaluation_prompts.tsv`` prompt 1 (``kobbq_chat``), the choices in
the file's order. The reply is read by the BBQ family's ``parser.parse_answer`` (a letter in many
shapes) after Korean "정답/답" announcements are rewritten to the parser's English words, else by
a choice's text (``choice_by_text``). A reply naming no choice is the repository's out-of-choice
answer: judged ``unparsed_<reason>``, counted by ``ooc_ratio`` (its "out-of-choice ratio", over
all samples) and left out of the four scores, as ``evaluate_template`` drops ``ooc`` rows. Asking
and judging are the multiple-choice kind's chat variant (``kinds/lettered.py``).
"""

from __future__ import annotations

import re

from pydantic import Field

from themis_dagster.kinds.lettered import LetteredChoice
from themis_dagster.tasks.bbq.parser import announced_reader
from themis_dagster.tasks.kobbq.utils import KOBBQ
from themis_dagster.tasks.kobbq.utils import Params as LoglikelihoodParams

__all__ = ["TASK", "Params", "choice_by_text", "english_announcements"]
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


TASK = LetteredChoice(
    KOBBQ, Params, "choices", read=announced_reader(english_announcements, choice_by_text), language="ko",
    unread_metric="ooc_ratio",
)  # fmt: skip
