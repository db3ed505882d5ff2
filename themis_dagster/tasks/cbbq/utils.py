"""CBBQ by loglikelihood (task ``cbbq``): the likeliest of the three answers.

Prompt (``cbbq_templates.yaml``): the labels of the repository's evaluation prompt,
``"题目：{{context}}\\n问题：{{question}}\\n答案："``, each answer scored as its continuation with
no delimiter (Chinese has no spaces between words), requests ``<item_id>:ans0`` .. ``ans2``; the
argmax (first wins a tie) is the answer. (The repository's scripts generate a letter per option;
this task asks by loglikelihood, as ``bbq`` does.) Requests and their reading are the
multiple-choice kind's (``kinds/choices.py``); scores: ``metrics.py``.
"""

from __future__ import annotations

from pydantic import Field

from themis_dagster.kinds.choices import ChoiceBenchmark, LikeliestChoice
from themis_dagster.tasks.cbbq import metrics
from themis_dagster.tasks.cbbq.data import Params as DataParams
from themis_dagster.tasks.cbbq.data import load_items

__all__ = ["CBBQ", "TASK", "Params", "load_items"]

CBBQ = ChoiceBenchmark(load_items, metrics.answered, metrics.detail_of, metrics.compute_metrics, metrics.PAIRED_METRICS)
"""CBBQ's items, answers and scores, asked here by loglikelihood and by ``generate_utils`` in a chat."""


class Params(DataParams):
    template: str = Field(default="cbbq_context", min_length=1, description="Context template (templates file).")
    target_delimiter: str = Field(default="", max_length=4, description="Text between context and each answer.")


TASK = LikeliestChoice(CBBQ, Params, "answers", ids="ans{k}")
