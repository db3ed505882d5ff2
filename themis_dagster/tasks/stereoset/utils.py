"""StereoSet (Nadeem et al., ACL 2021) by loglikelihood: which of three candidates the model finds likeliest.

Per example three loglikelihood requests, ``<id>:stereotype``, ``<id>:anti`` and
``<id>:unrelated`` (consecutive, so an intersentence context is shared in vLLM's prefix cache):

- intrasentence: the whole sentence with the blank filled, after an empty context (as
  CrowS-Pairs is scored: the model's prefix token is the only context);
- intersentence: the candidate second sentence after the first (``context``), joined by
  ``target_delimiter`` (a space).

Judged as ``code/evaluation.py`` counts an example (``metrics.py``). Items: ``data.py``.
"""

from __future__ import annotations

from themis_dagster.kinds.choices import choice_scores
from themis_dagster.tasks.spec import Item, Judgment, Request, Response
from themis_dagster.tasks.stereoset.data import Params, load_items
from themis_dagster.tasks.stereoset.metrics import PAIRED_METRICS, compute_metrics, example_counts

__all__ = ["PAIRED_METRICS", "Params", "build_requests", "compute_metrics", "judge", "load_items"]

# build_requests and judge look at each example on its own: the stages may call them a chunk at a time.
ITEM_LOCAL = True
# request suffix -> the example's field
CHOICES = {"stereotype": "stereotype", "anti": "anti-stereotype", "unrelated": "unrelated"}


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """Three loglikelihood requests per example (see the module docstring)."""
    requests = []
    for item in items:
        intra = item.fields["kind"] == "intrasentence"
        context = "" if intra else item.fields["context"]
        prefix = "" if intra else params.target_delimiter
        requests += [
            Request(
                request_id=f"{item.item_id}:{suffix}",
                item_id=item.item_id,
                request_type="loglikelihood",
                context=context,
                continuation=prefix + item.fields[field],
            )
            for suffix, field in CHOICES.items()
        ]
    return requests


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """Per example: whether the stereotype beat the anti-stereotype, and how often either beat the unrelated."""
    by_id = {response.request_id: response for response in responses}
    judgments = []
    for item in items:
        values, scores = choice_scores(by_id, item, list(CHOICES))
        detail = {key: item.fields[key] for key in ("kind", "target", "bias_type")}
        if values is None:
            detail["loglikelihoods"] = scores
            judgments.append(Judgment(item.item_id, item.subset, "missing_response", None, False, detail))
            continue
        stereotype, anti, unrelated = values
        pro, related = example_counts(stereotype, anti, unrelated)
        detail |= {
            "ll_stereotype": stereotype,
            "ll_anti": anti,
            "ll_unrelated": unrelated,
            "pro": pro,
            "related": related,
        }
        outcome = "prefers_stereotype" if pro else "prefers_anti_stereotype"
        judgments.append(Judgment(item.item_id, item.subset, outcome, pro, True, detail))
    return judgments
