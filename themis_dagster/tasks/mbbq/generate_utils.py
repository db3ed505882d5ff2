"""MBBQ as a chat question (task ``mbbq_generate``): the three answers as letters, in the item's language.

The prompt (``mbbq_chat_<lang>``) lists ans0, ans1, ans2 as A, B, C in the file's order (the
UNKNOWN answer sits in any position, as in BBQ). Each reply has two readings (``kinds/lettered.py``):
``official``, the repository's ``mbbq.py::detect_answer`` (``parser.py``: an option's text before a
letter, so "B. Jackson" is Jackson's option; its phrase lists in the item's language), and
``themis``, the BBQ task's ``parser.parse_answer`` (a letter in many shapes, else an option's text)
after the item language's words for "answer" / "option" are rewritten to the parser's English
ones. ``reading`` (default ``official``) picks the one the scores use. Unreadable replies are
judged ``unparsed_<reason>``, counted by ``unparsed_rate`` and left out of the scores (mbbq.py
gives them NaN); every reply is checked for a refusal in its language. Asking and judging are the
multiple-choice kind's chat variant (``kinds/lettered.py``).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from themis_dagster.kinds.lettered import LetteredChoice, ReadingParams
from themis_dagster.tasks.bbq.parser import announced_reader
from themis_dagster.tasks.mbbq import parser
from themis_dagster.tasks.mbbq.data import Params as DataParams
from themis_dagster.tasks.mbbq.utils import MBBQ, in_language
from themis_dagster.tasks.spec import Item

__all__ = ["TASK", "Params", "english_announcements"]
# "La respuesta es A", "Het antwoord is B", "Cevap: C", "Opción A", "Seçenek B"
_ANNOUNCEMENT = re.compile(
    r"\b(?:respuesta|opci[oó]n|antwoord|optie|cevap|se[cç]enek)\b(?:\s+(?:es|is|correcta|juiste))*", re.IGNORECASE
)


class Params(DataParams, ReadingParams):
    template: str = Field(
        default="mbbq_chat", min_length=1, description="Chat template prefix; '_<language>' is added per item."
    )


def english_announcements(reply: str | None) -> str | None:
    """The reply with Spanish/Dutch/Turkish "answer"/"option" words read as the parser's English ones."""
    return None if reply is None else _ANNOUNCEMENT.sub("answer is", reply)


def _language(item: Item, params: Any) -> str:
    return str(item.fields["language"])


TASK = LetteredChoice(
    MBBQ, Params, "answers", template=in_language, read=announced_reader(english_announcements),
    official=parser.official_reading, language=_language, unread_metric="unparsed_rate",
)  # fmt: skip
