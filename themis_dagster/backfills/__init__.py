"""Backfills of the evaluation chain queued for the Dagster daemon (``themis backfill``, the explorer's Runs page)."""

from themis_dagster.backfills.submit import queue_evaluation, submit_backfill

__all__ = ["queue_evaluation", "submit_backfill"]
