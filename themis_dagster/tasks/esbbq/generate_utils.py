"""EsBBQ / CaBBQ as a chat question (tasks ``esbbq_generate``, ``cabbq_generate``): options as letters.

The prompt (``esbbq_chat`` / ``cabbq_chat``) lists ans0, ans1 and the first UNKNOWN wording
as A, B, C; the reply is read by the BBQ task's ``parser.parse_answer`` (a letter in
many shapes, else an option's text; any of lm-eval's nine UNKNOWN wordings names C).
Unreadable replies are judged ``unparsed_<reason>``, counted by ``unparsed_rate`` and left out
of the four scores, which are ``metrics.py``'s (the repository's ``bias_score.py``). Refusals
are read in the task's language (``params.language``). Asking and judging are the
multiple-choice kind's chat variant (``kinds/lettered.py``).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from themis_dagster.kinds.lettered import LetteredChoice
from themis_dagster.tasks.bbq.parser import ParsedAnswer, parse_answer
from themis_dagster.tasks.esbbq.utils import ESBBQ
from themis_dagster.tasks.esbbq.utils import Params as LoglikelihoodParams
from themis_dagster.tasks.spec import Item, Response

__all__ = ["TASK", "Params", "english_announcements", "options", "read_reply"]
# "La respuesta es A", "Resposta: B", "Opción C": the parser's announcements are English words
_ANNOUNCEMENT = re.compile(r"\b(?:respuesta|resposta|opci[oó]n?)\b(?:\s+(?:es|és|correcta))*", re.IGNORECASE)


def english_announcements(reply: str | None) -> str | None:
    """The reply with Spanish/Catalan "answer"/"option" words read as the parser's English ones."""
    return None if reply is None else _ANNOUNCEMENT.sub("answer is", reply)


class Params(LoglikelihoodParams):
    template: str = Field(default="esbbq_chat", min_length=1, description="Chat template (templates file).")


def options(item: Item, params: Params) -> list[str]:
    return [item.fields["ans0"], item.fields["ans1"], params.unknown_answers[0]]


def read_reply(response: Response, choices: list[str], item: Item, params: Params) -> ParsedAnswer:
    """The option the reply names; any of the nine UNKNOWN wordings names C."""
    aliases = [[], [], list(params.unknown_answers)]
    return parse_answer(english_announcements(response.text), choices, aliases, None)


def _language(item: Item, params: Any) -> str:
    return str(params.language)


TASK = LetteredChoice(ESBBQ, Params, options, read=read_reply, language=_language, unread_metric="unparsed_rate")
