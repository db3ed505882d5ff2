"""Declarative automation, running from the start (Dagster's default sensor starts stopped)."""

from dagster import AssetSelection, AutomationConditionSensorDefinition, DefaultSensorStatus

DEFAULT_MIN_INTERVAL_SECONDS = 30


def build_automation_sensor(
    minimum_interval_seconds: int = DEFAULT_MIN_INTERVAL_SECONDS,
) -> AutomationConditionSensorDefinition:
    """Keeps the leaderboard, reports and benchmark reports current: their eager conditions fire
    whenever a bias_metrics partition is materialized."""
    return AutomationConditionSensorDefinition(
        "report_automation",
        target=AssetSelection.groups("reports"),
        default_status=DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=minimum_interval_seconds,
        description="Materializes the reports group when bias metrics change.",
    )


automation_sensor = build_automation_sensor()
