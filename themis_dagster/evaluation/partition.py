"""The key of one evaluation: a (model, task) pair, checked once where a run starts.

Dagster hands an evaluation asset its partition as a ``MultiPartitionKey`` or, launched with
only the ``dagster/partition`` tag, as the string ``model|task`` (``partitions/``). Both become
one ``EvaluationPartition`` at the start of a stage; every stage function takes that typed key,
and every row of a stage table it owns carries its ``model`` and ``task``.
"""

from __future__ import annotations

from dataclasses import dataclass

from themis_dagster.registry.model_id import validate_model_id
from themis_dagster.tasks.loader import task_names
from themis_dagster.tasks.variants import split_variant


@dataclass(frozen=True)
class EvaluationPartition:
    """One (model, task) partition. ``validated`` and ``parse`` check both names; the constructor does not
    (a key built in a test or a benchmark may name a task that is not declared)."""

    model: str
    task: str

    def __str__(self) -> str:
        return f"{self.model}|{self.task}"

    @classmethod
    def validated(cls, model: str, task: str) -> EvaluationPartition:
        """The key of a registered-style model id and a declared task or a variant of one
        (``<task>__<perturbation>``, its perturbation checked when the task loads); either failing raises
        ``ValueError``."""
        validate_model_id(model)
        if split_variant(task)[0] not in task_names():
            raise ValueError(f"unknown task {task!r}; known tasks: {', '.join(task_names())}")
        return cls(model, task)

    @classmethod
    def parse(cls, key: str) -> EvaluationPartition:
        """The key written ``model|task`` (Dagster joins the dimensions sorted by name), validated."""
        model, _, task = key.partition("|")
        return cls.validated(model, task)
