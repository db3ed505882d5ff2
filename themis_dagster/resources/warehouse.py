"""The warehouse resource: short-lived DuckDB connections with the schema ensured."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
from dagster_duckdb import DuckDBResource

from themis_dagster.warehouse import ensure_schema


class WarehouseResource(DuckDBResource):
    """DuckDBResource (which retries while another process holds the file) plus our schema.

    Connections are opened per stage and closed at once: never held during inference,
    so concurrent runs and readers wait seconds, not the length of a run.
    """

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        Path(self.database).parent.mkdir(parents=True, exist_ok=True)
        with self.get_connection() as conn:
            ensure_schema(conn)
            yield conn
