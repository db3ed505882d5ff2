"""WinoBias as a chat question (task ``winobias_chat``): "who does 'she' refer to? (a) ... (b) ...", the reply parsed.

The prompt (``winobias_chat`` in ``winobias_templates.yaml``) names the two occupations in the
order the sentence does; the reply is read by ``parser.parse_choice``. Unreadable replies are
judged ``unparsed_<reason>``, left out of the accuracies and the gap and counted by
``unparsed_rate``. Asking and judging are the multiple-choice kind's chat variant
(``kinds/lettered.py``), the loglikelihood task's metrics over parsed replies.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from themis_dagster.kinds.lettered import LetteredChoice
from themis_dagster.tasks.spec import Item, Response
from themis_dagster.tasks.winobias import data
from themis_dagster.tasks.winobias.parser import ParsedChoice, parse_choice
from themis_dagster.tasks.winobias.utils import WINOBIAS

__all__ = ["TASK", "Params", "read_reply"]


class Params(data.Params):
    template: str = Field(default="winobias_chat", min_length=1, description="Chat template (winobias_templates.yaml).")


def read_reply(response: Response, choices: list[str], item: Item, params: Any) -> ParsedChoice:
    """The occupation the reply chose, (a) or (b)."""
    return parse_choice(response.text, choices)


TASK = LetteredChoice(
    WINOBIAS, Params, "choices", ("sentence", "pronoun", "choices"), read=read_reply, letters="ab",
    unread_metric="unparsed_rate",
)  # fmt: skip
