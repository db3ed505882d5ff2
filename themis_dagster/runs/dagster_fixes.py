"""A fix for a race in Dagster 1.13's pool slots on SQLite, installed when ``themis_dagster`` loads a pool.

Dagster claims a pool slot (``SqlEventLogStorage._claim_concurrency_slot``) by selecting a
free slot row ``FOR UPDATE SKIP LOCKED`` and then updating that row by its id alone. PostgreSQL
locks the row between the two statements; SQLite ignores ``FOR UPDATE``, so two processes
that ask at the same moment can select the same free row and both "claim" it: the second
update overwrites the first and both steps run. Seen here: two ``themis run`` engine steps
started 1.4 ms apart under the pool limit of 1 (tests/resources/test_engine_pool.py). The same claim
done as a compare-and-set (update the row only while it is still free) makes the slot row the
semaphore Dagster means it to be, on every storage: the loser sees no row updated, stays
BLOCKED and asks again, as Dagster's executor already does for a blocked step.
"""

from __future__ import annotations

import sqlalchemy as db
from dagster._core.storage.event_log.schema import ConcurrencySlotsTable
from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage
from dagster._utils.concurrency import ConcurrencySlotStatus

_INSTALLED = "_themis_compare_and_set_claim"
DAGSTER_CLAIM = SqlEventLogStorage._claim_concurrency_slot  # Dagster's own, kept for the test that shows the race


def _claim_free_slot(
    self: SqlEventLogStorage, concurrency_key: str, run_id: str, step_key: str
) -> ConcurrencySlotStatus:
    """Claim one free slot row of the pool for the step, only while that row is still free."""
    slots = ConcurrencySlotsTable
    free = db.and_(
        slots.c.concurrency_key == concurrency_key,
        slots.c.step_key == None,  # noqa: E711 (SQL IS NULL)
        slots.c.deleted == False,  # noqa: E712
    )
    with self.index_connection() as conn:
        row = conn.execute(db.select(slots.c.id).where(free).with_for_update(skip_locked=True).limit(1)).fetchone()
        if not row:
            return ConcurrencySlotStatus.BLOCKED
        updated = conn.execute(
            slots.update().values(run_id=run_id, step_key=step_key).where(db.and_(slots.c.id == row[0], free))
        ).rowcount
    return ConcurrencySlotStatus.CLAIMED if updated else ConcurrencySlotStatus.BLOCKED


def install() -> None:
    """Replace Dagster's slot claim by the compare-and-set one (idempotent)."""
    if getattr(SqlEventLogStorage._claim_concurrency_slot, _INSTALLED, False):
        return
    setattr(_claim_free_slot, _INSTALLED, True)
    SqlEventLogStorage._claim_concurrency_slot = _claim_free_slot  # type: ignore[method-assign]
