"""Partitions: a dynamic ``model`` dimension x a static ``task`` dimension; a judge (a model) x a calibration set.

The running partition becomes a typed key here, once per asset (``model_and_task``: an
``EvaluationPartition``, ``judge_and_set``: a ``CalibrationPartition``); code below the assets
never sees Dagster's key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from dagster import (
    AssetExecutionContext,
    DynamicPartitionsDefinition,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    StaticPartitionsDefinition,
)

from themis_dagster.evaluation.judging.questions import calibration_set_names
from themis_dagster.evaluation.partition import EvaluationPartition
from themis_dagster.registry.model_id import validate_model_id
from themis_dagster.tasks.loader import evaluation_tasks

MODELS_PARTITION = "models"

models_partitions = DynamicPartitionsDefinition(name=MODELS_PARTITION)
# every task, and the variants (<task>__<perturbation>) the task overrides file declares (THEMIS_TASK_OVERRIDES)
tasks_partitions = StaticPartitionsDefinition(evaluation_tasks())
evaluation_partitions = MultiPartitionsDefinition({"model": models_partitions, "task": tasks_partitions})


def evaluation_key(model: str, task: str) -> MultiPartitionKey:
    """The partition key of one (model, task) evaluation; dimensions sort by name: ``model|task``."""
    key = EvaluationPartition.validated(model, task)
    return MultiPartitionKey({"model": key.model, "task": key.task})


def _two_dimensions(context: AssetExecutionContext, first: str, second: str) -> tuple[str, str]:
    """The running partition's values of two dimensions named in sorted order.

    Why: a key arrives typed or as its string ``first|second`` (Dagster joins dimensions sorted by name).
    """
    key = context.partition_key
    if isinstance(key, MultiPartitionKey):
        dims = key.keys_by_dimension
        return dims[first], dims[second]
    head, _, tail = str(key).partition("|")
    return head, tail


def model_and_task(context: AssetExecutionContext) -> EvaluationPartition:
    """(model, task) of the running partition, whether the key arrives typed or as ``model|task``, validated."""
    model, task = _two_dimensions(context, "model", "task")
    return EvaluationPartition.validated(model, task)


def register_models(instance: object, model_ids: Sequence[str]) -> list[str]:
    """Add validated model ids as ``models`` partitions; returns the ones that were new."""
    from dagster import DagsterInstance

    assert isinstance(instance, DagsterInstance)
    for model_id in model_ids:
        validate_model_id(model_id)
    existing = set(instance.get_dynamic_partitions(MODELS_PARTITION))
    new = [model_id for model_id in model_ids if model_id not in existing]
    if new:
        instance.add_dynamic_partitions(MODELS_PARTITION, new)
    return new


# Judge calibration (assets/judge_calibration.py): a registered judge model x a calibration set.
calibration_sets_partitions = StaticPartitionsDefinition(list(calibration_set_names()))
judge_calibration_partitions = MultiPartitionsDefinition(
    {"judge": models_partitions, "calibration_set": calibration_sets_partitions}
)


class CalibrationPartition(NamedTuple):
    """One (judge, calibration set) partition, validated."""

    judge: str
    calibration_set: str

    def __str__(self) -> str:
        return f"{self.calibration_set}|{self.judge}"


def calibration_key(judge: str, calibration_set: str) -> MultiPartitionKey:
    """The partition key of one judge's calibration; dimensions sort by name: ``calibration_set|judge``."""
    validate_model_id(judge)
    if calibration_set not in calibration_set_names():
        raise ValueError(f"unknown calibration set {calibration_set!r}; known: {', '.join(calibration_set_names())}")
    return MultiPartitionKey({"judge": judge, "calibration_set": calibration_set})


def judge_and_set(context: AssetExecutionContext) -> CalibrationPartition:
    """(judge, calibration set) of the running partition, typed or as ``calibration_set|judge``."""
    calibration_set, judge = _two_dimensions(context, "calibration_set", "judge")
    calibration_key(judge, calibration_set)  # validates both
    return CalibrationPartition(judge, calibration_set)
