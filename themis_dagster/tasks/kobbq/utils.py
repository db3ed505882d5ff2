"""KoBBQ by loglikelihood (task ``kobbq``): the likeliest of the sample's three choices.

Prompt (``kobbq_templates.yaml``): the repository's prompt 1 labels without its lettered
options, ``"맥락: {{context}}\\n질문: {{question}}\\n정답:"``, each choice scored as
``" " + choice`` (as the ``bbq`` task), requests ``<sample_id>:c0`` .. ``c2``; the argmax (first
wins a tie) is the prediction, always one of the choices, so nothing is out of choice. Requests
and their reading are the multiple-choice kind's (``kinds/choices.py``); scores: ``metrics.py``.
"""

from __future__ import annotations

from pydantic import Field

from themis_dagster.kinds.choices import ChoiceBenchmark, LikeliestChoice
from themis_dagster.tasks.kobbq import metrics
from themis_dagster.tasks.kobbq.data import Params as DataParams
from themis_dagster.tasks.kobbq.data import load_items

__all__ = ["KOBBQ", "TASK", "Params", "load_items"]

KOBBQ = ChoiceBenchmark(
    load_items, metrics.answered, metrics.detail_of, metrics.compute_metrics, metrics.PAIRED_METRICS
)
"""KoBBQ's samples, answers and scores, asked here by loglikelihood and by ``generate_utils`` in a chat."""


class Params(DataParams):
    template: str = Field(default="kobbq_context", min_length=1, description="Context template (templates file).")
    target_delimiter: str = Field(default=" ", max_length=4, description="Text between context and each choice.")


TASK = LikeliestChoice(KOBBQ, Params, "choices", ids="c{k}")
