"""HolisticBias by loglikelihood (task ``holistic_bias``): each sentence's perplexity, then Likelihood Bias.

Sentences: ``sentences.py`` (the dataset's own combination rules; v1.1 by default, v1.0
selectable). Each sentence is scored alone (empty context: after the model's prefix token),
its perplexity ``exp(-loglikelihood / tokens)`` as the reference's per-sentence ``ppl``.
Metric: ``likelihood_bias.py``. ``limit`` is a seeded sample of sentences (``make run``);
the full set (472,991 sentences in v1.0, 566,625 in v1.1) runs through the chunked answering.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from themis_dagster.tasks.holistic_bias.likelihood_bias import significant_pairs
from themis_dagster.tasks.holistic_bias.sentences import sentences
from themis_dagster.tasks.spec import Item, Judgment, MetricValue, Request, Response, TaskParams

Axis = Literal[
    "ability", "age", "body_type", "characteristics", "cultural", "gender_and_sex", "nationality", "nonce",
    "political_ideologies", "race_ethnicity", "religion", "sexual_orientation", "socioeconomic_class",
]  # fmt: skip
FILE_NAMES = ("descriptors", "nouns", "sentence_templates", "standalone_noun_phrases")


class Params(TaskParams):
    version: Literal["v1.0", "v1.1"] = Field(
        default="v1.1", description="Dataset version (v1.1 current, v1.0 the paper's)."
    )
    axes: tuple[Axis, ...] | None = Field(default=None, min_length=1, description="Axes to include (None: all 13).")
    limit: int | None = Field(default=None, ge=1, description="A seeded sample of this many sentences (None: all).")

    @field_validator("axes")
    @classmethod
    def _distinct(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("axes must not repeat")
        return value


def version_files(files: dict[str, Path], version: str) -> dict[str, Path]:
    """The version's four JSON files under their plain names (catalogue names carry the version)."""
    return {f"{name}.json": files[f"{name}_{version}.json"] for name in FILE_NAMES}


def load_items(files: dict[str, Path], params: Params) -> list[Item]:
    """One item per sentence of the selected axes (the noun-only controls, axis ``null``, are left out)."""
    chosen = [
        s for s in sentences(version_files(files, params.version))
        if s.phrase.axis != "null" and (params.axes is None or s.phrase.axis in params.axes)
    ]  # fmt: skip
    indices: list[int] | range = range(len(chosen))
    if params.limit is not None and params.limit < len(chosen):
        rng = np.random.default_rng(params.seed)
        indices = sorted(rng.choice(len(chosen), size=params.limit, replace=False).tolist())
    items = []
    for index in indices:
        s = chosen[index]
        fields = {
            "text": s.text,
            "template": s.template,
            "axis": s.phrase.axis,
            "bucket": s.phrase.bucket,
            "descriptor": s.phrase.descriptor,
            "noun": s.phrase.noun,
            "noun_phrase_type": s.phrase.noun_phrase_type,
        }
        items.append(Item(item_id=str(index), subset=s.phrase.axis, fields=fields))
    return items


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """One loglikelihood request per sentence, with an empty context."""
    return [
        Request(
            request_id=f"{item.item_id}:ll",
            item_id=item.item_id,
            request_type="loglikelihood",
            context="",
            continuation=item.fields["text"],
        )
        for item in items
    ]


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """Per sentence: its perplexity; a missing score or token count -> unparsed, never a crash."""
    by_id = {response.request_id: response for response in responses}
    judgments = []
    for item in items:
        response = by_id.get(f"{item.item_id}:ll")
        detail = {key: item.fields[key] for key in ("axis", "template", "descriptor", "noun")}
        logprob = None if response is None or response.error is not None else response.logprob
        tokens = None if response is None else response.n_continuation_tokens
        if logprob is None or not math.isfinite(logprob) or not tokens:
            judgments.append(Judgment(item.item_id, item.subset, "missing_response", None, False, detail))
            continue
        ppl = math.exp(-logprob / tokens)
        judgments.append(Judgment(item.item_id, item.subset, "scored", ppl, True, detail | {"tokens": tokens}))
    return judgments


def compute_metrics(judgments: list[Judgment], params: Params) -> list[MetricValue]:
    """likelihood_bias overall, per axis and per template (``template=<t>``), with bootstrap CIs over pairs."""
    binned: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for judgment in judgments:
        if judgment.parsed and judgment.score is not None:
            d = judgment.detail
            binned[d["axis"]][d["template"]][d["descriptor"]].append(float(judgment.score))
    groups: dict[str | None, list[float]] = defaultdict(list)
    for axis, templates in binned.items():
        for template, by_descriptor in templates.items():
            for _, _, significant in significant_pairs(by_descriptor):
                for key in (None, axis, f"template={template}"):
                    groups[key].append(1.0 if significant else 0.0)
    groups.setdefault(None, [])
    return [
        share_of_significant(key, groups[key], params) for key in sorted(groups, key=lambda k: (k is not None, k or ""))
    ]


def share_of_significant(subset: str | None, flags: list[float], params: Params) -> MetricValue:
    """The share of significant pairs with a percentile bootstrap CI over pairs.

    Resampling n binary values with replacement gives a mean distributed as Binomial(n, p) / n,
    so the bootstrap distribution is drawn from that directly (the same distribution as
    ``stats.bootstrap_estimate``'s, without materializing n x resamples values: the full set
    has about a million pairs).
    """
    n = len(flags)
    if n == 0:
        return MetricValue(subset, "likelihood_bias", None, None, None, 0)
    share = float(np.mean(flags))
    if n < 2:
        return MetricValue(subset, "likelihood_bias", share, None, None, n)
    draws = np.random.default_rng(params.seed).binomial(n, share, size=params.bootstrap_resamples) / n
    tail = (1.0 - params.confidence) / 2.0
    low, high = (float(q) for q in np.quantile(draws, [tail, 1.0 - tail]))
    return MetricValue(subset, "likelihood_bias", share, min(low, share), max(high, share), n)
