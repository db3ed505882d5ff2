"""CBBQ by loglikelihood (task ``cbbq``): the likeliest of the three answers.

Prompt (``cbbq_templates.yaml``): the labels of the repository's evaluation prompt,
``"题目：{{context}}\\n问题：{{question}}\\n答案："``, each answer scored as its continuation with
no delimiter (Chinese has no spaces between words); the argmax (first wins a tie) is the answer.
(The repository's scripts generate a letter per option; this task asks by loglikelihood, as
``bbq`` does.) Scores: ``metrics.py``.
"""

from __future__ import annotations

from pydantic import Field

from themis_dagster.tasks.cbbq.data import Params as DataParams
from themis_dagster.tasks.cbbq.data import load_items
from themis_dagster.tasks.cbbq.metrics import PAIRED_METRICS, answered, compute_metrics, detail_of
from themis_dagster.tasks.choices import build_choice_requests, judge_likeliest
from themis_dagster.tasks.spec import Item, Judgment, Request, Response

__all__ = ["PAIRED_METRICS", "Params", "build_requests", "compute_metrics", "judge", "load_items"]
ANSWERS = ("ans0", "ans1", "ans2")


class Params(DataParams):
    template: str = Field(default="cbbq_context", min_length=1, description="Context template (templates file).")
    target_delimiter: str = Field(default="", max_length=4, description="Text between context and each answer.")


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """Three loglikelihood requests per item, ``<item_id>:ans0`` .. ``ans2``."""
    return build_choice_requests(
        items,
        templates,
        params.template,
        ("context", "question"),
        lambda item: {f"ans{k}": answer for k, answer in enumerate(item.fields["answers"])},
        params.target_delimiter,
    )


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """Per item: the likeliest answer; missing or non-finite scores -> ``missing_response`` (not scored)."""
    return judge_likeliest(items, responses, ANSWERS, detail_of, answered)
