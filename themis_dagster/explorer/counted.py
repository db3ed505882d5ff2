"""Which judgments a metric counts: the items behind its number, not every judgment of its task.

A metric's value is computed from some of a slice's judgments: BBQ's ``accuracy_ambig`` from the
ambiguous questions whose reply could be read, a share from every judgment. The task declares,
for paired comparisons, the per-item quantity each headline metric is built from
(``PAIRED_METRICS``, ``tasks/measures.py``); the same declaration says which items a value counts
(its denominator: the measure is not None) and, for a 0/1 outcome, which count as 1 (its
numerator). ``refused_rate`` counts every judgment and those refused; a ``<metric>_answered``
variant the judgments not refused that its metric counts. Anything else lists every judgment of
the slice and says so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import duckdb

from themis_dagster.comparisons.store import judgments_of
from themis_dagster.errors import ConfigError
from themis_dagster.refusals.outcome import ANSWERED, REFUSED_RATE
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.measures import Binary, Continuous, PairedMeasure, Ratio, paired_metrics
from themis_dagster.tasks.spec import Judgment
from themis_dagster.warehouse.read.drilldown import Slice, slice_item_ids

MAX_JUDGMENTS = 200_000  # beyond this a slice is listed whole: reading its judgments would hold the page up


@dataclass(frozen=True)
class Counted:
    """The judgments a value counts (``counted``: its denominator) and, for a share, those counted as 1
    (``numerator``; None: the metric is no share of items); ``rule`` says how they were found."""

    counted: list[str]
    numerator: list[str] | None
    rule: str


def _measure_of(task: str, metric: str) -> PairedMeasure | None:
    try:
        found: PairedMeasure | None = paired_metrics(load_task(task).hooks).get(metric)
    except (ConfigError, ImportError, ValueError):  # a task this checkout no longer declares: no measure
        return None
    return found


def _safely(value: Callable[[], object]) -> object:
    """A measure's value for one item; None when the item lacks what the measure reads (an imported reply)."""
    try:
        return value()
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return None


def _is_one(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == 1


def _measured(measure: PairedMeasure, judgments: Sequence[Judgment]) -> tuple[list[str], list[str] | None]:
    """(counted ids, ids counted as 1 or None) of ``judgments`` under ``measure``."""
    if isinstance(measure, Binary | Continuous):
        read = measure.outcome if isinstance(measure, Binary) else measure.score
        values = {j.item_id: _safely(lambda j=j: read(j)) for j in judgments}  # type: ignore[misc]
        kept = [i for i, v in values.items() if v is not None]
        return kept, [i for i in kept if _is_one(values[i])] if isinstance(measure, Binary) else None
    assert isinstance(measure, Ratio)
    units: dict[str, list[Judgment]] = defaultdict(list)
    for judgment in judgments:
        units[str(_safely(lambda j=judgment: measure.unit(j)))].append(judgment)  # type: ignore[misc]
    counted: list[str] = []
    ones: list[str] | None = []
    for members in units.values():
        prepared = _safely(lambda m=members: measure.prepare(m))  # type: ignore[misc]
        if prepared is None:
            continue
        ids = [j.item_id for j in members]
        counted += ids
        if isinstance(prepared, int | float) and not isinstance(prepared, bool) and ones is not None:
            ones += ids if prepared == 1 else []
        else:
            ones = None  # a unit's value is no 0/1 (a tuple of counts): no numerator to list
    return sorted(counted), sorted(ones) if ones is not None else None


def _judged(judgments: Sequence[Judgment], metric: str) -> Counted | None:
    """A metric of a judge model's labels (BOLD's ``toxicity_rate``, ``negative_regard_share``): the items whose
    question (``<question>_status`` in the detail, named in the metric) the judge answered readably; for
    ``<label>_<question>_...`` those it labelled so. None: no judge question is named in the metric."""
    questions = sorted({key.removesuffix("_status") for j in judgments for key in j.detail if key.endswith("_status")})
    question = next((q for q in questions if q in metric.split("_")), None)
    if question is None:
        return None
    counted = [j for j in judgments if j.detail.get(f"{question}_status") == "judged"]
    label = metric.split(f"_{question}")[0] if f"_{question}" in metric else None
    ones = sorted(j.item_id for j in counted if j.detail.get(question) == label) if label else None
    rule = f"the items whose {question} the judge model answered readably" + (
        f"; the numerator: those it called {label}" if label else ""
    )
    return Counted(sorted(j.item_id for j in counted), ones, rule)


def counted_items(conn: duckdb.DuckDBPyConnection, model: str, task: str, metric: str, where: Slice) -> Counted | None:
    """The judgments behind (model, task, metric) on slice ``where``; None: every judgment of the slice (no rule
    is declared, or the slice is too large to read at once)."""
    in_slice = set(slice_item_ids(conn, model, task, where))
    if not in_slice or len(in_slice) > MAX_JUDGMENTS:
        return None
    base = metric.removesuffix(ANSWERED)
    if base == REFUSED_RATE:
        judgments = [j for j in judgments_of(conn, model, task) if j.item_id in in_slice]
        return Counted(
            sorted(j.item_id for j in judgments),
            sorted(j.item_id for j in judgments if j.refused),
            "every judgment counts; the refused ones are its numerator",
        )
    measure = _measure_of(task, base)
    judgments = [j for j in judgments_of(conn, model, task) if j.item_id in in_slice]
    if measure is None:
        return _judged(judgments, base)
    answered = metric != base
    if answered:
        judgments = [j for j in judgments if not j.refused]
    counted, ones = _measured(measure, judgments)
    kind = {Binary: "a 0/1 outcome per item", Continuous: "a score per item", Ratio: "a statistic over items"}
    rule = f"the items {task} counts for {base} ({kind[type(measure)]}, as its paired comparisons read it)"
    return Counted(counted, ones, rule + ("; replies not refused" if answered else ""))
