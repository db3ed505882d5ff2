"""Whether a warehouse can be read: it exists, opens read-only, has the current schema and holds results.

A warehouse an older version wrote lacks some of today's tables, columns or views (:func:`schema_gaps`,
against ``tables.py`` and ``sql/views*.sql``); it is named as such, with what to run, rather than
read half-way into a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb

from themis_dagster.warehouse import ducklake
from themis_dagster.warehouse.read.query import UPDATE_HINT, scalar
from themis_dagster.warehouse.readonly import WarehouseBusy, connect_read_only
from themis_dagster.warehouse.schema import view_files
from themis_dagster.warehouse.tables import TABLES

DEFAULT_WAIT_S = 5.0
FILL_HINT = (
    "Fill it with `make run` (the default model on every task), or `.venv/bin/themis run --model ID "
    "--task TASK`, or materialize the `evaluation` group in Dagster's UI (`make dev`); then reload this page."
)
_VIEW = re.compile(r"CREATE\s+OR\s+REPLACE\s+VIEW\s+(\w+)", re.IGNORECASE)


@contextmanager
def read_only(warehouse: Path | str, wait_s: float = DEFAULT_WAIT_S) -> Iterator[duckdb.DuckDBPyConnection]:
    """A locked-down read-only connection (``themis sql``'s door), closed when the block ends."""
    conn = connect_read_only(warehouse, wait_s)
    try:
        yield conn
    finally:
        conn.close()


def declared_views() -> list[str]:
    """The analyst views ``sql/views*.sql`` create, in their order."""
    return [name for entry in view_files() for name in _VIEW.findall(entry.read_text(encoding="utf-8"))]


def schema_gaps(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """What the current schema declares and this warehouse lacks: ``table X``, ``column X.y``, ``view X``."""
    present: dict[str, set[str]] = {}
    query = (
        "SELECT table_name, column_name FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name = current_schema()"
    )
    for table, column in conn.execute(query).fetchall():
        present.setdefault(str(table), set()).add(str(column))
    gaps = []
    for table in TABLES.values():
        if table.name not in present:
            gaps.append(f"table {table.name}")
            continue
        gaps += [f"column {table.name}.{name}" for name in table.column_names if name not in present[table.name]]
    gaps += [f"view {name}" for name in declared_views() if name not in present]
    return gaps


@dataclass(frozen=True)
class WarehouseStatus:
    """Whether the warehouse can be shown; otherwise what is wrong and how to mend it."""

    ready: bool
    title: str
    detail: str = ""


def older_schema_detail(target: str, gaps: list[str]) -> str:
    """What an older warehouse lacks (the first few) and the command that updates it."""
    shown = ", ".join(gaps[:6]) + (f" and {len(gaps) - 6} more" if len(gaps) > 6 else "")
    return f"It lacks {shown}. " + UPDATE_HINT.replace("WAREHOUSE", target)


def warehouse_status(warehouse: Path | str, wait_s: float = DEFAULT_WAIT_S) -> WarehouseStatus:
    """Ready when the warehouse exists, opens read-only, has the current schema and holds metrics; else why not."""
    target = str(warehouse)
    if not ducklake.is_ducklake(target) and not Path(target).is_file():
        return WarehouseStatus(False, f"No warehouse at {target}", f"It does not exist yet. {FILL_HINT}")
    empty = WarehouseStatus(False, f"The warehouse {target} holds no results", f"It has no metrics yet. {FILL_HINT}")
    try:
        with read_only(target, wait_s) as conn:
            gaps = schema_gaps(conn)
            if "table metric_values" in gaps:  # not an evaluation warehouse yet: nothing was ever stored
                return empty
            if gaps:
                return WarehouseStatus(
                    False, f"The warehouse {target} is from an older schema", older_schema_detail(target, gaps)
                )
            counted = scalar(conn, "SELECT count(*) FROM metrics")
    except WarehouseBusy as error:
        return WarehouseStatus(False, "The warehouse is busy", f"{error}")
    except duckdb.Error as error:
        return WarehouseStatus(False, f"The warehouse {target} cannot be opened", f"DuckDB said: {error}")
    return WarehouseStatus(True, "ready") if counted else empty
