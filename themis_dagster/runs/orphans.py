"""Mark runs whose process died as failed, through Dagster's own API, so their partitions are retried.

A SIGKILLed ``themis run`` (or a run worker killed together with its code server) leaves its
run STARTED for good: nothing in Dagster watches an in-process execution, and the default run
launcher has no worker health check for run monitoring to use (``RunLauncher.
supports_check_run_worker_health`` is False). A schedule or sensor then counts the partition
as in flight forever. ``fail_dead_runs`` finds unfinished runs owned (``runs.owner`` tags) by a
process of this host that no longer exists, reports them failed with a message saying why,
and frees the concurrency slots they held (Dagster frees a finished run's slots only when the
daemon runs with ``run_monitoring.free_slots_after_run_end_seconds``).
"""

from __future__ import annotations

import socket

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
from dagster._core.events import JobFailureData, RunFailureReason

from themis_dagster.runs.owner import HOST_TAG, PID_TAG, owner_liveness

UNFINISHED = [
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
]


def fail_dead_runs(instance: DagsterInstance) -> list[str]:
    """Report every unfinished run of this host whose owning process is gone as failed; returns their ids."""
    failed = []
    filters = RunsFilter(statuses=UNFINISHED, tags={HOST_TAG: socket.gethostname()})
    for run in instance.get_runs(filters):
        if owner_liveness(run.tags, run.run_id) != "gone":
            continue
        current = instance.get_run_by_id(run.run_id)  # it may have finished since the query
        if current is None or current.is_finished:
            continue
        message = (
            f"Marked failed by themis: the process that ran it (pid {run.tags[PID_TAG]} on {run.tags[HOST_TAG]}) "
            f"is gone (killed or crashed) while the run was {current.status.value}; its partitions will be "
            "evaluated again."
        )
        instance.report_run_failed(
            current, message, JobFailureData(error=None, failure_reason=RunFailureReason.UNEXPECTED_TERMINATION)
        )
        if instance.event_log_storage.supports_global_concurrency_limits:
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        failed.append(run.run_id)
    return failed
