"""Multiple choice by loglikelihood: one request per choice after a shared context, and its scores back.

lm-eval's ``output_type: multiple_choice`` scores each choice as the continuation of one
context and predicts the argmax (``np.argmax``: the first choice wins a tie). BBQ, EsBBQ,
Winogender and DiscrimEval all ask that way; they differ only in their choices and in what
they make of the scores, so the requests and the reading of the answers live here once.
Choices are sent consecutively after their shared context, so vLLM's prefix cache reuses it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence

from themis_dagster.tasks.rendering import render, template_sha256, template_text
from themis_dagster.tasks.spec import Item, Judgment, Request, Response


def choice_requests(
    item: Item, context: str, continuations: Mapping[str, str], template: str, template_sha256: str
) -> list[Request]:
    """One loglikelihood request per choice: id ``<item_id>:<suffix>``, continuation as given."""
    return [
        Request(
            request_id=f"{item.item_id}:{suffix}",
            item_id=item.item_id,
            request_type="loglikelihood",
            context=context,
            continuation=continuation,
            template=template,
            template_sha256=template_sha256,
        )
        for suffix, continuation in continuations.items()
    ]


def build_choice_requests(
    items: Sequence[Item],
    templates: dict[str, str],
    template: str,
    fields: Sequence[str],
    choices: Callable[[Item], Mapping[str, str]],
    delimiter: str = "",
) -> list[Request]:
    """Every item's choice requests: ``template`` rendered with the item's ``fields`` as the context.

    ``choices`` maps an item to its choices by request suffix; each is sent as ``delimiter + choice``.
    """
    digest = template_sha256(template_text(templates, template))
    requests = []
    for item in items:
        context = render(templates, template, **{name: item.fields[name] for name in fields})
        continuations = {suffix: delimiter + choice for suffix, choice in choices(item).items()}
        requests += choice_requests(item, context, continuations, template, digest)
    return requests


def scored_items(
    items: Sequence[Item], responses: Sequence[Response], suffixes: Sequence[str]
) -> Iterator[tuple[Item, list[float] | None, list[float | None]]]:
    """Each item with its choices' loglikelihoods, as ``choice_scores`` reads them from ``responses``."""
    by_id = {response.request_id: response for response in responses}
    for item in items:
        values, scores = choice_scores(by_id, item, suffixes)
        yield item, values, scores


def choice_scores(
    responses: Mapping[str, Response], item: Item, suffixes: Sequence[str]
) -> tuple[list[float] | None, list[float | None]]:
    """The choices' loglikelihoods in order: (all of them if each is finite else None, each as found).

    A choice whose response is missing, failed or not finite makes the item unanswerable
    (the caller records it as ``missing_response``, never guesses).
    """
    found = [responses.get(f"{item.item_id}:{suffix}") for suffix in suffixes]
    scores = [r.logprob if r is not None and r.error is None else None for r in found]
    if any(score is None or not math.isfinite(score) for score in scores):
        return None, scores
    return [float(score) for score in scores if score is not None], scores


def first_argmax(values: Sequence[float]) -> int:
    """The index of the largest value, the first one on a tie (``np.argmax``)."""
    return max(range(len(values)), key=lambda k: (values[k], -k))


def judge_likeliest(
    items: Sequence[Item],
    responses: Sequence[Response],
    suffixes: Sequence[str],
    detail_of: Callable[[Item], dict[str, object]],
    answered: Callable[[Item, int, dict[str, object]], Judgment],
) -> list[Judgment]:
    """Per item: the likeliest choice (first wins a tie) judged by ``answered``; an item missing any
    finite score is ``missing_response`` (not scored), its ``detail_of`` with the scores found."""
    judgments = []
    for item, values, scores in scored_items(items, responses, suffixes):
        if values is None:
            detail = detail_of(item) | {"loglikelihoods": scores}
            judgments.append(Judgment(item.item_id, item.subset, "missing_response", None, False, detail))
            continue
        judgments.append(answered(item, first_argmax(values), {"loglikelihoods": values}))
    return judgments
