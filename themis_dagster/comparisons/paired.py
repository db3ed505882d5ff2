"""One task's paired comparison of two models: match judgments by item id, then test each declared metric.

Only items both models have count (``n_pairs``). Each headline metric the task declares a
``PairedMeasure`` for is compared overall (subset None) and per item subset, with the test
its measure names; the seed and resample count are the task's own parameters.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from themis_dagster.comparisons.statistics import (
    PairedEstimate,
    mcnemar_exact,
    mean_difference_ci,
    paired_bootstrap,
    sign_flip_permutation,
)
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.measures import Binary, Continuous, PairedMeasure, Ratio, paired_metrics
from themis_dagster.tasks.spec import Judgment


class ComparisonError(ValueError):
    """Two models cannot be compared on a task; the message says why (and names what differs)."""


@dataclass(frozen=True)
class Comparison(PairedEstimate):
    """One row of the ``comparisons`` view before Holm's adjustment (which spans the whole battery): the
    paired estimate of one metric, overall or in one subset (its fields first), then what it compared."""

    model: str
    baseline: str
    task: str
    subset: str | None
    metric: str
    n_pairs: int
    test: str
    permutations: int | None = None


def _paired_values(
    mine: list[Judgment], theirs: list[Judgment], value: Callable[[Judgment], float | None]
) -> tuple[np.ndarray, np.ndarray]:
    """Aligned per-item values (same item at the same position) of the items both have and both count."""
    by_id = {j.item_id: j for j in theirs}
    pairs = []
    for judgment in sorted(mine, key=lambda j: j.item_id):
        other = by_id.get(judgment.item_id)
        if other is None:
            continue
        a, b = value(judgment), value(other)
        if a is not None and b is not None:
            pairs.append((float(a), float(b)))
    values = np.asarray(pairs, dtype=float).reshape(-1, 2)
    return values[:, 0], values[:, 1]


Measured = tuple[PairedEstimate, int, int | None]
"""A measure's paired estimate, the pairs it rests on, and the permutations or resamples its test drew."""


def _mean_measure(
    measure: Binary | Continuous, mine: list[Judgment], theirs: list[Judgment], task: LoadedTask
) -> Measured | None:
    value = measure.outcome if isinstance(measure, Binary) else measure.score
    a, b = _paired_values(mine, theirs, value)
    if a.size == 0:
        return None
    low, high = mean_difference_ci(
        a, b, n_resamples=task.params.bootstrap_resamples, confidence=task.params.confidence, seed=task.params.seed
    )
    binary = isinstance(measure, Binary)
    result = mcnemar_exact(a, b) if binary else sign_flip_permutation(a, b, seed=task.params.seed)
    mean_a, mean_b = float(a.mean()), float(b.mean())
    estimate = PairedEstimate(mean_a, mean_b, float((a - b).mean()), low, high, result.p_value)
    return estimate, int(a.size), result.permutations


def _ratio_measure(measure: Ratio, mine: list[Judgment], theirs: list[Judgment], task: LoadedTask) -> Measured | None:
    units_a: dict[str, list[Judgment]] = defaultdict(list)
    units_b: dict[str, list[Judgment]] = defaultdict(list)
    for judgment in mine:
        units_a[measure.unit(judgment)].append(judgment)
    for judgment in theirs:
        units_b[measure.unit(judgment)].append(judgment)
    common = sorted(set(units_a) & set(units_b))
    prepared_a = [measure.prepare(units_a[unit]) for unit in common]
    prepared_b = [measure.prepare(units_b[unit]) for unit in common]
    if not common:
        return None
    result = paired_bootstrap(
        prepared_a,
        prepared_b,
        measure.statistic,
        n_resamples=task.params.bootstrap_resamples,
        confidence=task.params.confidence,
        seed=task.params.seed,
    )
    return result, len(common), result.resamples


def _measure(measure: PairedMeasure, mine: list[Judgment], theirs: list[Judgment], task: LoadedTask) -> Measured | None:
    """The measure's paired estimate over the items both models have; None where they share none."""
    if isinstance(measure, Ratio):
        return _ratio_measure(measure, mine, theirs, task)
    return _mean_measure(measure, mine, theirs, task)


def compare_task(
    task: LoadedTask, model: str, baseline: str, mine: list[Judgment], theirs: list[Judgment]
) -> list[Comparison]:
    """Every declared headline metric of ``task``, overall and per subset, ``model`` against ``baseline``.

    Items are matched by ``item_id``; no item in common raises ComparisonError naming both
    models and the task. A subset is an item's own ``subset`` (the model's judgment's).
    """
    common = {j.item_id for j in mine} & {j.item_id for j in theirs}
    if not common:
        raise ComparisonError(
            f"{task.name}: {model} and {baseline} have no items in common "
            f"({len(mine)} and {len(theirs)} judgments); evaluate both on the same items"
        )
    mine = [j for j in mine if j.item_id in common]
    theirs = [j for j in theirs if j.item_id in common]
    measures = paired_metrics(task.hooks)
    subsets: list[str | None] = [None, *sorted({j.subset for j in mine if j.subset is not None})]
    rows = []
    for metric in task.spec.metrics:
        measure = measures.get(metric.name) if metric.headline else None
        if measure is None:
            continue
        for subset in subsets:
            picked_a = mine if subset is None else [j for j in mine if j.subset == subset]
            ids = {j.item_id for j in picked_a}
            picked_b = [j for j in theirs if j.item_id in ids]
            measured = _measure(measure, picked_a, picked_b, task)
            if measured is None:
                continue
            estimate, n_pairs, permutations = measured
            rows.append(
                Comparison(
                    estimate.value,
                    estimate.baseline_value,
                    estimate.difference,
                    estimate.ci_low,
                    estimate.ci_high,
                    estimate.p_value,
                    model,
                    baseline,
                    task.name,
                    subset,
                    metric.name,
                    n_pairs,
                    measure.test,
                    permutations,
                )
            )
    return rows
