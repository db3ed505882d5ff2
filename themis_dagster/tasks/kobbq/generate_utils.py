"""KoBBQ as a chat question (task ``kobbq_generate``): the repository's prompt 1 with choices A/B/C, in rotations.

The prompt is ``evaluation/0_evaluation_prompts.tsv`` prompt 1 (``kobbq_chat``). As the repository's
``1_preprocess.py``, each sample is asked ``rotations`` times (3, the protocol), its choices in the
rows of their circulant matrix, so the unknown choice stands once as A, once as B, once as C
(``data.rotated``: items ``<sample_id>-<k>``, the rotation and the unknown's letter kept in each item
and judgment); ``rotations: 1`` asks each sample once in the file's order (the unknown always C).

Each reply has two readings (``kinds/lettered.py``): ``official``, the repository's
``3_postprocess_predictions.py::raw2prediction`` (``parser.py``), and ``themis``, the BBQ family's
``parser.parse_answer`` (a letter in many shapes) after Korean "정답/답" announcements are rewritten
to the parser's English words, else a choice's text at the reply's opening (``choice_by_text``).
``reading`` (default ``official``) picks the one the scores use. A reply naming no choice is the
repository's out-of-choice answer: judged ``unparsed_<reason>``, counted by ``ooc_ratio`` (over all
answers, per category and per label annotation) and left out of the four scores, as
``evaluate_template`` drops ``ooc`` rows; the position bias is reported beside (``metrics.py``).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from pydantic import Field, field_validator

from themis_dagster.kinds.lettered import LetteredChoice, ReadingParams
from themis_dagster.tasks.bbq.parser import announced_reader
from themis_dagster.tasks.kobbq import data, metrics, parser
from themis_dagster.tasks.kobbq.utils import KOBBQ
from themis_dagster.tasks.kobbq.utils import Params as LoglikelihoodParams
from themis_dagster.tasks.spec import Item

__all__ = ["TASK", "Params", "choice_by_text", "english_announcements", "load_items"]
# "정답: B", "정답은 A입니다", "답변: C"
_ANNOUNCEMENT = re.compile(r"(?:정답|답변|답)\s*(?:은|는)?\s*:?")


class Params(LoglikelihoodParams, ReadingParams):
    template: str = Field(default="kobbq_chat", min_length=1, description="Chat template (templates file).")
    rotations: int = Field(
        default=3, ge=1, le=3,
        description="Orders each sample is asked in: 3, 1_preprocess.py's (the unknown choice once as A, B and C), "
        "or 1, the file's order only.",
    )  # fmt: skip

    @field_validator("rotations")
    @classmethod
    def _whole_rotation(cls, value: int) -> int:
        if value == 2:
            raise ValueError("2 orders leave the unknown choice out of one position: use 3 (the protocol) or 1")
        return value


def load_items(files: dict[str, Path], params: Params) -> list[Item]:
    """The samples (``data.load_items``), each in its ``rotations`` orders."""
    return data.rotated(data.load_items(files, params), params.rotations)


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


KOBBQ_CHAT = dataclasses.replace(KOBBQ, load_items=load_items, compute_metrics=metrics.chat_metrics)
"""KoBBQ asked in rotations, with the out-of-choice ratio and the position bias beside its scores."""

TASK = LetteredChoice(
    KOBBQ_CHAT, Params, "choices", read=announced_reader(english_announcements, choice_by_text),
    official=parser.official_reading, language="ko",
)  # fmt: skip
