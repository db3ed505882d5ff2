"""Declarative automation, running from the start (Dagster's default sensor starts stopped)."""

from dagster import AssetSelection, AutomationConditionSensorDefinition, DefaultSensorStatus

# Keeps the leaderboard, reports and benchmark reports current: their eager conditions
# fire whenever a bias_metrics partition is materialized.
automation_sensor = AutomationConditionSensorDefinition(
    "report_automation",
    target=AssetSelection.groups("reports"),
    default_status=DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    description="Materializes the reports group when bias metrics change.",
)
