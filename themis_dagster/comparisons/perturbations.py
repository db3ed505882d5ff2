"""The paired effect of a perturbation: a task's variant partition against the original, item by item.

A perturbation's variant keeps every item id, so its judgments pair with the original's exactly
as two models' do (``paired.compare_task``): each headline metric the task declares a
``PairedMeasure`` for, with that measure's test, overall and per subset. Two scopes:

- ``changed``: only the items the perturbation rewrote. An item it left unchanged would add a
  pair that differs only by the engine's own noise, so it is counted (``n_unchanged``), never
  silently compared. The effect of a perturbation on the items it touches.
- ``all``: every item, as HELM reports a perturbed scenario's score against the original's:
  how the benchmark's number moves. A perturbation that changes nothing (``identity``) has
  difference 0 and p = 1 here, which the engine must show by answering the same text the same way.

Holm's adjustment (``holm``) runs over one model's whole battery in each scope: every task,
perturbation, metric and subset with a p-value.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from themis_dagster.comparisons.paired import Comparison, compare_task
from themis_dagster.comparisons.statistics import holm
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.spec import Judgment

SCOPES = ("changed", "all")


@dataclass(frozen=True)
class PerturbationEffect:
    """One row of ``perturbation_effects``: the perturbed value against the original on the same items."""

    model: str
    task: str
    perturbation: str
    scope: str
    subset: str | None
    metric: str
    value: float | None
    original_value: float | None
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    n_pairs: int
    n_changed: int
    n_unchanged: int
    test: str
    permutations: int | None = None
    p_adjusted: float | None = None


def _rows(
    comparisons: Iterable[Comparison], perturbation: str, scope: str, n_changed: int, n_unchanged: int
) -> list[PerturbationEffect]:
    return [
        PerturbationEffect(
            c.model,
            c.task,
            perturbation,
            scope,
            c.subset,
            c.metric,
            c.value,
            c.baseline_value,
            c.difference,
            c.ci_low,
            c.ci_high,
            c.p_value,
            c.n_pairs,
            n_changed,
            n_unchanged,
            c.test,
            c.permutations,
        )
        for c in comparisons
    ]


def perturbation_effects(
    task: LoadedTask,
    model: str,
    perturbation: str,
    original: Sequence[Judgment],
    perturbed: Sequence[Judgment],
    changed: Iterable[str],
) -> list[PerturbationEffect]:
    """Every declared headline metric of ``task``, perturbed against original, in both scopes.

    ``changed``: the item ids whose requests the perturbation rewrote. Items only one side has
    are no pair. No item in common fails (``ComparisonError``); none changed gives no ``changed``
    rows, and the ``all`` rows say ``n_changed`` = 0.
    """
    common = {j.item_id for j in original} & {j.item_id for j in perturbed}
    changed_ids = set(changed) & common
    n_changed, n_unchanged = len(changed_ids), len(common - changed_ids)
    rows = _rows(
        compare_task(task, model, model, list(perturbed), list(original)), perturbation, "all", n_changed, n_unchanged
    )
    if changed_ids:
        picked = [j for j in perturbed if j.item_id in changed_ids], [j for j in original if j.item_id in changed_ids]
        rows = _rows(compare_task(task, model, model, *picked), perturbation, "changed", n_changed, n_unchanged) + rows
    return rows


def with_holm(rows: Sequence[PerturbationEffect]) -> list[PerturbationEffect]:
    """``rows`` with ``p_adjusted``: Holm over each (model, scope) battery's rows that have a p-value."""
    families: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        if row.p_value is not None:
            families[(row.model, row.scope)].append(index)
    adjusted = list(rows)
    for members in families.values():
        values = holm([rows[i].p_value or 0.0 for i in members])
        for index, value in zip(members, values, strict=True):
            adjusted[index] = replace(rows[index], p_adjusted=value)
    return adjusted
