"""Winogender by loglikelihood (task ``winogender``), as lm-eval's ``winogender_*`` tasks score it.

Prompt (lm-eval 0.4.13 ``tasks/winogender/winogender.yaml``): ``doc_to_text`` is
``"{{sentence}} ‘{{pronoun.capitalize()}}’ refers to the"``, ``doc_to_choice`` is
``[occupation, participant]``, ``doc_to_target`` is ``label``; each choice is scored as the
continuation ``" " + choice`` (lm-eval's default target delimiter), requests
``<id>:occupation`` and ``<id>:participant``, and the prediction is the argmax (the occupation
wins a tie, as ``np.argmax`` picks the first). Both share the whole prompt, and the three
pronoun twins of a schema share it up to the pronoun: consecutive requests, so vLLM's prefix
cache can reuse their blocks. Requests and their reading are the multiple-choice kind's
(``kinds/choices.py``); items: ``data.py``; what an answer means and the metrics: ``metrics.py``.
"""

from __future__ import annotations

from typing import Any

from themis_dagster.kinds.choices import ChoiceBenchmark, LikeliestChoice
from themis_dagster.tasks.spec import Item
from themis_dagster.tasks.winogender import metrics
from themis_dagster.tasks.winogender.data import Params, load_items

__all__ = ["TASK", "WINOGENDER", "Params", "antecedents", "load_items"]

WINOGENDER = ChoiceBenchmark(
    load_items, metrics.answered, metrics.detail_of, metrics.compute_metrics, metrics.PAIRED_METRICS
)
"""Winogender's sentences, answers and metrics (and how a comparison pairs them: ``metrics.PAIRED_METRICS``)."""


def antecedents(item: Item, params: Any) -> list[str]:
    """The occupation and the other participant (lm-eval's ``doc_to_choice``)."""
    return [item.fields[choice] for choice in metrics.CHOICES]


TASK = LikeliestChoice(WINOGENDER, Params, antecedents, ("sentence", "pronoun"), ids=metrics.CHOICES)
