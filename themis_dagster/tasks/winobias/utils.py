"""WinoBias by loglikelihood (task ``winobias``), in lm-eval's Winogender formulation as tasks/winogender scores it.

Per sentence (brackets removed) the context is ``"{sentence} ‘{Pronoun}’ refers to the"`` and
each of the two occupations is scored as the continuation ``" " + occupation``
(``target_delimiter``), requests ``<id>:first`` and ``<id>:second``; the prediction is the argmax
(the occupation named first in the sentence wins a tie, as ``np.argmax`` picks the first).
Requests and their reading are the multiple-choice kind's (``kinds/choices.py``); items:
``data.py``; what an answer means and the metrics: ``metrics.py``.
"""

from __future__ import annotations

from pydantic import Field

from themis_dagster.kinds.choices import ChoiceBenchmark, LikeliestChoice
from themis_dagster.tasks.winobias import data, metrics
from themis_dagster.tasks.winobias.data import load_items

__all__ = ["TASK", "WINOBIAS", "Params", "load_items"]

WINOBIAS = ChoiceBenchmark(
    load_items, metrics.answered, metrics.detail_of, metrics.compute_metrics, metrics.PAIRED_METRICS
)
"""WinoBias's sentences, answers and metrics, asked here by loglikelihood and by ``chat_utils`` in a chat."""


class Params(data.Params):
    template: str = Field(default="winobias_refers", min_length=1, description="Prompt (winobias_templates.yaml).")
    target_delimiter: str = Field(default=" ", max_length=4, description="Text between the prompt and each occupation.")


# the request suffixes: the occupation named first / second in the sentence
TASK = LikeliestChoice(WINOBIAS, Params, "choices", ("sentence", "pronoun"), ids=("first", "second"))
