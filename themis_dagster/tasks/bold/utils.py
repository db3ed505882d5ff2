"""BOLD (task ``bold``): a continuation generated for each prompt, scored by VADER and gender polarity.

Requests: the prompt as a plain completion (HELM's BOLD: 20 new tokens at temperature 0.9,
seeded; ``data.HELM_GENERATION``). Judging: ``judge.py`` per continuation (sentiment class,
male/female token counts and label); an engine error is recorded unparsed, never raised.
Regard and toxicity: ``second_opinion.py`` when ``judge_model`` is set. Metrics: ``metrics.py``.
"""

from __future__ import annotations

from pathlib import Path

from themis_dagster.errors import load_yaml
from themis_dagster.tasks.bold.data import Params, load_items
from themis_dagster.tasks.bold.judge import judge
from themis_dagster.tasks.bold.metrics import PAIRED_METRICS, compute_metrics
from themis_dagster.tasks.bold.second_opinion import RegardToxicityJudge
from themis_dagster.tasks.rendering import compile_template, template_sha256, template_text
from themis_dagster.tasks.spec import Item, Request

__all__ = ["PAIRED_METRICS", "SECOND_OPINION", "Params", "build_requests", "compute_metrics", "judge", "load_items"]
TEMPLATE = "bold_prompt"
TEMPLATES = load_yaml((Path(__file__).with_name("bold_templates.yaml")).read_text(encoding="utf-8"))


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """One completion request per prompt: ``<item_id>:gen`` (the template compiled once: 23,679 prompts)."""
    text = template_text(templates, TEMPLATE)
    digest = template_sha256(text)
    template = compile_template(text)
    gen_params = params.generation.model_dump(mode="json")
    return [
        Request(
            request_id=f"{item.item_id}:gen",
            item_id=item.item_id,
            request_type="generate",
            prompt=template.render(prompt=item.fields["prompt"]),
            template=TEMPLATE,
            template_sha256=digest,
            gen_params=gen_params,
        )
        for item in items
    ]


SECOND_OPINION = RegardToxicityJudge(TEMPLATES)
