"""CBBQ as a chat question (task ``cbbq_generate``): the repository's prompt with options A/B/C.

The prompt (``cbbq_chat``) is the evaluation scripts' instruction, "题目：" context, "问题：" question
and "选项：A.ans0 B.ans1 C.ans2", ending "答案：". The reply is read by the BBQ family's
``parser.parse_answer`` (a letter in many shapes) after "答案" announcements are rewritten to the
parser's English words, else by an option's Chinese text at the reply's opening (the BBQ parser
compares ASCII words only): the ``themis`` reading, the default. The scripts' own test, a letter
anywhere in the lower-cased reply (``parser.py``), is kept beside it as the ``official`` reading
(``reading: official`` scores by it); it counts nearly every reply, so it is not the default
(docs/benchmark-families.md, CBBQ). Unreadable replies are judged ``unparsed_<reason>``, counted by
``unparsed_rate`` and left out of the scores. Asking and judging are the multiple-choice kind's chat
variant (``kinds/lettered.py``).
"""

from __future__ import annotations

import re

from pydantic import Field

from themis_dagster.kinds.lettered import LetteredChoice, ReadingName, ReadingParams
from themis_dagster.tasks.bbq.parser import announced_reader
from themis_dagster.tasks.cbbq import parser
from themis_dagster.tasks.cbbq.utils import CBBQ
from themis_dagster.tasks.cbbq.utils import Params as LoglikelihoodParams

__all__ = ["TASK", "Params", "answer_by_text", "english_announcements"]
# "答案：B", "答案是A", "正确答案为 C"
_ANNOUNCEMENT = re.compile(r"(?:正确)?(?:答案|选项)\s*(?:是|为)?\s*[:：]?")


class Params(LoglikelihoodParams, ReadingParams):
    template: str = Field(default="cbbq_chat", min_length=1, description="Chat template (templates file).")
    reading: ReadingName = Field(
        default="themis",
        description="Which reading the scores use: 'themis' (the project's parser) or 'official' (the scripts' "
        "letter anywhere in the reply, which nearly every reply passes); both are kept in every judgment.",
    )


def english_announcements(reply: str | None) -> str | None:
    """The reply with Chinese "answer"/"option" announcements read as the parser's English ones."""
    return None if reply is None else _ANNOUNCEMENT.sub(" answer is ", reply)


def answer_by_text(reply: str | None, answers: list[str]) -> int | None:
    """The answer whose text the reply's opening (up to its first full stop or line break) is."""
    found = re.match(r"\s*([^。.\n]*)", reply or "")
    text = (found.group(1) if found else "").strip()
    return answers.index(text) if text and text in answers else None


TASK = LetteredChoice(
    CBBQ, Params, "answers", read=announced_reader(english_announcements, answer_by_text, "answer_text"),
    official=parser.official_reading, language="zh", unread_metric="unparsed_rate",
)  # fmt: skip
