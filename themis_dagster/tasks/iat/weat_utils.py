"""``iat_weat``: WEAT and WEFAT (Caliskan et al. 2017) on the IAT stimulus sets with the model's own vectors.

Per stimulus set (one item): targets X = the default-group labels, Y = the stigmatized-group
labels, attributes A = the positive words (first half of ``C``), B = the negative words. Each
word is one ``embedding`` request; the engine answers with the word's input-embedding and
mean-pooled last-hidden-state vectors and its tokens (``engines/embeddings.py``). ``judge``
computes, per representation, the effect size d (bootstrap CI over target words), the
one-sided permutation p-value (exact up to ``max_exact_partitions``, else
``permutation_resamples`` sampled partitions; the count is the metric's n) and WEFAT for every
attribute word against X and Y (``themis_dagster.stats.weat``). d > 0: the default group sits
closer to the positive words than the stigmatized group does (the stereotype-consistent
direction of the IAT task's D).

Words are lower-cased, as the reference prompt scripts ask them. A word of several tokens is
mean-pooled over its tokens (``split_words: pool``) or left out (``skip``); left-out and failed
words are listed in the judgment with their tokens, and a set with an empty X, Y, A or B is
reported (outcome ``missing_words``) without a score, never a crash.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator

from themis_dagster.stats import Resampling
from themis_dagster.stats.weat import MAX_EXACT_PARTITIONS, weat, wefat
from themis_dagster.tasks.iat.stimuli import MAIN_FILE, SYNONYM_FILE, load_stimulus_sets
from themis_dagster.tasks.iat.utils import Category, DatasetName
from themis_dagster.tasks.scoring import estimate_row
from themis_dagster.tasks.spec import Item, Judgment, MetricValue, Request, Response, TaskParams, distinct

Representation = Literal["hidden_mean", "input"]
ROLES = ("x", "y", "a", "b")  # default labels, stigma labels, positive words, negative words


class Params(TaskParams):
    """Which sets, which vectors, and how the tests resample."""

    seed: int = Field(default=42, ge=0)
    bootstrap_resamples: int = Field(default=10_000, ge=100, le=100_000)
    categories: tuple[Category, ...] | None = Field(default=None, min_length=1, description="None: all five.")
    datasets: tuple[DatasetName, ...] | None = Field(default=None, min_length=1, description="None: all 21 sets.")
    word_list: Literal["main", "synonym"] = Field(default="main", description="Attribute words of C, or of D.")
    representations: tuple[Representation, ...] = Field(default=("hidden_mean", "input"), min_length=1)
    split_words: Literal["pool", "skip"] = Field(
        default="pool", description="Mean-pool a multi-token word or leave it out."
    )
    permutation_resamples: int = Field(default=10_000, ge=100, le=1_000_000)
    max_exact_partitions: int = Field(default=MAX_EXACT_PARTITIONS, ge=1, le=10_000_000)

    @field_validator("representations", "categories", "datasets")
    @classmethod
    def _unique(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return distinct(value, "values must be unique")


def load_items(files: dict[str, Path], params: Params) -> list[Item]:
    """One item per selected stimulus set: its four word lists."""
    sets = load_stimulus_sets(files[MAIN_FILE], files[SYNONYM_FILE])
    chosen = sets["synonym" if params.word_list == "synonym" else "replication"]
    items = []
    for stimulus in chosen.values():
        if params.categories is not None and stimulus.category not in params.categories:
            continue
        if params.datasets is not None and stimulus.dataset not in params.datasets:
            continue
        valence = stimulus.valence
        fields = {
            "category": stimulus.category,
            "set": stimulus.key,
            "x": list(stimulus.defaults),
            "y": list(stimulus.stigmas),
            "a": [w for w in stimulus.words if valence.get(w) == "positive"],
            "b": [w for w in stimulus.words if valence.get(w) == "negative"],
        }
        items.append(Item(f"weat:{params.word_list}:{stimulus.key}", stimulus.key, fields))
    return items[: params.limit] if params.limit is not None else items


def request_id(item: Item, role: str, word: str) -> str:
    return f"{item.item_id}|{role}|{word}"


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """One embedding request per (set, role, word)."""
    return [
        Request.embedding(word, request_id(item, role, word), item.item_id)
        for item in items
        for role in ROLES
        for word in item.fields[role]
    ]


def _vectors(
    item: Item, by_id: dict[str, Response], kind: str, pool_split_words: bool
) -> tuple[dict[str, list[tuple[str, np.ndarray]]], dict[str, dict[str, Any]]]:
    """Per role, the usable words with their vectors; and every unusable word with why and its tokens."""
    usable: dict[str, list[tuple[str, np.ndarray]]] = defaultdict(list)
    left_out: dict[str, dict[str, Any]] = {}
    for role in ROLES:
        for word in item.fields[role]:
            response = by_id.get(request_id(item, role, word))
            if response is None or response.error or not response.text:
                left_out[word] = {"why": (response.error if response else None) or "no response", "tokens": None}
                continue
            payload = json.loads(response.text)
            tokens = payload.get("tokens") or []
            if len(tokens) > 1 and not pool_split_words:
                left_out[word] = {"why": "several tokens", "tokens": tokens}
                continue
            usable[role].append((word, np.asarray(payload["vectors"][kind], dtype=float)))
    return usable, left_out


def _tokenization(item: Item, by_id: dict[str, Response]) -> dict[str, list[str]]:
    """Every word that the tokenizer splits, with its pieces."""
    split = {}
    for role in ROLES:
        for word in item.fields[role]:
            response = by_id.get(request_id(item, role, word))
            if response is not None and response.text and not response.error:
                tokens = json.loads(response.text).get("tokens") or []
                if len(tokens) > 1:
                    split[word] = tokens
    return split


def _test(usable: dict[str, list[tuple[str, np.ndarray]]], params: Params) -> dict[str, Any]:
    x, y, a, b = (np.vstack([vector for _, vector in usable[role]]) for role in ROLES)
    result = weat(
        x,
        y,
        a,
        b,
        resampling=Resampling(n_resamples=params.bootstrap_resamples, confidence=params.confidence, seed=params.seed),
        max_exact=params.max_exact_partitions,
        permutation_resamples=params.permutation_resamples,
    )
    attributes = usable["a"] + usable["b"]
    scores = wefat(np.vstack([vector for _, vector in attributes]), x, y)
    return result.__dict__ | {"wefat": {word: score for (word, _), score in zip(attributes, scores, strict=True)}}


def judge_item(item: Item, by_id: dict[str, Response], params: Params) -> Judgment:
    """Every representation's WEAT and WEFAT for one set; a set missing a whole word list gets no score."""
    detail: dict[str, Any] = {"category": item.fields["category"], "set": item.fields["set"]}
    detail["split_words"] = _tokenization(item, by_id)
    results: dict[str, Any] = {}
    for kind in params.representations:
        usable, left_out = _vectors(item, by_id, kind, pool_split_words=params.split_words == "pool")
        detail["left_out"] = left_out
        empty = [role for role in ROLES if not usable[role]]
        if empty:
            detail["empty_lists"] = empty
            return Judgment(item.item_id, item.subset, "missing_words", None, False, detail)
        try:
            results[kind] = _test(usable, params)
        except ValueError as error:  # e.g. a zero vector: recorded, never raised
            detail["error"] = str(error)
            return Judgment(item.item_id, item.subset, "invalid_vectors", None, False, detail)
    detail["results"] = results
    score = results[params.representations[0]]["effect_size"]
    outcome = "ok" if not detail["left_out"] else "partial"
    return Judgment(item.item_id, item.subset, outcome, score, True, detail)


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """One judgment per stimulus set."""
    by_id = {response.request_id: response for response in responses}
    return [judge_item(item, by_id, params) for item in items]


