"""Where things live, chosen by environment variables so deployments never edit code."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, Json, ValidationError

from themis_dagster.errors import ConfigError, load_yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent
FAMILIES_DIR = Path(__file__).resolve().parent / "tasks"
"""Where the benchmark families live: one folder each, ``tasks/<family>/``, declared by its ``family.yaml``."""


class Settings(BaseModel):
    """Paths and switches of one deployment; every field has an environment variable."""

    model_config = ConfigDict(frozen=True)

    project_root: Path = PROJECT_ROOT
    models_file: Path = PROJECT_ROOT / "data" / "models.yaml"
    discovered_models_file: Path = PROJECT_ROOT / "data" / "discovered_models.yaml"
    checkpoints_dir: Path = PROJECT_ROOT / "data" / "checkpoints"
    warehouse: Path = PROJECT_ROOT / "data" / "warehouse.duckdb"
    warehouse_data_path: str = ""  # a DuckLake warehouse's data folder (THEMIS_WAREHOUSE=ducklake:postgres:...)
    warehouse_lock_timeout_s: float = 900.0  # how long a writer waits for another process's lock
    datasets_dir: Path = PROJECT_ROOT.parent / "shared" / "datasets"
    cache_dir: Path = PROJECT_ROOT / "data" / "cache"
    models_dir: Path = PROJECT_ROOT / "data" / "models"
    exports_dir: Path = PROJECT_ROOT / "data" / "exports"
    reports_dir: Path = PROJECT_ROOT / "data" / "reports"
    server_state_dir: Path = PROJECT_ROOT / "data" / "cache" / "servers"
    server_idle_shutdown_s: float = 900.0
    checkpoint_settle_seconds: float = 60.0
    checkpoint_tasks: str = ""  # comma-separated; empty: every task
    # engine settings for discovered checkpoints, a JSON object of the models file's engine keys
    checkpoint_engine: Json[dict[str, Any]] = Field(default_factory=dict)
    engine: str = "vllm"
    devices: str = (
        ""  # accelerators this host lends runs, one run's engine each ("0,1,2,3"; themis_dagster/runs/devices.py)
    )
    task_overrides_file: Path | None = None
    calibration_sets_file: Path = PROJECT_ROOT / "data" / "calibration_sets.yaml"  # users' own calibration sets
    request_cache: bool = True  # reuse answers by request fingerprint (and resume killed runs)
    request_chunk_size: int = Field(default=4096, ge=1)  # requests sent to the engine at a time
    commit_interval_s: float = Field(default=10.0, gt=0)  # answers committed at least this often during inference
    sensor_interval_s: int = Field(default=30, ge=1)  # how often the sensors tick (checkpoints, reports, dead runs)
    fake_engine_latency_s: float = Field(default=0.0, ge=0)  # THEMIS_ENGINE=fake: seconds per engine call

    @classmethod
    def from_env(cls) -> Settings:
        """Read ``THEMIS_*`` variables; unset ones keep the defaults above."""
        env = {
            "models_file": "THEMIS_MODELS_FILE",
            "discovered_models_file": "THEMIS_DISCOVERED_MODELS_FILE",
            "checkpoints_dir": "THEMIS_CHECKPOINTS_DIR",
            "warehouse": "THEMIS_WAREHOUSE",
            "warehouse_data_path": "THEMIS_WAREHOUSE_DATA_PATH",
            "warehouse_lock_timeout_s": "THEMIS_WAREHOUSE_LOCK_TIMEOUT_S",
            "datasets_dir": "THEMIS_DATASETS_DIR",
            "cache_dir": "THEMIS_CACHE_DIR",
            "models_dir": "THEMIS_MODELS_DIR",
            "exports_dir": "THEMIS_EXPORTS_DIR",
            "reports_dir": "THEMIS_REPORTS_DIR",
            "checkpoint_settle_seconds": "THEMIS_CHECKPOINT_SETTLE_SECONDS",
            "checkpoint_tasks": "THEMIS_CHECKPOINT_TASKS",
            "checkpoint_engine": "THEMIS_CHECKPOINT_ENGINE",
            "server_state_dir": "THEMIS_SERVER_STATE_DIR",
            "server_idle_shutdown_s": "THEMIS_SERVER_IDLE_SHUTDOWN_S",
            "engine": "THEMIS_ENGINE",
            "devices": "THEMIS_DEVICES",
            "task_overrides_file": "THEMIS_TASK_OVERRIDES",
            "calibration_sets_file": "THEMIS_CALIBRATION_SETS",
            "request_cache": "THEMIS_REQUEST_CACHE",
            "request_chunk_size": "THEMIS_REQUEST_CHUNK_SIZE",
            "commit_interval_s": "THEMIS_COMMIT_INTERVAL_S",
            "sensor_interval_s": "THEMIS_SENSOR_INTERVAL_S",
            "fake_engine_latency_s": "THEMIS_FAKE_ENGINE_LATENCY_S",
        }
        values = {field: os.environ[var] for field, var in env.items() if os.environ.get(var)}
        try:
            return cls.model_validate(values)
        except ValidationError as error:  # name the variable a user set, not our field
            problems = [
                f"{env.get(str(item['loc'][0]), item['loc'][0])}={values.get(str(item['loc'][0]))!r}: {item['msg']}"
                for item in error.errors()
            ]
            raise ConfigError("; ".join(problems)) from None


def family_sections(key: str, root: Path = FAMILIES_DIR) -> dict[str, Any]:
    """Every family declaration's ``key`` section as plain data, by family (folder name, sorted).

    For the layers below the families, which read their part of a family as data: the dataset
    catalogue its ``datasets``, the warehouse its ``tables``. The whole declaration is validated by
    ``tasks/family.py`` when the definitions load; a file that is not YAML fails here, naming it.
    """
    found: dict[str, Any] = {}
    for path in sorted(root.glob("*/family.yaml")):
        try:
            raw = load_yaml(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as error:
            raise ConfigError(f"{path}: not valid YAML: {error}") from None
        if isinstance(raw, dict) and raw.get(key) is not None:
            found[path.parent.name] = raw[key]
    return found
