"""A perturbation applied to a task's rendered requests: every text the engine will see, rewritten.

The prompt, each chat message, a loglikelihood request's context and its continuation (HELM
perturbs an instance's references with its input, so options and text stay consistent: a
Winogender antecedent or a BBQ answer naming "the man" becomes "the woman" with the context). The
request and item ids stay: the variant pairs with the original item by item. An item none of
whose requests changed is *unchanged*: counted, and compared apart (``comparisons/perturbations.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from themis_dagster.exchange import ChatMessage, Request
from themis_dagster.perturbations.spec import Perturbation


@dataclass(frozen=True)
class PerturbedRequests:
    """The rewritten requests, which items changed and which did not, and how many words were replaced."""

    requests: list[Request]
    changed: frozenset[str]
    unchanged: frozenset[str]
    replaced: int

    def summary(self) -> dict[str, int]:
        """The counts a materialization reports."""
        return {
            "items": len(self.changed) + len(self.unchanged),
            "items_changed": len(self.changed),
            "items_unchanged": len(self.unchanged),
            "words_replaced": self.replaced,
        }


def perturb_request(request: Request, perturbation: Perturbation) -> tuple[Request, int]:
    """``request`` with each of its texts rewritten, and the number of words replaced."""
    replaced = 0

    def rewrite(text: str | None) -> str | None:
        nonlocal replaced
        if text is None:
            return None
        swapped = perturbation.apply(text)
        replaced += swapped.replaced
        return swapped.text

    messages: list[ChatMessage] | None = None
    if request.messages is not None:
        messages = [{**message, "content": rewrite(message.get("content")) or ""} for message in request.messages]
    rewritten = replace(
        request,
        prompt=rewrite(request.prompt),
        context=rewrite(request.context),
        continuation=rewrite(request.continuation),
        messages=messages,
    )
    return rewritten, replaced


def perturb_requests(requests: Iterable[Request], perturbation: Perturbation) -> PerturbedRequests:
    """Every request rewritten; an item is changed when any of its requests' texts changed."""
    out: list[Request] = []
    items: dict[str, bool] = {}
    total = 0
    for request in requests:
        rewritten, replaced = perturb_request(request, perturbation)
        out.append(rewritten)
        total += replaced
        items[request.item_id] = items.get(request.item_id, False) or rewritten != request
    changed = frozenset(item for item, moved in items.items() if moved)
    return PerturbedRequests(out, changed, frozenset(items) - changed, total)
