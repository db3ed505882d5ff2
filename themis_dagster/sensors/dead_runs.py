"""Fail runs whose process died, from the daemon, so run retries and backfills carry on without them.

A run worker killed with its daemon (a restarted host or container) leaves its run STARTED for
good: the default run launcher has no worker health check for run monitoring to use. This
sensor applies ``runs.orphans.fail_dead_runs`` on every tick; the failure it reports
(``UNEXPECTED_TERMINATION``) is what Dagster's run retries (``run_retries`` in
``dagster.yaml``) re-launch, and a backfill counts the retried run as its own.
"""

from __future__ import annotations

from dagster import DefaultSensorStatus, SensorDefinition, SensorEvaluationContext, SkipReason, sensor

from themis_dagster.runs.orphans import fail_dead_runs

DEFAULT_MIN_INTERVAL_SECONDS = 30


def build_dead_run_sensor(minimum_interval_seconds: int = DEFAULT_MIN_INTERVAL_SECONDS) -> SensorDefinition:
    """The sweeper, with its interval chosen at definition time."""

    @sensor(
        name="dead_run_sweeper",
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=DefaultSensorStatus.RUNNING,
        description="Marks runs whose process is gone as failed, so they are retried.",
    )
    def dead_run_sensor(context: SensorEvaluationContext) -> SkipReason:
        failed = fail_dead_runs(context.instance)
        return SkipReason(f"marked failed: {', '.join(failed)}" if failed else "no dead runs")

    return dead_run_sensor


dead_run_sensor = build_dead_run_sensor()
