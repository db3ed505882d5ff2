"""The warehouse resource: short-lived DuckDB connections with the schema ensured."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
from dagster_duckdb import DuckDBResource
from pydantic import Field

from themis_dagster.warehouse import ensure_schema
from themis_dagster.warehouse.lock_wait import DEFAULT_LOCK_TIMEOUT_S, connect_waiting

IN_MEMORY = ":memory:"


class WarehouseResource(DuckDBResource):
    """DuckDBResource plus our schema and a configurable wait for other processes' locks.

    Connections are opened per stage and closed at once: never held during inference,
    so concurrent runs and readers wait seconds, not the length of a run. A connection
    waits up to ``lock_timeout_s`` while another process holds the file (only that error is
    retried).
    """

    lock_timeout_s: float = Field(
        default=DEFAULT_LOCK_TIMEOUT_S,
        description="Seconds to wait while another process holds the warehouse (THEMIS_WAREHOUSE_LOCK_TIMEOUT_S).",
    )

    @contextmanager
    def get_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection, waiting for other processes' locks."""
        config = {"custom_user_agent": "dagster", **self.connection_config}  # as DuckDBResource does
        conn = connect_waiting(self.database, read_only=False, timeout_s=self.lock_timeout_s, config=config)
        try:
            yield conn
        finally:
            conn.close()

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        if self.database != IN_MEMORY:
            Path(self.database).parent.mkdir(parents=True, exist_ok=True)
        with self.get_connection() as conn:
            ensure_schema(conn)
            yield conn
