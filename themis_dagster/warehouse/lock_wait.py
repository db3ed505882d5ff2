"""Open the warehouse while another process holds it: wait with backoff, up to a configurable limit.

DuckDB lets one process write a file, and a reader in another process also blocks writers.
A conflicting open fails at once with ``IOException`` "Could not set lock on file ...
Conflicting lock is held in <program> (PID n)". dagster-duckdb's ``DuckDBResource``
retries any ``IOException`` about 10 times (about 100 s in all), so a reader that keeps
the file for two minutes failed a run that had finished its inference. Here only the lock
conflict is retried, with exponential backoff and jitter, for as long as
``THEMIS_WAREHOUSE_LOCK_TIMEOUT_S``; every other error (a corrupted file, no permission)
is raised at once.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import Any

import duckdb

DEFAULT_LOCK_TIMEOUT_S = 900.0
LOCK_TIMEOUT_SETTING = "THEMIS_WAREHOUSE_LOCK_TIMEOUT_S"
LOCK_CONFLICT = "Could not set lock on file"  # DuckDB 1.x, both for read-write and read-only opens
FIRST_DELAY_S = 0.05
MAX_DELAY_S = 5.0  # a released lock is picked up within seconds even late in a long wait


class WarehouseLockTimeout(RuntimeError):
    """Another process held the warehouse for longer than the configured limit."""


def is_lock_conflict(error: BaseException) -> bool:
    """DuckDB's error for a file another process holds (and only that one)."""
    return isinstance(error, duckdb.IOException) and LOCK_CONFLICT in str(error)


def backoff_delays(first: float = FIRST_DELAY_S, cap: float = MAX_DELAY_S) -> Callable[[], float]:
    """Successive sleeps: doubling from ``first`` up to ``cap``, each drawn in [d/2, d) (jitter).

    The jitter keeps two waiting writers from retrying in lockstep.
    """
    state = {"delay": first}

    def next_delay() -> float:
        delay = state["delay"]
        state["delay"] = min(cap, delay * 2)
        return delay * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not security

    return next_delay


def connect_waiting(
    database: str,
    *,
    read_only: bool,
    timeout_s: float,
    config: Mapping[str, Any] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect``, retried while the file is locked by another process, for at most ``timeout_s``.

    Raises ``WarehouseLockTimeout`` naming the file, the seconds waited and the setting.
    """
    started = clock()
    delays = backoff_delays()
    while True:
        try:
            return duckdb.connect(database, read_only=read_only, config=dict(config or {}))
        except duckdb.IOException as error:
            if not is_lock_conflict(error):
                raise
            waited = clock() - started
            remaining = timeout_s - waited
            if remaining <= 0:
                raise WarehouseLockTimeout(
                    f"warehouse {database} stayed locked by another process: gave up after waiting "
                    f"{waited:.0f} s ({LOCK_TIMEOUT_SETTING}={timeout_s:g}). DuckDB said: {error}"
                ) from error
            sleep(min(remaining, delays()))
