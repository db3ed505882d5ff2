"""The DuckDB warehouse: declared tables (``tables.py``), partition replacement and reads with bound parameters."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import duckdb
import polars as pl

from themis_dagster.warehouse.ducklake import with_commit_retries
from themis_dagster.warehouse.tables import TABLES, Table, declared, quote

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


def _check_frame(table: str, frame: pl.DataFrame) -> Table:
    declaration = declared(table)
    declaration.check_columns(frame.columns)
    return declaration


def _insert(conn: duckdb.DuckDBPyConnection, table: str, frame: pl.DataFrame) -> None:
    columns = _check_frame(table, frame).column_names
    if frame.height == 0:
        return
    names = ", ".join(quote(column) for column in columns)
    conn.register("themis_frame", frame.select(columns).to_arrow())
    try:
        conn.execute(f"INSERT INTO {quote(table)} ({names}) SELECT {names} FROM themis_frame")  # noqa: S608 - declared names
    finally:
        conn.unregister("themis_frame")


def _rollback(conn: duckdb.DuckDBPyConnection) -> None:
    """Roll back after a failure, keeping that failure the one raised.

    A COMMIT that fails (a full disk: the WAL cannot be written) has already ended the
    transaction; DuckDB's "cannot rollback - no transaction is active" would otherwise
    replace the disk-full error in the run's failure.
    """
    with contextlib.suppress(duckdb.TransactionException):
        conn.execute("ROLLBACK")


@contextlib.contextmanager
def transaction(conn: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """One transaction around the block: committed when it ends, rolled back on any exception."""
    conn.execute("BEGIN TRANSACTION")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


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
    _insert(conn, write.table, write.frame)


def replace_rows(conn: duckdb.DuckDBPyConnection, writes: Sequence[Write]) -> int:
    """Apply every write in one transaction; returns the rows inserted.

    A stage's rows and the record of which materialization they are (``stage_generations``)
    are never seen apart. Every row of a frame must lie inside its scope and its keys must be
    distinct (``DuplicateKeyError``, before anything is written), so a re-run can never leave
    duplicates or touch another partition. Any exception rolls everything back, so the old
    rows stay.
    """
    for write in writes:
        declaration = _check_frame(write.table, write.frame)
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


def append_rows(conn: duckdb.DuckDBPyConnection, table: str, frame: pl.DataFrame) -> int:
    """Append rows (for the history tables that keep every materialization)."""
    _insert(conn, table, frame)
    return frame.height


def append_new(conn: duckdb.DuckDBPyConnection, table: str, frame: pl.DataFrame, key: str) -> int:
    """Append, in one transaction, the rows whose ``key`` the table does not hold yet; returns how many.

    Keeps ``key`` unique by construction (DuckLake tables have no PRIMARY KEY), for append-only
    tables written by several runs, such as the request cache.
    """
    declaration = _check_frame(table, frame)
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


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def snapshot(warehouse: Path, target: Path) -> Path:
    """Copy the warehouse, consistently, to ``target`` for long analyst sessions and BI tools.

    The source is attached read-only for the seconds the copy takes, so a session on the
    snapshot never holds the file lock that runs need for writing.
    """
    staging = target.with_name(target.name + ".partial")
    staging.unlink(missing_ok=True)
    with duckdb.connect() as conn:
        # ATTACH takes no bound parameters: the paths (settings, not user input) are quoted as literals.
        conn.execute(f"ATTACH {_literal(str(warehouse))} AS source (READ_ONLY)")
        conn.execute(f"ATTACH {_literal(str(staging))} AS snapshot")
        conn.execute("COPY FROM DATABASE source TO snapshot")
        conn.execute("DETACH snapshot")
    staging.replace(target)
    return target


def read_partition(conn: duckdb.DuckDBPyConnection, table: str, model: str, task: str) -> pl.DataFrame:
    """All rows of (model, task) in ``table``, in the table's column order."""
    names = ", ".join(quote(column) for column in declared(table).column_names)
    query = f"SELECT {names} FROM {quote(table)} WHERE model = ? AND task = ?"  # noqa: S608
    return conn.execute(query, [model, task]).pl()
