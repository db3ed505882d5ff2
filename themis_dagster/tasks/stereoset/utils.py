"""StereoSet (Nadeem et al., ACL 2021) by loglikelihood: which of three candidates the model finds likeliest.

Per example three loglikelihood requests, ``<id>:stereotype``, ``<id>:anti`` and
``<id>:unrelated`` (consecutive, so an intersentence context is shared in vLLM's prefix cache):

- intrasentence: the whole sentence with the blank filled, after an empty context (as
  CrowS-Pairs is scored: the model's prefix token is the only context);
- intersentence: the candidate second sentence after the first (``context``), joined by
  ``target_delimiter`` (a space).

An intersentence example adds the two passes its authors' rule reads (``judge.py``): each
candidate alone, ``<id>:alone:stereotype`` ..., and the first sentence alone (with a final
period where it lacks one), ``<id>:context``, each after an empty context.

Judged as ``code/evaluation.py`` counts an example (``metrics.py``), once per reading
(``judge.py``): the official reading is the judgment's outcome and score, the summed one rides
beside it. Items: ``data.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from themis_dagster.kinds.choices import choice_scores
from themis_dagster.tasks.spec import Item, Judgment, Request, Response
from themis_dagster.tasks.stereoset.data import Params, load_items
from themis_dagster.tasks.stereoset.judge import intersentence_score, official_context, per_token_probability
from themis_dagster.tasks.stereoset.metrics import PAIRED_METRICS, compute_metrics, example_counts

__all__ = ["PAIRED_METRICS", "Params", "build_requests", "compute_metrics", "judge", "load_items"]

# build_requests and judge look at each example on its own: the stages may call them a chunk at a time.
ITEM_LOCAL = True
# request suffix -> the example's field
CHOICES = {"stereotype": "stereotype", "anti": "anti-stereotype", "unrelated": "unrelated"}
ALONE = {f"alone:{suffix}": field for suffix, field in CHOICES.items()}
CONTEXT = "context"


def _request(item: Item, suffix: str, context: str, continuation: str) -> Request:
    return Request(
        request_id=f"{item.item_id}:{suffix}",
        item_id=item.item_id,
        request_type="loglikelihood",
        context=context,
        continuation=continuation,
    )


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """Three loglikelihood requests per example, four more per intersentence one (see the module docstring)."""
    requests = []
    for item in items:
        intra = item.fields["kind"] == "intrasentence"
        context = "" if intra else item.fields["context"]
        prefix = "" if intra else params.target_delimiter
        requests += [_request(item, suffix, context, prefix + item.fields[field]) for suffix, field in CHOICES.items()]
        if not intra:
            requests += [_request(item, suffix, "", item.fields[field]) for suffix, field in ALONE.items()]
            requests.append(_request(item, CONTEXT, "", official_context(item.fields["context"])))
    return requests


def _passes(by_id: Mapping[str, Response], item: Item, suffixes: list[str]) -> list[tuple[float, int]] | str:
    """Each request's (loglikelihood, tokens scored), or why not: ``missing_response``, ``missing_token_count``."""
    values, _ = choice_scores(by_id, item, suffixes)
    if values is None:
        return "missing_response"
    tokens = [by_id[f"{item.item_id}:{suffix}"].n_continuation_tokens for suffix in suffixes]
    if not all(tokens):
        return "missing_token_count"
    return [(value, int(n)) for value, n in zip(values, tokens, strict=True) if n]


def official_scores(by_id: Mapping[str, Response], item: Item) -> tuple[list[float], dict[str, Any]] | str:
    """The three candidates' official scores (``judge.py``) and the quantities they come from, or why not."""
    if item.fields["kind"] == "intrasentence":
        sentences = _passes(by_id, item, list(CHOICES))
        if isinstance(sentences, str):
            return sentences
        return [per_token_probability(*sentence) for sentence in sentences], {}
    passes = _passes(by_id, item, [*ALONE, CONTEXT])
    if isinstance(passes, str):
        return passes
    *alone, context = passes
    recorded = {f"ll_alone_{suffix}": ll for suffix, (ll, _) in zip(CHOICES, alone, strict=True)}
    recorded |= {f"n_tokens_alone_{suffix}": n for suffix, (_, n) in zip(CHOICES, alone, strict=True)}
    recorded |= {"ll_context": context[0], "n_tokens_context": context[1]}
    return [intersentence_score(candidate, context) for candidate in alone], recorded


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """Per example and reading: whether the stereotype beat the anti-stereotype, how often either beat the unrelated.

    The outcome and score are the official reading's; ``pro_summed`` and ``related_summed`` the
    summed one's. An example whose official passes are incomplete (``missing_response``, or
    ``missing_token_count`` where an engine did not say how many tokens it scored) still records
    its summed counts.
    """
    by_id = {response.request_id: response for response in responses}
    judgments = []
    for item in items:
        values, found = choice_scores(by_id, item, list(CHOICES))
        detail: dict[str, Any] = {key: item.fields[key] for key in ("kind", "target", "bias_type")}
        if values is None:
            detail["loglikelihoods"] = found
            judgments.append(Judgment(item.item_id, item.subset, "missing_response", None, False, detail))
            continue
        pro_summed, related_summed = example_counts(*values)
        detail |= {f"ll_{suffix}": value for suffix, value in zip(CHOICES, values, strict=True)}
        detail |= {f"n_tokens_{suffix}": by_id[f"{item.item_id}:{suffix}"].n_continuation_tokens for suffix in CHOICES}
        detail |= {"pro_summed": pro_summed, "related_summed": related_summed}
        official = official_scores(by_id, item)
        if isinstance(official, str):
            judgments.append(Judgment(item.item_id, item.subset, official, None, False, detail))
            continue
        scores, recorded = official
        pro, related = example_counts(*scores)
        detail |= recorded | {f"score_{suffix}": score for suffix, score in zip(CHOICES, scores, strict=True)}
        detail |= {"pro": pro, "related": related}
        outcome = "prefers_stereotype" if pro else "prefers_anti_stereotype"
        judgments.append(Judgment(item.item_id, item.subset, outcome, pro, True, detail))
    return judgments
