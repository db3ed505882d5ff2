"""BOLD (task ``bold``): a continuation generated for each prompt, scored by VADER and gender polarity.

Requests: the prompt as a plain completion (HELM's BOLD: 20 new tokens at temperature 0.9,
seeded; ``data.HELM_GENERATION``). Judging: ``scorers.py`` per continuation (sentiment class,
male/female token counts and label); an engine error is recorded unparsed, never raised.
Regard and toxicity: ``second_opinion.py`` when ``judge_model`` is set. Metrics: ``metrics.py``.
"""

from __future__ import annotations

from pathlib import Path

import jinja2
import yaml

from themis_dagster.tasks.bbq.rendering import sha256, template_text
from themis_dagster.tasks.bold.data import Params, load_items
from themis_dagster.tasks.bold.second_opinion import NOT_COMPUTED, RegardToxicityJudge
from themis_dagster.tasks.bold.metrics import PAIRED_METRICS, compute_metrics
from themis_dagster.tasks.bold.scorers import (
    MAX_CHARS,
    gender_polarity,
    gender_token_counts,
    sentiment_label,
    vader_compound,
)
from themis_dagster.tasks.spec import Item, Judgment, Request, Response

__all__ = ["PAIRED_METRICS", "SECOND_OPINION", "Params", "build_requests", "compute_metrics", "judge", "load_items"]
TEMPLATE = "bold_prompt"
TEMPLATES = yaml.safe_load((Path(__file__).with_name("bold_templates.yaml")).read_text(encoding="utf-8"))


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """One completion request per prompt: ``<item_id>:gen`` (the template compiled once: 23,679 prompts)."""
    text = template_text(templates, TEMPLATE)
    digest = sha256(text)
    template = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False).from_string(text)  # noqa: S701 - plain text
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


def score(item: Item, continuation: str) -> Judgment:
    """A continuation's VADER compound (the judgment's score), sentiment class and gender polarity.

    Scored on its first ``MAX_CHARS`` characters (``truncated`` says when it was longer).
    """
    truncated = len(continuation) > MAX_CHARS
    continuation = continuation[:MAX_CHARS]
    compound = vader_compound(continuation)
    male, female = gender_token_counts(continuation)
    detail = {
        "domain": item.fields["domain"],
        "group": item.fields["group"],
        "name": item.fields["name"],
        "prompt": item.fields["prompt"],
        "continuation": continuation,
        "truncated": truncated,
        "compound": compound,
        "sentiment": sentiment_label(compound),
        "male_tokens": male,
        "female_tokens": female,
        "gender_polarity": gender_polarity(male, female),
        "regard": None,
        "toxicity": None,
        "regard_status": NOT_COMPUTED,
        "toxicity_status": NOT_COMPUTED,
    }
    return Judgment(item.item_id, item.subset, str(detail["sentiment"]), compound, True, detail)


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """Per prompt: its continuation scored; a missing or failed generation is unparsed (counted, not raised)."""
    by_id = {response.request_id: response for response in responses}
    judgments = []
    for item in items:
        response = by_id.get(f"{item.item_id}:gen")
        if response is None or response.error is not None or response.text is None:
            reason = "missing_response" if response is None else "engine_error"
            detail = {key: item.fields[key] for key in ("domain", "group", "name", "prompt")}
            if response is not None and response.error is not None:
                detail["error"] = str(response.error)[:500]
            judgments.append(Judgment(item.item_id, item.subset, reason, None, False, detail))
            continue
        judgments.append(score(item, response.text))
    return judgments


SECOND_OPINION = RegardToxicityJudge(TEMPLATES)
