"""What every evaluation stage does around its own work: read the upstream stage's rows, replace its own.

A stage reads the rows of the stage before it for its partition, computes its own and
replaces its partition's rows in one transaction, with the materialization they are
(``warehouse/generations.py``); these helpers say that once. ``Warehouse`` is what the stages
need of the warehouse resource: short connections, opened per read or write, never held while
an engine works.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from itertools import islice
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar, cast

import duckdb
import polars as pl

from themis_dagster.evaluation.lazy_records import LazyRecords
from themis_dagster.evaluation.partition import EvaluationPartition
from themis_dagster.warehouse import generations
from themis_dagster.warehouse.frames import from_frame, to_frame
from themis_dagster.warehouse.generations import Materialization
from themis_dagster.warehouse.partitions import Write, partition_scope, replace_rows
from themis_dagster.warehouse.reads import read_partition
from themis_dagster.warehouse.tables import declared

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

RecordT = TypeVar("RecordT", bound="DataclassInstance")
T = TypeVar("T")


class Warehouse(Protocol):
    """Short-lived warehouse connections (``resources.WarehouseResource``): ``connect`` with the schema
    ensured, ``get_connection`` without (the request cache's appender opens its own)."""

    def connect(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]: ...

    def get_connection(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]: ...


# Records a stage holds as Python objects at once (items, requests, judgments); the rest of a
# partition stays in columnar frames.
RECORD_CHUNK = 8192


class UpstreamMissingError(RuntimeError):
    """An upstream stage has no rows for this partition: materialize it first."""


def settle_heap() -> None:
    """Move the objects alive now (imported modules, Dagster's definitions) out of the garbage collector's sight.

    A stage allocates a record per row; every full collection the allocations trigger would
    walk the process's million-odd long-lived objects again (a quarter of the answering
    stage's time at 40k requests: ``bench/chain_scale.py``). ``gc.freeze`` keeps them out of
    later collections; the stage's own garbage is collected as usual.
    """
    gc.freeze()


def read_upstream_frame(
    conn: duckdb.DuckDBPyConnection, table: str, key: EvaluationPartition, *, required: bool = True
) -> pl.DataFrame:
    """The partition's rows of an upstream stage as one columnar frame; an empty required stage fails, naming it."""
    frame = read_partition(conn, table, key.model, key.task)
    if required and frame.is_empty():
        raise UpstreamMissingError(f"{table} has no rows for {key}; materialize the upstream asset first")
    return frame


def read_upstream(
    conn: duckdb.DuckDBPyConnection,
    table: str,
    key: EvaluationPartition,
    record_type: type[RecordT],
    *,
    required: bool = True,
) -> list[RecordT]:
    """The partition's rows of an upstream stage as records; an empty required stage fails, naming it."""
    return from_frame(table, read_upstream_frame(conn, table, key, required=required), record_type)


def read_stage(warehouse: Warehouse, table: str, key: EvaluationPartition, *, required: bool = True) -> pl.DataFrame:
    """``read_upstream_frame`` in a connection of its own: for rows a stage reads only if it turns out to need them."""
    with warehouse.connect() as conn:
        return read_upstream_frame(conn, table, key, required=required)


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
    beside: Sequence[Write] = (),
    **constants: Any,
) -> StageWrite:
    """Replace the partition's rows of ``table`` with ``records`` and record their materialization.

    ``beside``: writes of tables the stage fills next to its own (``judged_metrics``), in the same transaction.
    """
    if "run_id" in declared(table).column_names:
        constants["run_id"] = run_id
    frame = to_frame(table, records, model=key.model, task=key.task, **constants)
    return replace_stage_frame(conn, table, key, frame, run_id=run_id, upstream=upstream, beside=beside)


def chunked(records: Iterable[T], size: int = RECORD_CHUNK) -> Iterator[list[T]]:
    """``records`` in lists of ``size`` (the last one shorter), consumed lazily."""
    iterator = iter(records)
    while chunk := list(islice(iterator, size)):
        yield chunk


def stage_frame(
    table: str, key: EvaluationPartition, chunks: Iterable[Sequence[Any]], **constants: Any
) -> pl.DataFrame:
    """One frame of ``table`` from records arriving a chunk at a time: only a chunk is ever held as objects."""
    frames = [to_frame(table, list(chunk), model=key.model, task=key.task, **constants) for chunk in chunks]
    return pl.concat(frames) if frames else to_frame(table, [], model=key.model, task=key.task, **constants)


def replace_stage_frame(
    conn: duckdb.DuckDBPyConnection,
    table: str,
    key: EvaluationPartition,
    frame: pl.DataFrame,
    *,
    run_id: str,
    upstream: Materialization | None = None,
    beside: Sequence[Write] = (),
) -> StageWrite:
    """Replace the partition's rows of ``table`` with ``frame`` and record their materialization, in one transaction.

    ``upstream`` is the upstream stage's materialization as read beside its rows
    (``read_generation``), so ``partition_status`` can tell whether this stage still matches it.
    """
    written, lineage = generations.record(table, key.model, key.task, upstream, run_id)
    scope = partition_scope(key.model, key.task)
    replace_rows(
        conn, [Write(table, frame, scope), Write("stage_generations", lineage, scope | {"stage": table}), *beside]
    )
    return StageWrite(frame, written)


class ByItem:
    """A stage's rows (requests, responses) lined up with the partition's items, for judging a chunk of items at a time.

    The rows are ordered by their item's position once (a columnar sort, stable within an
    item), so the rows of items ``start..stop`` are one slice: linear in the partition,
    whatever order the table stores them in. Rows whose item is not in ``items`` are left out.
    """

    def __init__(self, items: pl.DataFrame, frame: pl.DataFrame) -> None:
        self._items, self._frame = items, frame
        self._lined: tuple[pl.DataFrame, pl.Series] | None = None

    def _rows(self) -> tuple[pl.DataFrame, pl.Series]:
        """The rows in item order and their items' positions, sorted on first use (never, if no one asks)."""
        if self._lined is None:
            ids = self._items.get_column("item_id")
            positions = pl.DataFrame({"item_id": ids, "_item_position": pl.int_range(ids.len(), eager=True)})
            rows = (
                self._frame.with_row_index("_row")
                .join(positions, on="item_id", how="inner")
                .sort("_item_position", "_row")
            )
            self._lined = rows, rows.get_column("_item_position")
        return self._lined

    def _slice(self, start: int, stop: int) -> pl.DataFrame:
        rows, position = self._rows()
        first = int(position.search_sorted(start, "left"))
        last = int(position.search_sorted(stop, "left"))
        return rows.slice(first, last - first)

    def records(self, table: str, record_type: type[RecordT], start: int, stop: int) -> list[RecordT]:
        """The rows of the items at positions ``start`` (included) to ``stop`` (excluded), as records."""
        return from_frame(table, self._slice(start, stop), record_type)

    def lazy_records(self, table: str, record_type: type[RecordT], start: int, stop: int) -> list[RecordT]:
        """``records``, built (and the rows lined up) only if the caller looks at them: a read-only list."""
        return cast(list[RecordT], LazyRecords(lambda: self.records(table, record_type, start, stop)))
