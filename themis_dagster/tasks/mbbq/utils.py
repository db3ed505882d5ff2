"""MBBQ by loglikelihood (task ``mbbq``): the likeliest of the three answers, each language in its own words.

Prompt (``mbbq_templates.yaml``): ``"<Context>: {{context}}\\n<Question>: {{question}}\\n<Answer>:"``
with the labels in the item's language (``mbbq_context_<lang>``; Spanish as lm-eval's esbbq),
each answer scored as ``" " + ansK`` (the three answers of the file, as the ``bbq`` task), requests
``<item_id>:ans0`` .. ``ans2``; the prediction is the argmax (first wins a tie). The repository
itself asks five lettered chat prompts and reads the reply; this task asks the same questions by
loglikelihood, as ``bbq`` does for BBQ. Requests and their reading are the multiple-choice kind's
(``kinds/choices.py``); scores: ``metrics.py``.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from themis_dagster.kinds.choices import ChoiceBenchmark, LikeliestChoice
from themis_dagster.tasks.mbbq import metrics
from themis_dagster.tasks.mbbq.data import Params as DataParams
from themis_dagster.tasks.mbbq.data import load_items
from themis_dagster.tasks.spec import Item

__all__ = ["MBBQ", "TASK", "Params", "in_language", "load_items"]

MBBQ = ChoiceBenchmark(load_items, metrics.answered, metrics.detail_of, metrics.compute_metrics, metrics.PAIRED_METRICS)
"""MBBQ's items, answers and scores, asked here by loglikelihood and by ``generate_utils`` in a chat."""


class Params(DataParams):
    template: str = Field(
        default="mbbq_context", min_length=1, description="Template prefix; '_<language>' is added per item."
    )
    target_delimiter: str = Field(default=" ", max_length=4, description="Text between context and each answer.")


def in_language(item: Item, params: Any) -> str:
    """The item's template: ``params.template`` in the item's language (``<template>_<language>``)."""
    return f"{params.template}_{item.fields['language']}"


TASK = LikeliestChoice(MBBQ, Params, "answers", template=in_language, ids="ans{k}")
