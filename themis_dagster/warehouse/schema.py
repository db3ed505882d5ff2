"""Create the declared tables (``tables.py``) in a warehouse, and (re)create the analyst views over them."""

from __future__ import annotations

from pathlib import Path

import duckdb

from themis_dagster.warehouse.tables import TABLES

SQL_DIR = Path(__file__).resolve().parent.parent.parent / "sql"


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
    for views in sorted(SQL_DIR.glob("views*.sql")):
        conn.execute(views.read_text())
