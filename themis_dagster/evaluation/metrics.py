"""Stage 5, ``metric_values``: the task's metrics over its judgments, and what the platform adds beside them.

Beside the task's own metrics (``compute_metrics_frame`` a column at a time where offered, else
``compute_metrics``): each metric a calibrated judge counted, as judged and corrected for the
judge's errors (``judged_metrics``); ``refused_rate``, ``n_answered`` and the metrics over the
replies not refused, where the task marked refusals (a refusal judge's ``refused_rate`` judged
and corrected too); the share of replies the reply guard withheld, where it could have.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime

import polars as pl

from themis_dagster.evaluation.judging.calibrations import Calibrations
from themis_dagster.evaluation.judging.reply_guard import GUARD_OUTCOMES, GUARDED, withheld_rates
from themis_dagster.evaluation.partition import EvaluationPartition
from themis_dagster.evaluation.task_frames import columnar_metrics
from themis_dagster.judging.correction import JudgedValue
from themis_dagster.refusals.judged import refusal_judged_values
from themis_dagster.refusals.outcome import marked, refusal_metrics
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.spec import JudgedInputs, Judgment, MetricValue
from themis_dagster.warehouse.frames import from_frame, rows_frame


@dataclass(frozen=True)
class Metrics:
    """The partition's metric values (``metric_values``) and its judged metrics (``judged_metrics``)."""

    values: list[MetricValue]
    judged: list[JudgedValue]


def task_metrics(task: LoadedTask, judgments: pl.DataFrame) -> list[MetricValue]:
    """The task's own metrics over a ``judgments`` frame: its columnar hook where it offers one."""
    if (columnar := columnar_metrics(task)) is not None:
        return columnar(judgments, task.params)
    return task.hooks.compute_metrics(from_frame("judgments", judgments, Judgment), task.params)


def metric_values(
    task: LoadedTask, judgments: pl.DataFrame, *, reasoning: Callable[[], bool], calibrations: Calibrations
) -> Metrics:
    """Every metric of the partition from its ``judgments`` frame (module docstring).

    ``reasoning()``: whether the model declares reasoning or its replies carry some (a server or an
    import split them), so the guard may have withheld replies; asked only for a task whose replies
    the guard reads. ``calibrations``: the judges' stored calibrations, read only for a judged task.
    """
    values = task_metrics(task, judgments)
    judged: list[JudgedValue] = []
    if task.judge_model and (judge := task.calibrated_judge) is not None:  # each judged metric beside its judge
        records = from_frame("judgments", judgments, Judgment)
        judged = judge.judged_values(JudgedInputs(records, values, task.params, calibrations.of_judge(task)))
        del records
    if (refusal_judge := task.params.refusal_judge_model) and marked(judgments):  # refusals decided by a model
        calibration = calibrations.of_refusal_judge(refusal_judge)
        judged = [*judged, *refusal_judged_values(judgments, refusal_judge, calibration, task.params)]
    if marked(judgments):  # refusals beside the task's metrics, and its metrics over answers
        marks = {f"{scale.metric}_mark" for scale in task.hooks.marks}  # grades of the published metric only
        values = [
            *values,
            *refusal_metrics(judgments, values, lambda rows: task_metrics(task, rows), task.params, marks),
        ]
    if task.spec.request_type in GUARDED and (reasoning() or judgments["outcome"].is_in(GUARD_OUTCOMES).any()):
        values = [*values, *withheld_rates(judgments, task.params)]  # how many replies the guard withheld
    return Metrics(values, judged)


def judged_metrics_frame(
    judged: list[JudgedValue], key: EvaluationPartition, run_id: str, materialized_at: datetime
) -> pl.DataFrame:
    """The ``judged_metrics`` rows of the partition, written with its metric values in one transaction."""
    partition = {"model": key.model, "task": key.task, "run_id": run_id, "materialized_at": materialized_at}
    return rows_frame("judged_metrics", [asdict(value) | partition for value in judged])
