"""The code location bench/gpu_slots.py's daemon loads: the project's definitions with a fake engine
whose every batch takes ``THEMIS_BENCH_BATCH_LATENCY_S`` seconds (an accelerator's batch time)."""

from __future__ import annotations

import os

from dagster import Definitions, in_process_executor

from themis_dagster.assets import evaluation_assets
from themis_dagster.assets.jobs import evaluate_job
from themis_dagster.definitions import build_resources
from themis_dagster.resources.engine import FakeEngineResource
from themis_dagster.settings import Settings

settings = Settings.from_env()
resources = build_resources(settings)
resources["engine"] = FakeEngineResource(
    latency_s=float(os.environ.get("THEMIS_BENCH_BATCH_LATENCY_S", "0")), devices=settings.devices
)
defs = Definitions(assets=evaluation_assets, jobs=[evaluate_job], resources=resources, executor=in_process_executor)
