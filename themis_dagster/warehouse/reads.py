"""Read a declared table's rows with bound parameters: one (model, task) partition, or the rows of some keys;
and the rows of a query over a table or view that may not exist yet."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import polars as pl

from themis_dagster.warehouse.tables import declared, quote


def read_partition(conn: duckdb.DuckDBPyConnection, table: str, model: str, task: str) -> pl.DataFrame:
    """All rows of (model, task) in ``table``, in the table's column order."""
    names = ", ".join(quote(column) for column in declared(table).column_names)
    query = f"SELECT {names} FROM {quote(table)} WHERE model = ? AND task = ?"  # noqa: S608
    return conn.execute(query, [model, task]).pl()


def carries_reasoning(conn: duckdb.DuckDBPyConnection, model: str, task: str) -> bool:
    """Whether some reply of (model, task) carries reasoning: split by the engine, a server or an import."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM responses WHERE model = ? AND task = ? AND reasoning IS NOT NULL)", [model, task]
    ).fetchone()
    return bool(row and row[0])


def read_by_key(conn: duckdb.DuckDBPyConnection, table: str, key: str, values: list[str]) -> pl.DataFrame:
    """The rows of ``table`` whose ``key`` is one of ``values``, one row per value.

    ``append_new`` stores a value once; should two writers race, their rows hold the same
    answer and either one is returned.
    """
    declaration = declared(table)
    if key not in declaration.column_names:
        raise KeyError(f"{table} has no column {key!r}")
    names = ", ".join(f"t.{quote(column)}" for column in declaration.column_names)
    conn.register("themis_keys", pl.DataFrame({"key": values}, schema={"key": pl.String}).to_arrow())
    try:
        query = (
            f"SELECT {names} FROM {quote(table)} t JOIN themis_keys k ON t.{quote(key)} = k.key "  # noqa: S608
            f"QUALIFY row_number() OVER (PARTITION BY t.{quote(key)} ORDER BY t.{quote(key)}) = 1"
        )
        return conn.execute(query).pl()
    finally:
        conn.unregister("themis_keys")


Params = Sequence[object] | Mapping[str, object]


def bound(params: Params) -> list[object] | dict[str, object]:
    """Positional (``?``) or named (``$name``) parameters as DuckDB takes them."""
    return dict(params) if isinstance(params, Mapping) else list(params)


def optional_rows(conn: duckdb.DuckDBPyConnection, sql: str, params: Params = ()) -> list[dict[str, Any]] | None:
    """Rows as dicts, or None when a table, view or column the query names is absent (not built yet)."""
    try:
        cursor = conn.execute(sql, bound(params))
    except (duckdb.CatalogException, duckdb.BinderException):
        return None
    names = [column[0] for column in cursor.description or []]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def table_exists(conn: duckdb.DuckDBPyConnection, table: str) -> bool:
    """Whether ``table`` exists yet: readers of an asset's table answer None before its first materialization."""
    found = conn.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [table]).fetchone()
    return bool(found and found[0])
