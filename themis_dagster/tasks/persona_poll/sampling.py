"""A distribution from sampled chat answers: K seeded replies per question, each read as one lettered option.

Persona polls and OpinionQA's chat variant ask this way. Sample k of an item is the request
``<item_id>:<k>`` with seed ``generation.seed + k`` (our engines take one reply per request; a
distinct seed per sample keeps every reply reproducible and cached, as HONEST samples). Each
sample is one judgment (its ``item_id`` is the request's id, ``detail.unit`` the item): the option
it chose (``parser.parse_option``), or why none was read; every reply is also marked for refusals
(the shared detector), so each answer is kept and each refusal counted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from themis_dagster.exchange import GenerationParams
from themis_dagster.refusals import mark_refusals, replies_by
from themis_dagster.tasks.persona_poll.parser import parse_option
from themis_dagster.tasks.spec import Item, Judgment, Request, Response

ANSWERED = "answered"


def sample_id(item_id: str, sample: int) -> str:
    """The request (and judgment) id of an item's ``sample``-th reply."""
    return f"{item_id}:{sample}"


def seeded(generation: GenerationParams, samples: int) -> list[dict[str, object]]:
    """The generation settings of each sample: seed + k (unseeded stays unseeded)."""
    return [
        generation.model_copy(update={"seed": None if generation.seed is None else generation.seed + k}).model_dump(
            mode="json"
        )
        for k in range(samples)
    ]


def sample_requests(
    items: Sequence[Item],
    samples: int,
    generation: GenerationParams,
    messages: Callable[[Item], tuple[str | None, str]],
    template: str,
    digest: str,
) -> list[Request]:
    """K chat requests per item: ``messages(item)`` gives its (system, user) texts; sample k seeded seed + k."""
    settings = seeded(generation, samples)
    requests = []
    for item in items:
        system, user = messages(item)
        requests += [
            Request.user_message(
                user, sample_id(item.item_id, k), item.item_id, template, digest, settings[k], system=system
            )
            for k in range(samples)
        ]
    return requests


def judge_samples(
    items: Sequence[Item],
    responses: Sequence[Response],
    samples: int,
    options_of: Callable[[Item], list[list[str]]],
    detail_of: Callable[[Item], dict[str, object]],
) -> list[Judgment]:
    """One judgment per sample: ``answered`` with the chosen option's index (``detail.choice``), else why not."""
    by_id = {response.request_id: response for response in responses}
    judgments = []
    for item in items:
        options = options_of(item)
        for k in range(samples):
            rid = sample_id(item.item_id, k)
            detail = detail_of(item) | {"unit": item.item_id, "sample": k}
            response = by_id.get(rid)
            if response is None or response.error is not None:
                reason = "missing_response" if response is None else "engine_error"
                judgments.append(Judgment(rid, item.subset, reason, None, False, detail))
                continue
            parsed = parse_option(response.text, options)
            detail |= {"parse_rule": parsed.how, "reply": (response.text or "")[:300], "choice": parsed.index}
            if parsed.index is None:
                judgments.append(Judgment(rid, item.subset, f"unparsed_{parsed.reason}", None, False, detail))
                continue
            judgments.append(Judgment(rid, item.subset, ANSWERED, float(parsed.index), True, detail))
    return mark_refusals(judgments, replies_by(responses, "request_id"))


def by_unit(judgments: Sequence[Judgment]) -> dict[str, list[Judgment]]:
    """The sample judgments of each item, in order."""
    units: dict[str, list[Judgment]] = defaultdict(list)
    for judgment in judgments:
        units[str(judgment.detail["unit"])].append(judgment)
    return dict(units)


def choice_counts(judgments: Sequence[Judgment], n_options: int) -> list[int]:
    """How many of these samples chose each option (readable answers only)."""
    counts = [0] * n_options
    for judgment in judgments:
        if judgment.parsed and judgment.detail.get("choice") is not None:
            counts[int(judgment.detail["choice"])] += 1
    return counts
