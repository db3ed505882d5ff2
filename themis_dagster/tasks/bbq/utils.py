"""BBQ by loglikelihood (task ``bbq``): the model's answer is the likeliest of the three.

Prompt (lm-eval ``tasks/bbq/bbq_multiple_choice.yaml``): context
``"{{context}}\\n\\nQ: {{question}}\\nA:"`` and continuation ``" " + ansK`` for K = 0..2;
the prediction is ``argmax_K loglikelihood`` (lm-eval ``process_results_multiple_choice``;
the first answer wins a tie). Unlike lm-eval, which adds ten extra UNKNOWN wordings as
choices, only the dataset's three answers are scored (BBQ's own three-way setting). The
requests and their reading are the multiple-choice kind's (``kinds/choices.py``); what an
answer means is ``judge.py``'s, the metrics ``metrics.py``'s.
"""

from __future__ import annotations

from pydantic import Field

from themis_dagster.kinds.choices import ChoiceBenchmark, LikeliestChoice
from themis_dagster.tasks.bbq import metrics
from themis_dagster.tasks.bbq.data import BBQParams, load_items
from themis_dagster.tasks.bbq.judge import answered, detail_of

__all__ = ["BBQ", "TASK", "Params", "load_items"]

BBQ = ChoiceBenchmark(load_items, answered, detail_of, metrics.compute_metrics, metrics.PAIRED_METRICS)
"""BBQ's items, answers and metrics, asked here by loglikelihood and by ``generate_utils`` in a chat."""


class Params(BBQParams):
    template: str = Field(default="bbq_context", min_length=1, description="Context template (bbq_templates.yaml).")
    target_delimiter: str = Field(default=" ", max_length=4, description="Text between context and each answer.")


TASK = LikeliestChoice(BBQ, Params, "answers", ids="ans{k}")
