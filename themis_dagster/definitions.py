"""The code location: assets, jobs and resources, chosen by configuration (environment variables)."""

from __future__ import annotations

from dagster import Definitions, in_process_executor

from themis_dagster.assets import (
    augmentation_assets,
    comparison_assets,
    evaluation_assets,
    judge_assets,
    report_assets,
)
from themis_dagster.assets.comparisons import compare_models
from themis_dagster.assets.jobs import calibrate_judge_job, evaluate_job, reports_job
from themis_dagster.resources import ThemisConfig, WarehouseResource, engine_resource
from themis_dagster.schedules import reevaluation_schedule
from themis_dagster.sensors import CheckpointWatchConfig, build_checkpoint_sensor
from themis_dagster.sensors.automation import build_automation_sensor
from themis_dagster.sensors.dead_runs import build_dead_run_sensor
from themis_dagster.settings import Settings
from themis_dagster.tasks.family import load_families


def build_resources(settings: Settings, keep_warm: bool = False) -> dict[str, object]:
    """Resources for one deployment; ``THEMIS_ENGINE`` picks the engine implementation."""
    engine = engine_resource(settings, keep_warm)  # an unknown engine fails before anything is built
    watch = CheckpointWatchConfig(
        checkpoints_dir=str(settings.checkpoints_dir),
        settle_seconds=settings.checkpoint_settle_seconds,
        tasks=[task.strip() for task in settings.checkpoint_tasks.split(",") if task.strip()],
        engine=settings.checkpoint_engine,
    )
    watch.engine_args(origin="THEMIS_CHECKPOINT_ENGINE")  # an invalid key fails here, not at the sensor's first tick
    return {
        "themis": ThemisConfig(
            models_file=str(settings.models_file),
            datasets_dir=str(settings.datasets_dir),
            cache_dir=str(settings.cache_dir),
            models_dir=str(settings.models_dir),
            task_overrides_file=str(settings.task_overrides_file or ""),
            discovered_models_file=str(settings.discovered_models_file),
            exports_dir=str(settings.exports_dir),
            reports_dir=str(settings.reports_dir),
            request_cache=settings.request_cache,
            request_chunk_size=settings.request_chunk_size,
            commit_interval_s=settings.commit_interval_s,
        ),
        "warehouse": WarehouseResource(
            database=str(settings.warehouse),
            data_path=settings.warehouse_data_path,
            lock_timeout_s=settings.warehouse_lock_timeout_s,
        ),
        "engine": engine,
        "checkpoint_watch": watch,
    }


def build_definitions(settings: Settings | None = None, keep_warm: bool = False) -> Definitions:
    load_families()  # every family declaration checked: an incomplete one fails here, naming family and field
    settings = settings or Settings.from_env()
    every = settings.sensor_interval_s
    return Definitions(
        assets=[*evaluation_assets, *report_assets, *comparison_assets, *augmentation_assets, *judge_assets],
        jobs=[evaluate_job, reports_job, compare_models, calibrate_judge_job],
        sensors=[build_checkpoint_sensor(every), build_automation_sensor(every), build_dead_run_sensor(every)],
        schedules=[reevaluation_schedule],
        resources=build_resources(settings, keep_warm=keep_warm),
        executor=in_process_executor,
    )


defs = build_definitions()
