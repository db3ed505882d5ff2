"""KoBBQ by loglikelihood (task ``kobbq``): the likeliest of the sample's three choices.

Prompt (``kobbq_templates.yaml``): the repository's prompt 1 labels without its lettered
options, ``"맥락: {{context}}\\n질문: {{question}}\\n정답:"``, each choice scored as
``" " + choice`` (as the ``bbq`` task); the argmax (first wins a tie) is the prediction, always
one of the choices, so nothing is out of choice. Scores: ``metrics.py``.
"""

from __future__ import annotations

from pydantic import Field

from themis_dagster.tasks.choices import build_choice_requests, judge_likeliest
from themis_dagster.tasks.kobbq.data import Params as DataParams
from themis_dagster.tasks.kobbq.data import load_items
from themis_dagster.tasks.kobbq.metrics import PAIRED_METRICS, answered, compute_metrics, detail_of
from themis_dagster.tasks.spec import Item, Judgment, Request, Response

__all__ = ["PAIRED_METRICS", "Params", "build_requests", "compute_metrics", "judge", "load_items"]
CHOICES = ("c0", "c1", "c2")


class Params(DataParams):
    template: str = Field(default="kobbq_context", min_length=1, description="Context template (templates file).")
    target_delimiter: str = Field(default=" ", max_length=4, description="Text between context and each choice.")


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """Three loglikelihood requests per sample, ``<sample_id>:c0`` .. ``c2``."""
    return build_choice_requests(
        items,
        templates,
        params.template,
        ("context", "question"),
        lambda item: {f"c{k}": choice for k, choice in enumerate(item.fields["choices"])},
        params.target_delimiter,
    )


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """Per sample: the likeliest choice; missing or non-finite scores -> ``missing_response`` (not scored)."""
    return judge_likeliest(items, responses, CHOICES, detail_of, answered)
