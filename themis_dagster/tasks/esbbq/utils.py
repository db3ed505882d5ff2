"""EsBBQ / CaBBQ by loglikelihood (tasks ``esbbq``, ``cabbq``), as lm-eval 0.4.13's ``esbbq_*`` / ``cabbq_*``.

Prompt (lm-eval ``tasks/esbbq/_esbbq_common_yaml``, ``tasks/cabbq/_cabbq_common_yaml``):
``"Contexto: {{context}}\\nPregunta: {{question}}\\nRespuesta:"`` (Catalan: ``Context:`` /
``Pregunta:`` / ``Resposta:``); the choices are ``ans0``, ``ans1`` and nine wordings of
"unknown" (``unknown_answers`` in the task file), each scored as ``" " + choice``, requests
``<item_id>:c0`` .. ``c10``. All 11 requests of an item share its context (vLLM's prefix cache
reuses it). The prediction is the argmax capped at 2 and its answer type (``metrics.answered``);
an item missing a score records no scores. Requests and their reading are the multiple-choice
kind's (``kinds/choices.py``); scores: ``metrics.py``.
"""

from __future__ import annotations

from pydantic import Field

from themis_dagster.kinds.choices import ChoiceBenchmark, LikeliestChoice
from themis_dagster.tasks.esbbq import metrics
from themis_dagster.tasks.esbbq.data import Params as DataParams
from themis_dagster.tasks.esbbq.data import load_items
from themis_dagster.tasks.spec import Item

__all__ = ["ESBBQ", "TASK", "Params", "choices", "load_items"]

ESBBQ = ChoiceBenchmark(load_items, metrics.answered, metrics.detail_of, metrics.compute_metrics)
"""EsBBQ's (and CaBBQ's) items, answers and scores, asked here by loglikelihood and by ``generate_utils``."""


class Params(DataParams):
    unknown_answers: tuple[str, ...] = Field(
        default=(), min_length=9, max_length=9, description="lm-eval's nine wordings of the UNKNOWN answer."
    )


def choices(item: Item, params: Params) -> list[str]:
    return [item.fields["ans0"], item.fields["ans1"], *params.unknown_answers]


TASK = LikeliestChoice(ESBBQ, Params, choices, ids="c{k}", missing_scores=False)
