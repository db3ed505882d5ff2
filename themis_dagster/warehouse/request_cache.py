"""Append a run's answers to ``request_cache`` a chunk at a time, each chunk its own committed transaction.

Two costs used to grow with the cache rather than the chunk (``bench/chain_scale.py`` at 10^6
requests: over half of ``raw_responses``):

- *Keeping fingerprints unique* was an anti-join of each chunk against the whole table. A
  run's own chunks cannot collide with what the cache held when the run looked it up (it
  sends only fingerprints that were not there), so the table needs checking only when some
  other writer changed it since: ``count(*)`` (metadata, well under a millisecond) is
  compared with what this run expects; only on a difference is the chunk anti-joined against
  the table. A fingerprint that repeats within the run is kept once here
  (``repeated_fingerprints``).
- *Opening and closing DuckDB for every chunk*: closing checkpoints the WAL into the file
  (tens of ms each). The connection is now kept across chunks while the engine answers fast
  (the last chunk's engine call took under ``FAST_ENGINE_S``) and for at most ``HOLD_S`` at a
  time; each chunk is still its own COMMIT (durable in the WAL, which DuckDB replays if the
  process dies), so a killed run still loses only the chunk in flight. Engine calls longer than
  ``FAST_ENGINE_S`` never run while this holds the warehouse, as before.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from types import TracebackType

import duckdb
import polars as pl

from themis_dagster.warehouse.tables import declared, quote
from themis_dagster.warehouse.transactions import transaction

CACHE = "request_cache"
KEY = "fingerprint"
# An engine call at least this long runs with the warehouse released (others may open it).
FAST_ENGINE_S = 0.25
# The longest this keeps the warehouse open across fast chunks before letting others in.
HOLD_S = 1.0


def cached_count(conn: duckdb.DuckDBPyConnection) -> int:
    """The request cache's row count (what a run expects it to hold until it writes)."""
    row = conn.execute(f"SELECT count(*) FROM {quote(CACHE)}").fetchone()  # noqa: S608 - a declared name
    return int(row[0]) if row else 0


def repeated_fingerprints(fingerprints: pl.Series) -> pl.Series:
    """Whether each (non-null) fingerprint occurs more than once among the run's requests to send."""
    return fingerprints.is_duplicated() & fingerprints.is_not_null()


class CacheAppender:
    """Appends chunks of answers (rows of ``request_cache``) for one run; a context manager.

    ``expected`` is the cache's row count when the run looked it up, read in the same
    connection as the lookup (``cached_count``).
    """

    def __init__(
        self,
        connect: Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]],
        expected: int,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._connect = connect
        self._expected = expected
        self._clock = clock
        self._held: contextlib.ExitStack | None = None
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._opened_at = 0.0
        self._repeated_done: set[str] = set()
        self.anti_joins = 0  # chunks that had to be checked against the whole table (another writer was there)

    def __enter__(self) -> CacheAppender:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.release()

    @property
    def holding(self) -> bool:
        """Whether this keeps the warehouse open now."""
        return self._conn is not None

    def release(self) -> None:
        """Close the connection (DuckDB checkpoints on close) so that other processes can open the warehouse."""
        held, self._held, self._conn = self._held, None, None
        if held is not None:
            held.close()

    @contextlib.contextmanager
    def _connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        if self._conn is None:
            stack = contextlib.ExitStack()
            self._conn = stack.enter_context(self._connect())
            self._held, self._opened_at = stack, self._clock()
        try:
            yield self._conn
        except BaseException:
            self.release()
            raise

    def append(self, rows: pl.DataFrame | None, *, engine_seconds: float) -> int:
        """Commit ``rows`` (with a boolean ``_repeated`` column) whose fingerprints the cache lacks; returns how many.

        ``engine_seconds``: how long the chunk's engine call took, which predicts the next one's:
        the warehouse stays open across the next call only if that was fast. ``rows`` None: the
        chunk had nothing to cache.
        """
        inserted = 0
        fresh = rows.unique(subset=[KEY], keep="first", maintain_order=True) if rows is not None else None
        if fresh is not None and self._repeated_done:
            done = pl.Series(sorted(self._repeated_done), dtype=pl.String)
            fresh = fresh.filter(~(pl.col("_repeated") & pl.col(KEY).is_in(done)))
        if fresh is not None and fresh.height:
            with self._connection() as conn:
                inserted = self._insert(conn, fresh.drop("_repeated"))
            self._repeated_done.update(fresh.filter(pl.col("_repeated")).get_column(KEY).to_list())
        if self._conn is not None and (engine_seconds >= FAST_ENGINE_S or self._clock() - self._opened_at >= HOLD_S):
            self.release()
        return inserted

    def _insert(self, conn: duckdb.DuckDBPyConnection, fresh: pl.DataFrame) -> int:
        names = ", ".join(quote(column) for column in declared(CACHE).column_names)
        table, key = quote(CACHE), quote(KEY)
        conn.register("themis_frame", fresh.select(declared(CACHE).column_names).to_arrow())
        try:
            with transaction(conn):
                before = cached_count(conn)
                insert = f"INSERT INTO {table} ({names}) SELECT {names} FROM themis_frame"  # noqa: S608 - declared names
                if before != self._expected:  # another writer since this run last looked: check the table itself
                    insert += f" WHERE {key} NOT IN (SELECT {key} FROM {table})"  # noqa: S608 - declared names
                    self.anti_joins += 1
                conn.execute(insert)
                after = cached_count(conn)
        finally:
            conn.unregister("themis_frame")
        self._expected = after
        return after - before
