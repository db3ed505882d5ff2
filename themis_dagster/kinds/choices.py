"""Multiple choice, lm-eval's ``output_type: multiple_choice``: a task kind declared, not written again per benchmark.

lm-eval scores each choice as the continuation of one context and predicts the argmax
(``np.argmax``: the first choice wins a tie); a task only says what its choices, context and
target are (``doc_to_choice``, ``doc_to_text``, ``doc_to_target``) and what an answer means
(``process_results``). Here a benchmark of that kind (BBQ and its translations, WinoBias,
Winogender) declares the same once, as a task module's ``TASK`` (``tasks/spec.py``):

- a ``ChoiceBenchmark``: its data reader (``load_items``), what a chosen choice means for one
  item (``answered``: the judgment, from the gold, stereotyped and UNKNOWN answers its items
  carry as fields), what every judgment records about its item (``detail``), its metrics and
  ``PAIRED_METRICS``;
- per way of asking, a ``ChoiceTask``: ``LikeliestChoice`` below (the loglikelihood of each
  choice after the context: ``choices``, ``ids``, ``context``, ``template``) or ``LetteredChoice``
  (``kinds/lettered.py``: the choices as letters in a chat message, the reply read).

The kind builds the requests and judges the answers; a benchmark writes neither. Choices are
sent consecutively after their shared context, so vLLM's prefix cache reuses it. The functions
below the classes are the kind's steps, also used by tasks that ask by loglikelihood in their
own way (DiscrimEval, StereoSet).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from themis_dagster.tasks.rendering import render, template_sha256, template_text
from themis_dagster.tasks.spec import (
    ComputeMetrics,
    Item,
    Judgment,
    LoadItems,
    MetricValue,
    PairedMetrics,
    Request,
    Response,
    TaskParams,
)

ChoicesOf = Callable[[Item, Any], Sequence[str]]
"""An item's choices in order (lm-eval's ``doc_to_choice``), given the task's params."""
Answered = Callable[[Item, int, dict[str, Any]], Judgment]
"""The judgment of an item whose choice ``k`` was chosen, its evidence (scores, or the reply read) merged into
``detail``."""


def param_template(item: Item, params: Any) -> str:
    """The template the task's ``params.template`` names: every item's, unless a task declares otherwise."""
    return str(params.template)


def graded(item: Item, prediction: int, detail: dict[str, Any]) -> Judgment:
    """``correct`` or ``wrong`` against the item's gold choice (its ``label`` field), scored 1 or 0."""
    correct = prediction == item.fields["label"]
    return Judgment(item.item_id, item.subset, "correct" if correct else "wrong", 1.0 if correct else 0.0, True, detail)


@dataclass(frozen=True)
class ChoiceBenchmark:
    """What a multiple-choice benchmark provides once, for every way of asking it."""

    load_items: LoadItems
    answered: Answered
    detail: Callable[[Item], dict[str, Any]]
    """What every judgment records about its item (an unanswered one records only this)."""
    compute_metrics: ComputeMetrics
    PAIRED_METRICS: PairedMetrics | None = None


@dataclass(frozen=True)
class ChoiceTask:
    """A task asking a ``ChoiceBenchmark``'s items: the hooks of ``tasks/spec.py::TaskModule`` it shares.

    ``choices``: the item field holding the choices, or a function of the item and params;
    ``context``: the item fields the template shows; ``template``: the template's name for an item.
    """

    benchmark: ChoiceBenchmark
    Params: type[TaskParams]
    choices: str | ChoicesOf
    context: tuple[str, ...] = ("context", "question")
    template: Callable[[Item, Any], str] = param_template

    def choices_of(self, item: Item, params: Any) -> list[str]:
        """The item's choices, in the order they are asked."""
        if isinstance(self.choices, str):
            return list(item.fields[self.choices])
        return list(self.choices(item, params))

    def shown(self, item: Item) -> dict[str, Any]:
        """The item fields the template shows."""
        return {name: item.fields[name] for name in self.context}

    @property
    def load_items(self) -> LoadItems:
        return self.benchmark.load_items

    @property
    def PAIRED_METRICS(self) -> PairedMetrics | None:
        return self.benchmark.PAIRED_METRICS

    def compute_metrics(self, judgments: list[Judgment], params: Any) -> list[MetricValue]:
        return self.benchmark.compute_metrics(judgments, params)


@dataclass(frozen=True, kw_only=True)
class LikeliestChoice(ChoiceTask):
    """Asked by loglikelihood: one request per choice, ``params.target_delimiter`` + choice after the context.

    ``ids``: each choice's request id suffix (``<item_id>:<suffix>``), a format of its index ``k``
    (``"ans{k}"``) or one name per choice. The prediction is the likeliest choice (the first on a
    tie); an item missing a finite score for any choice is ``missing_response``, its detail with the
    scores found unless ``missing_scores`` is False.
    """

    ids: str | tuple[str, ...]
    missing_scores: bool = True

    def suffixes(self, choices: Sequence[str]) -> list[str]:
        if isinstance(self.ids, str):
            return [self.ids.format(k=k) for k in range(len(choices))]
        return list(self.ids)

    def build_requests(self, items: list[Item], params: Any, templates: dict[str, str]) -> list[Request]:
        """Every item's choice requests, items grouped by template (in order of first use), each group in order."""
        groups: dict[str, list[Item]] = {}
        for item in items:
            groups.setdefault(self.template(item, params), []).append(item)
        requests: list[Request] = []
        for template, members in groups.items():
            requests += build_choice_requests(
                members, templates, template, self.context, lambda item: self._by_suffix(item, params),
                params.target_delimiter,
            )  # fmt: skip
        return requests

    def _by_suffix(self, item: Item, params: Any) -> dict[str, str]:
        choices = self.choices_of(item, params)
        return dict(zip(self.suffixes(choices), choices, strict=True))

    def judge(
        self, items: list[Item], requests: list[Request], responses: list[Response], params: Any
    ) -> list[Judgment]:
        """Per item: the likeliest choice, judged by the benchmark's ``answered``; or ``missing_response``."""
        by_id = {response.request_id: response for response in responses}
        judgments = []
        for item in items:
            values, scores = choice_scores(by_id, item, self.suffixes(self.choices_of(item, params)))
            if values is None:
                found = {"loglikelihoods": scores} if self.missing_scores else {}
                detail = self.benchmark.detail(item) | found
                judgments.append(Judgment(item.item_id, item.subset, "missing_response", None, False, detail))
                continue
            judgments.append(self.benchmark.answered(item, first_argmax(values), {"loglikelihoods": values}))
        return judgments


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
