"""Replace a partition's (or a whole table's) rows: delete what a scope names and insert a frame, in one transaction.

A re-run replaces exactly the rows it owns: every row written must lie inside its scope and
the keys written must be distinct, checked before anything is written, and DuckLake's commit
conflicts retry the whole replacement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import duckdb
import polars as pl

from themis_dagster.warehouse.appends import append_rows
from themis_dagster.warehouse.ducklake import with_commit_retries
from themis_dagster.warehouse.tables import Table, declared, quote
from themis_dagster.warehouse.transactions import transaction


class Write(NamedTuple):
    """Rows that replace every row of ``table`` matching ``scope`` (column -> value; empty: the whole table)."""

    table: str
    frame: pl.DataFrame
    scope: Mapping[str, str]


class DuplicateKeyError(ValueError):
    """A frame holds two rows with the same key: written, it would break the table's key."""


def _check_keys(declaration: Table, write: Write) -> None:
    """Keep ``declaration.primary_key`` unique without a DuckDB constraint.

    The write deletes every row its scope names, then inserts the frame, in one transaction:
    when the scope's columns are all key columns, every stored row sharing a key with the
    frame lies in the scope and is deleted first, so the table's keys stay unique exactly when
    the frame's are (one polars pass: about 0.1 s for a million string keys).
    """
    key = declaration.primary_key
    if not key:
        return
    outside = sorted(set(write.scope) - set(key))
    if outside:
        raise ValueError(f"{write.table}: a write scoped by {outside} (not key columns) cannot keep {key} unique")
    rest = [column for column in key if column not in write.scope]
    if write.frame.height < 2:
        return
    if not rest:  # the scope is the whole key: at most one row
        raise DuplicateKeyError(f"{write.table}: {write.frame.height} rows for the one key {dict(write.scope)}")
    keys = write.frame.select(rest)
    if keys.n_unique() != keys.height:
        repeated = keys.filter(keys.is_duplicated()).unique(maintain_order=True).head(3).rows()
        raise DuplicateKeyError(f"{write.table}: duplicate {', '.join(rest)} in the rows written, e.g. {repeated}")


def _delete_insert(conn: duckdb.DuckDBPyConnection, write: Write) -> None:
    """Delete the rows ``write.scope`` names and insert ``write.frame``, in the caller's transaction."""
    delete = f"DELETE FROM {quote(write.table)}"  # noqa: S608 - a declared name
    if write.scope:
        delete += " WHERE " + " AND ".join(f"{quote(column)} = ?" for column in write.scope)
    conn.execute(delete, list(write.scope.values()))
    append_rows(conn, write.table, write.frame)


def replace_rows(conn: duckdb.DuckDBPyConnection, writes: Sequence[Write]) -> int:
    """Apply every write in one transaction; returns the rows inserted.

    A stage's rows and the record of which materialization they are (``stage_generations``)
    are never seen apart. Every row of a frame must lie inside its scope and its keys must be
    distinct (``DuplicateKeyError``, before anything is written), so a re-run can never leave
    duplicates or touch another partition. Any exception rolls everything back, so the old
    rows stay.
    """
    for write in writes:
        declaration = declared(write.table)
        declaration.check_columns(write.frame.columns)
        for column, value in write.scope.items():
            if column not in declaration.column_names:
                raise KeyError(f"{write.table} has no column {column!r}")
            if write.frame.height and not write.frame.filter(pl.col(column) != value).is_empty():
                scope = "|".join(write.scope.values())
                raise ValueError(f"{write.table}: frame holds rows outside partition {scope}")
        _check_keys(declaration, write)

    def replace() -> int:
        with transaction(conn):
            for write in writes:
                _delete_insert(conn, write)
        return sum(write.frame.height for write in writes)

    # DuckLake detects concurrent writers at commit (per table): the whole replacement is retried
    label = ", ".join(f"{write.table} {'|'.join(write.scope.values()) or '(all rows)'}" for write in writes)
    return with_commit_retries(replace, label)


def partition_scope(model: str, task: str) -> dict[str, str]:
    """The scope of one (model, task) partition's rows."""
    return {"model": model, "task": task}


def replace_partition(conn: duckdb.DuckDBPyConnection, table: str, frame: pl.DataFrame, model: str, task: str) -> int:
    """Atomically replace the rows of (model, task) in ``table`` with ``frame``; returns the row count."""
    return replace_rows(conn, [Write(table, frame, partition_scope(model, task))])


def replace_table(conn: duckdb.DuckDBPyConnection, table: str, frame: pl.DataFrame) -> int:
    """Replace a whole (unpartitioned) table's contents in one transaction."""
    return replace_rows(conn, [Write(table, frame, {})])
