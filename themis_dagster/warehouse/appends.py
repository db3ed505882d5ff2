"""Append a frame's rows to a declared table: every row (history tables), or only the keys not held yet."""

from __future__ import annotations

import duckdb
import polars as pl

from themis_dagster.warehouse.tables import declared, quote
from themis_dagster.warehouse.transactions import transaction


def append_rows(conn: duckdb.DuckDBPyConnection, table: str, frame: pl.DataFrame) -> int:
    """Append rows (for the history tables that keep every materialization), in the caller's transaction if any.

    The frame must hold exactly the table's columns (``Table.check_columns``), in any order.
    """
    declaration = declared(table)
    declaration.check_columns(frame.columns)
    if frame.height == 0:
        return 0
    names = ", ".join(quote(column) for column in declaration.column_names)
    conn.register("themis_frame", frame.select(declaration.column_names).to_arrow())
    try:
        conn.execute(f"INSERT INTO {quote(table)} ({names}) SELECT {names} FROM themis_frame")  # noqa: S608 - declared names
    finally:
        conn.unregister("themis_frame")
    return frame.height


def append_new(conn: duckdb.DuckDBPyConnection, table: str, frame: pl.DataFrame, key: str) -> int:
    """Append, in one transaction, the rows whose ``key`` the table does not hold yet; returns how many.

    Keeps ``key`` unique by construction (DuckLake tables have no PRIMARY KEY), for append-only
    tables written by several runs, such as the request cache.
    """
    declaration = declared(table)
    declaration.check_columns(frame.columns)
    if key not in declaration.column_names:
        raise KeyError(f"{table} has no column {key!r}")
    names = ", ".join(quote(column) for column in declaration.column_names)
    fresh = frame.unique(subset=[key], keep="first", maintain_order=True)
    conn.register("themis_frame", fresh.select(declaration.column_names).to_arrow())
    try:
        with transaction(conn):
            before = conn.execute(f"SELECT count(*) FROM {quote(table)}").fetchone()  # noqa: S608 - declared names
            conn.execute(
                f"INSERT INTO {quote(table)} ({names}) SELECT {names} FROM themis_frame "  # noqa: S608
                f"WHERE {quote(key)} NOT IN (SELECT {quote(key)} FROM {quote(table)})"
            )
            after = conn.execute(f"SELECT count(*) FROM {quote(table)}").fetchone()  # noqa: S608
    finally:
        conn.unregister("themis_frame")
    return int(after[0] if after else 0) - int(before[0] if before else 0)
