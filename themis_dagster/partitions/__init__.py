"""Partitions: a dynamic ``model`` dimension x a static ``task`` dimension."""

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

from themis_dagster.registry.model_id import validate_model_id
from themis_dagster.tasks.loader import task_names

MODELS_PARTITION = "models"

models_partitions = DynamicPartitionsDefinition(name=MODELS_PARTITION)
tasks_partitions = StaticPartitionsDefinition(task_names())
evaluation_partitions = MultiPartitionsDefinition({"model": models_partitions, "task": tasks_partitions})


def evaluation_key(model: str, task: str) -> MultiPartitionKey:
    """The partition key of one (model, task) evaluation; dimensions sort by name: ``model|task``."""
    validate_model_id(model)
    if task not in task_names():
        raise ValueError(f"unknown task {task!r}; known tasks: {', '.join(task_names())}")
    return MultiPartitionKey({"model": model, "task": task})


class EvaluationPartition(NamedTuple):
    """One (model, task) partition, validated; the rows of every stage table it owns share it."""

    model: str
    task: str

    def __str__(self) -> str:
        return f"{self.model}|{self.task}"


def model_and_task(context: AssetExecutionContext) -> EvaluationPartition:
    """(model, task) of the running partition, whether the key arrives typed or as ``model|task``."""
    key = context.partition_key
    if isinstance(key, MultiPartitionKey):
        dims = key.keys_by_dimension
        model, task = dims["model"], dims["task"]
    else:
        model, _, task = str(key).partition("|")
    evaluation_key(model, task)  # validates both
    return EvaluationPartition(model, task)


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
