"""Rebuild the tables of a warehouse created with PRIMARY KEYs without them (optional, one-off).

Warehouses created before keys were kept unique by the writers (``partitions.replace_rows``)
hold each stage table's key as a DuckDB PRIMARY KEY. They keep working as they are; the index
only makes writes slower (a re-run's replacement of a million-row partition: 14 to 22 times
the CPU, ``bench/judge_and_keys.py``). This drops it: each such table is copied
into a new table of the same declaration without the key, which then takes its name, in one
transaction per table (a failure leaves that table as it was). DuckDB cannot drop a key in
place. It also brings a warehouse an older version wrote up to the current schema (the tables,
columns and views it lacks, ``ensure_schema``), which the read layer asks for when it finds one
(``warehouse/read/query.py``). Run it while nothing else writes to the file:

    python -m themis_dagster.warehouse.migrate data/warehouse.duckdb
"""

from __future__ import annotations

import argparse
import dataclasses

import duckdb

from themis_dagster.warehouse.schema import ensure_schema
from themis_dagster.warehouse.tables import TABLES, quote
from themis_dagster.warehouse.transactions import transaction


def keyed_tables(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """The declared tables of this database that hold a PRIMARY KEY constraint."""
    rows = conn.execute(
        "SELECT DISTINCT table_name FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY' "
        "AND database_name = current_database() AND schema_name = current_schema()"
    ).fetchall()
    return sorted(name for (name,) in rows if name in TABLES)


def drop_primary_keys(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """Rebuild every declared table that has a PRIMARY KEY without it; returns their names (none: nothing to do)."""
    ensure_schema(conn)  # every declared column present, so the copy is by name
    rebuilt = keyed_tables(conn)
    for name in rebuilt:
        table = TABLES[name]
        staging = dataclasses.replace(table, name=f"{name}__without_key")
        names = ", ".join(quote(column) for column in table.column_names)
        with transaction(conn):
            conn.execute(f"DROP TABLE IF EXISTS {quote(staging.name)}")
            conn.execute(staging.ddl())
            conn.execute(f"INSERT INTO {quote(staging.name)} ({names}) SELECT {names} FROM {quote(name)}")  # noqa: S608 - declared names
            conn.execute(f"DROP TABLE {quote(name)}")
            conn.execute(f"ALTER TABLE {quote(staging.name)} RENAME TO {quote(name)}")
    if rebuilt:
        ensure_schema(conn)  # the analyst views again, over the rebuilt tables
    return rebuilt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("warehouse", help="the DuckDB file")
    args = parser.parse_args()
    with duckdb.connect(args.warehouse) as conn:
        rebuilt = drop_primary_keys(conn)
        conn.execute("CHECKPOINT")
    print(f"rebuilt without PRIMARY KEY: {', '.join(rebuilt)}" if rebuilt else "no table has a PRIMARY KEY")


if __name__ == "__main__":
    main()
