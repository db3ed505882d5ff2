"""How every read of the layer reaches DuckDB: bound parameters, rows as dicts, numbers as floats, and one
answer for a warehouse that lacks what a query names.

A query names only views and declared tables; values reach SQL only as bound parameters (``?`` or
``$name``). A relation or column the warehouse does not have means it was written by an older
version: :func:`rows` raises :class:`OlderSchemaError`, whose message names what is missing and
what to run, instead of DuckDB's traceback. A bare database (no table at all: nothing stored yet)
reads as no rows. :func:`optional_rows` is for the few reads whose
absence a page shows as "none yet" (the comparison views, judged metrics).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import duckdb
import pandas as pd
import polars as pl

from themis_dagster.warehouse.reads import Params, bound, optional_rows

__all__ = [
    "UPDATE_HINT",
    "OlderSchemaError",
    "Params",
    "frame",
    "json_object",
    "number",
    "optional_rows",
    "rows",
    "scalar",
    "table",
]

UPDATE_HINT = (
    "Update it with `.venv/bin/python -m themis_dagster.warehouse.migrate WAREHOUSE` (a DuckDB file), or run any "
    "evaluation (`.venv/bin/themis run`, `make run`): opening the warehouse for writing adds the tables, columns "
    "and views it lacks, and keeps every row."
)
_MISSING = re.compile(r'(?:Table|View|Table Function) with name "?([\w.]+)"? does not exist|column "?(\w+)"? not found')


class OlderSchemaError(RuntimeError):
    """The warehouse lacks a table, view or column of the current schema: an older version wrote it."""

    def __init__(self, missing: str, hint: str = UPDATE_HINT) -> None:
        self.missing = missing
        super().__init__(f"This warehouse is from an older schema: it has no {missing}. {hint}")


def _missing(error: duckdb.Error) -> str:
    """What DuckDB said is missing, in a few words ("table or view metrics", "column reasoning")."""
    found = _MISSING.search(str(error))
    if found is None:
        return "table, view or column this query reads"
    return f"table or view {found.group(1)}" if found.group(1) else f"column {found.group(2)}"


def _is_missing(error: duckdb.Error) -> bool:
    """A missing relation (CatalogException) or column (a BinderException naming it)."""
    return isinstance(error, duckdb.CatalogException) or (
        isinstance(error, duckdb.BinderException) and "not found" in str(error)
    )


def _is_bare(conn: duckdb.DuckDBPyConnection) -> bool:
    """Whether the database holds no table or view at all: nothing was ever stored, so nothing is old."""
    found = conn.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = current_schema() AND NOT internal"
    ).fetchone()
    views = conn.execute(
        "SELECT count(*) FROM duckdb_views() WHERE database_name = current_database() "
        "AND schema_name = current_schema() AND NOT internal"
    ).fetchone()
    return not (found and found[0]) and not (views and views[0])


def _cursor(conn: duckdb.DuckDBPyConnection, sql: str, params: Params) -> duckdb.DuckDBPyConnection | None:
    """The executed query; None on a bare database (it holds nothing: no rows); OlderSchemaError when a warehouse
    lacks what the query names."""
    try:
        return conn.execute(sql, bound(params))
    except (duckdb.CatalogException, duckdb.BinderException) as error:
        if not _is_missing(error):
            raise
        if _is_bare(conn):
            return None
        raise OlderSchemaError(_missing(error)) from None


def rows(conn: duckdb.DuckDBPyConnection, sql: str, params: Params = ()) -> list[dict[str, Any]]:
    """The query's rows as dicts (none on a bare database); :class:`OlderSchemaError` when the warehouse lacks
    what it names."""
    cursor = _cursor(conn, sql, params)
    if cursor is None:
        return []
    names = [column[0] for column in cursor.description or []]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def scalar(conn: duckdb.DuckDBPyConnection, sql: str, params: Params = ()) -> Any:
    """The first column of the first row (None: no row); errors as :func:`rows`."""
    cursor = _cursor(conn, sql, params)
    row = None if cursor is None else cursor.fetchone()
    return None if row is None else row[0]


def frame(conn: duckdb.DuckDBPyConnection, sql: str, params: Params = ()) -> pl.DataFrame:
    """The query's rows as a polars frame (the assets' and comparisons' readers); errors as :func:`rows`."""
    cursor = _cursor(conn, sql, params)
    if cursor is None:
        raise OlderSchemaError("table or view this query reads (the warehouse is empty)")
    return cursor.pl()


def table(conn: duckdb.DuckDBPyConnection, sql: str, params: Params = ()) -> pd.DataFrame:
    """The query's rows as a pandas frame, typed by DuckDB (NULL numbers NaN); errors as :func:`rows`."""
    cursor = _cursor(conn, sql, params)
    if cursor is None:
        return pd.DataFrame()
    return cursor.df()


def number(value: object) -> float | None:
    """A float, or None for NULL, NaN, a bool and anything that is not a number."""
    if value is None or isinstance(value, bool):
        return None
    try:
        converted = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(converted) else converted


def json_object(raw: object) -> dict[str, Any]:
    """A stored JSON object as a dict ({} for NULL, garbage or anything that is not an object)."""
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw) if isinstance(raw, str | bytes) else None
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
