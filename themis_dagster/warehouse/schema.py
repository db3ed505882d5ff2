"""Create the declared tables (``tables.py``) in a warehouse, and (re)create the analyst views over them.

The views are package data (``sql/views*.sql`` beside this module), read through
``importlib.resources`` so an installed wheel has them as a checkout does.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

import duckdb

from themis_dagster.warehouse.tables import TABLES

SQL_DIR: Traversable = resources.files("themis_dagster.warehouse") / "sql"


def view_files() -> list[Traversable]:
    """The analyst views' SQL files, in the order they are executed (by name: ``views.sql`` first)."""
    return sorted(
        (entry for entry in SQL_DIR.iterdir() if entry.name.startswith("views") and entry.name.endswith(".sql")),
        key=lambda entry: entry.name,
    )


def ensure_schema(conn: duckdb.DuckDBPyConnection, constraints: bool = False) -> None:
    """Create missing tables (from their declarations) and (re)create the analyst views; safe on every write.

    A table created from an earlier declaration gets the nullable columns declared since
    (its old rows read NULL there), so reads and writes by column name keep working. Tables
    are created without PRIMARY KEY (``Table.ddl``: the writers keep keys unique); a table
    that has one keeps it. ``constraints=True`` creates missing tables with it (old warehouses' DDL).
    """
    for table in TABLES.values():
        conn.execute(table.ddl(constraints))
    existing: dict[str, list[str]] = {}
    query = (
        "SELECT table_name, column_name FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name = current_schema()"
    )
    for table_name, column_name in conn.execute(query).fetchall():
        existing.setdefault(table_name, []).append(column_name)
    for table in TABLES.values():
        for statement in table.missing_columns_ddl(existing.get(table.name, [])):
            conn.execute(statement)
    for views in view_files():
        conn.execute(views.read_text(encoding="utf-8"))
