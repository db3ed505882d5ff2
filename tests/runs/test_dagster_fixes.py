"""Two claims of the one slot of a pool that interleave (select, select, update, update) give one holder."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance
from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage
from dagster._utils.concurrency import ConcurrencySlotStatus

from themis_dagster.runs import dagster_fixes
from themis_dagster.runs.dagster_fixes import _claim_free_slot
from themis_dagster.runs.pools import ENGINE_POOL


def _race(tmp_path: Path, claim: Any) -> list[ConcurrencySlotStatus]:
    """Claim for step "a"; between its SELECT and its UPDATE, another process's whole claim for "b" runs.

    The other process is a second instance on the same storage (in one instance, Dagster's
    own thread lock serializes the connections; across processes nothing does on SQLite).
    """
    with DagsterInstance.from_config(str(tmp_path)) as ours, DagsterInstance.from_config(str(tmp_path)) as theirs:
        storage = ours.event_log_storage
        storage.set_concurrency_slots(ENGINE_POOL, 1)
        real_connection = storage.index_connection
        rival: list[ConcurrencySlotStatus] = []

        class Interleaved:
            def __init__(self, conn: Any) -> None:
                self.conn = conn

            def execute(self, statement: Any, *args: Any) -> Any:
                result = self.conn.execute(statement, *args)
                if getattr(statement, "is_select", False) and not rival:
                    rows = result.fetchall()  # our claim has picked its free row: now the rival claims
                    rival.append(claim(theirs.event_log_storage, ENGINE_POOL, "run-b", "b"))
                    return _Rows(rows)
                return result

        @contextmanager
        def interleaved() -> Iterator[Any]:
            with real_connection() as conn:
                yield Interleaved(conn)

        storage.index_connection = interleaved  # type: ignore[method-assign]
        first = claim(storage, ENGINE_POOL, "run-a", "a")
        storage.index_connection = real_connection  # type: ignore[method-assign]
        assert len(theirs.event_log_storage.get_concurrency_info(ENGINE_POOL).claimed_slots) == 1
        return [first, *rival]


class _Rows:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None


@pytest.mark.xfail(reason="Dagster 1.13.27's own claim on SQLite: both interleaved claims succeed", strict=True)
def test_dagster_s_own_claim_lets_both_interleaved_claims_hold_the_slot(tmp_path: Path) -> None:
    statuses = _race(tmp_path, dagster_fixes.DAGSTER_CLAIM)
    assert statuses.count(ConcurrencySlotStatus.CLAIMED) == 1, statuses


def test_the_compare_and_set_claim_gives_the_slot_to_one(tmp_path: Path) -> None:
    statuses = _race(tmp_path, _claim_free_slot)
    assert statuses == [ConcurrencySlotStatus.BLOCKED, ConcurrencySlotStatus.CLAIMED], statuses  # the rival won


def test_the_fix_is_what_dagster_runs() -> None:
    dagster_fixes.install()
    assert SqlEventLogStorage._claim_concurrency_slot is _claim_free_slot
