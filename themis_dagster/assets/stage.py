"""What every evaluation stage does around its own work: read upstream rows, replace its own, describe the run.

A stage reads the records of the stage before it for its partition, computes its own and
replaces its partition's rows in one transaction; these helpers say that once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import duckdb
import polars as pl
from dagster import MetadataValue

from themis_dagster.partitions import EvaluationPartition
from themis_dagster.provenance import code_version
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.warehouse import Write, generations, partition_scope, read_partition, replace_rows
from themis_dagster.warehouse.frames import from_frame, to_frame
from themis_dagster.warehouse.generations import Materialization
from themis_dagster.warehouse.tables import declared

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

RecordT = TypeVar("RecordT", bound="DataclassInstance")


class UpstreamMissingError(RuntimeError):
    """An upstream stage has no rows for this partition: materialize it first."""


def read_upstream(
    conn: duckdb.DuckDBPyConnection,
    table: str,
    key: EvaluationPartition,
    record_type: type[RecordT],
    *,
    required: bool = True,
) -> list[RecordT]:
    """The partition's rows of an upstream stage as records; an empty required stage fails, naming it."""
    frame = read_partition(conn, table, key.model, key.task)
    if required and frame.is_empty():
        raise UpstreamMissingError(f"{table} has no rows for {key}; materialize the upstream asset first")
    return from_frame(table, frame, record_type)


def read_generation(conn: duckdb.DuckDBPyConnection, table: str, key: EvaluationPartition) -> Materialization | None:
    """The materialization of ``table`` the partition holds: read it beside the rows, record it with what they give."""
    return generations.current(conn, table, key.model, key.task)


class StageWrite(NamedTuple):
    """What a stage wrote: its rows, and the materialization (and generation) they are."""

    frame: pl.DataFrame
    materialization: Materialization


def replace_stage(
    conn: duckdb.DuckDBPyConnection,
    table: str,
    key: EvaluationPartition,
    records: list[Any],
    *,
    run_id: str,
    upstream: Materialization | None = None,
    **constants: Any,
) -> StageWrite:
    """Replace the partition's rows of ``table`` with ``records`` and record their materialization, in one transaction.

    ``upstream`` is the upstream stage's materialization as read beside its rows
    (``read_generation``), so ``partition_status`` can tell whether this stage still matches it.
    """
    if "run_id" in declared(table).column_names:
        constants["run_id"] = run_id
    frame = to_frame(table, records, model=key.model, task=key.task, **constants)
    written, lineage = generations.record(table, key.model, key.task, upstream, run_id)
    scope = partition_scope(key.model, key.task)
    replace_rows(conn, [Write(table, frame, scope), Write("stage_generations", lineage, scope | {"stage": table})])
    return StageWrite(frame, written)


def task_metadata(task: LoadedTask) -> dict[str, Any]:
    """What every stage's materialization records about the task it ran (for reproducibility)."""
    return {
        "task": task.name,
        "task_fingerprint": task.spec.fingerprint(),
        "task_params": MetadataValue.json(task.params.model_dump(mode="json")),
        "seed": task.params.seed,
        "code_version": code_version(),
    }


def generation_metadata(written: Materialization) -> dict[str, str]:
    """The ids a materialization shows in the UI: find its rows with ``stage_generations``."""
    return {"materialization": written.materialization, "generation": written.generation}


def preview(frame: pl.DataFrame, rows: int = 5) -> MetadataValue:
    """The first rows as a markdown table, shown in the UI beside the materialization."""
    head = frame.head(rows).to_pandas()
    return MetadataValue.md(head.to_markdown(index=False) if not head.empty else "(no rows)")
