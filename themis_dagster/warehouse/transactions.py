"""One transaction around a block of warehouse statements: committed at its end, rolled back on any exception."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import duckdb


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
