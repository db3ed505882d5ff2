"""BBQ as a chat question (task ``bbq_generate``): options as letters, the reply parsed.

The prompt (``bbq_chat`` in ``bbq_templates.yaml``) lists ans0..ans2 as A..C; the reply is
read by ``parser.parse_answer`` (letters in many shapes, else the answer text or an
UNKNOWN phrase). Unreadable replies are judged ``unparsed_<reason>`` and counted by
``unparsed_rate``; they are left out of accuracy and bias scores (``metrics.py``). Asking and
judging are the multiple-choice kind's chat variant (``kinds/lettered.py``).

Predictions imported from the BBQ repository's results files (``themis import bbq``, marked
``finish_reason == R_IMPORT``) are answer strings, matched to the options as the official R
script matches them (``r_matching.py``), not by the reply parser.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from themis_dagster.kinds.lettered import LetteredChoice
from themis_dagster.tasks.bbq.data import BBQParams
from themis_dagster.tasks.bbq.parser import ParsedAnswer, parse_answer
from themis_dagster.tasks.bbq.r_matching import match_prediction
from themis_dagster.tasks.bbq.utils import BBQ
from themis_dagster.tasks.spec import Item, Response

__all__ = ["R_IMPORT", "TASK", "Params", "judge", "read_reply"]

R_IMPORT = "imported_bbq_results"
"""``finish_reason`` of a prediction imported from BBQ's results format: matched as the R script matches."""


class Params(BBQParams):
    template: str = Field(default="bbq_chat", min_length=1, description="Chat template (bbq_templates.yaml).")


def read_reply(response: Response, answers: list[str], item: Item, params: Any) -> ParsedAnswer:
    """The option a reply chose (its answer texts and the UNKNOWN phrases read too); an imported prediction
    matched as the R script matches it (parse rule ``bbq_r:<how>``, ``no_match`` when none)."""
    if response.finish_reason == R_IMPORT:
        matched = match_prediction(response.text, answers, item.fields["answer_texts"])
        return ParsedAnswer(matched.index, "ok" if matched.index is not None else "no_match", f"bbq_r:{matched.how}")
    aliases = [[text] for text in item.fields["answer_texts"]]
    return parse_answer(response.text, answers, aliases, item.fields["unknown_loc"])


TASK = LetteredChoice(BBQ, Params, "answers", read=read_reply, record_errors=True)
judge = TASK.judge
"""The task's ``judge``, for callers that judge replies without loading the task."""
