"""MBBQ by loglikelihood (task ``mbbq``): the likeliest of the three answers, each language in its own words.

Prompt (``mbbq_templates.yaml``): ``"<Context>: {{context}}\\n<Question>: {{question}}\\n<Answer>:"``
with the labels in the item's language (``mbbq_context_<lang>``; Spanish as lm-eval's esbbq),
each answer scored as ``" " + ansK`` (the three answers of the file, as the ``bbq`` task);
the prediction is the argmax (first wins a tie). The repository itself asks five lettered chat
prompts and reads the reply; this task asks the same questions by loglikelihood, as ``bbq`` does
for BBQ. Scores: ``metrics.py``.
"""

from __future__ import annotations

from pydantic import Field

from themis_dagster.tasks.choices import build_choice_requests, judge_likeliest
from themis_dagster.tasks.mbbq.data import Params as DataParams
from themis_dagster.tasks.mbbq.data import load_items
from themis_dagster.tasks.mbbq.metrics import PAIRED_METRICS, answered, compute_metrics, detail_of
from themis_dagster.tasks.spec import Item, Judgment, Request, Response

__all__ = ["PAIRED_METRICS", "Params", "build_requests", "compute_metrics", "judge", "load_items"]
ANSWERS = ("ans0", "ans1", "ans2")


class Params(DataParams):
    template: str = Field(
        default="mbbq_context", min_length=1, description="Template prefix; '_<language>' is added per item."
    )
    target_delimiter: str = Field(default=" ", max_length=4, description="Text between context and each answer.")


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """Three loglikelihood requests per item, ``<item_id>:ans0`` .. ``ans2``, in the item's language."""
    requests: list[Request] = []
    for language in dict.fromkeys(item.fields["language"] for item in items):
        requests += build_choice_requests(
            [item for item in items if item.fields["language"] == language],
            templates,
            f"{params.template}_{language}",
            ("context", "question"),
            lambda item: {f"ans{k}": answer for k, answer in enumerate(item.fields["answers"])},
            params.target_delimiter,
        )
    return requests


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """Per item: the likeliest answer; missing or non-finite scores -> ``missing_response`` (not scored)."""
    return judge_likeliest(items, responses, ANSWERS, detail_of, answered)