def _mean_over_sets(metric: str, subset: str | None, values: list[float], params: Params) -> MetricValue:
    return estimate_row(subset, metric, values, params)


def compute_metrics(judgments: list[Judgment], params: Params) -> list[MetricValue]:
    """Per representation: d per set (CI over target words), its mean per category and overall (CI over
    sets), the permutation p-value (n = partitions counted) and whether it was exact, WEFAT per word.
    The headline (subset None) is the first representation's mean d; ``weat_word_coverage`` the share
    of sets with a score."""
    rows: list[MetricValue] = []
    scored = [j for j in judgments if j.parsed]
    rows.append(
        MetricValue(None, "weat_word_coverage", len(scored) / len(judgments) if judgments else None, None, None,
                    len(judgments))
    )  # fmt: skip
    for position, kind in enumerate(params.representations):
        per_set = [(j, j.detail["results"][kind]) for j in scored]
        overall = [r["effect_size"] for _, r in per_set if r["effect_size"] is not None]
        if position == 0:
            rows.append(_mean_over_sets("weat_d", None, overall, params))
        rows.append(_mean_over_sets("weat_d", kind, overall, params))
        by_category: dict[str, list[float]] = defaultdict(list)
        for judgment, result in per_set:
            if result["effect_size"] is not None:
                by_category[str(judgment.detail["category"])].append(result["effect_size"])
        for category in sorted(by_category):
            rows.append(_mean_over_sets("weat_d", f"{kind}:{category}", by_category[category], params))
        for judgment, result in per_set:
            key = f"{kind}:{judgment.subset}"
            n_targets = result["n_x"] + result["n_y"]
            rows.append(
                MetricValue(key, "weat_d", result["effect_size"], result["ci_low"], result["ci_high"], n_targets)
            )
            rows.append(MetricValue(key, "weat_p_value", result["p_value"], None, None, result["partitions"]))
            rows.append(MetricValue(key, "weat_p_exact", float(result["exact"]), None, None, result["partitions"]))
            for word, value in result["wefat"].items():
                rows.append(MetricValue(f"{key}:{word}", "wefat", value, None, None, n_targets))
    return rows
