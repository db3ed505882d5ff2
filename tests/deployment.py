"""A throwaway ``themis`` deployment for tests that start real ``themis`` processes: its own Dagster
home, warehouse and model registry (one local checkpoint), the fake engine, tiny task limits."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import yaml
from safetensors.numpy import save_file

from tests.conftest import write_overrides
from themis_dagster.resources import ThemisConfig
from themis_dagster.settings import PROJECT_ROOT, Settings

MODEL = "ckpt-a"
TASK = "crows_pairs"


def _checkpoint(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 512}))
    save_file({"w": np.zeros((2, 2), dtype=np.float32)}, str(folder / "model.safetensors"))
    return folder


def themis_deployment(tmp_path: Path) -> tuple[dict[str, str], ThemisConfig]:
    """(environment for ``themis`` subprocesses, the matching ``themis`` resource for in-process checks)."""
    models_file = tmp_path / "models.yaml"
    source = {"kind": "local", "path": str(_checkpoint(tmp_path / "ckpt"))}
    models_file.write_text(yaml.safe_dump({"models": [{"id": MODEL, "source": source}]}))
    overrides = write_overrides(tmp_path / "overrides.yaml", {TASK: {"limit": 4}, "crows_pairs_mc": {"limit": 4}})
    env = {
        **os.environ,
        "PYTHONPATH": str(PROJECT_ROOT),
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        "THEMIS_ENGINE": "fake",
        "THEMIS_WAREHOUSE": str(tmp_path / "warehouse.duckdb"),
        "THEMIS_MODELS_FILE": str(models_file),
        "THEMIS_DISCOVERED_MODELS_FILE": str(tmp_path / "discovered.yaml"),
        "THEMIS_TASK_OVERRIDES": str(overrides),
        "THEMIS_CACHE_DIR": str(tmp_path / "cache"),
        "THEMIS_MODELS_DIR": str(tmp_path / "models"),
        "THEMIS_REPORTS_DIR": str(tmp_path / "reports"),
        "THEMIS_EXPORTS_DIR": str(tmp_path / "exports"),
    }
    themis = ThemisConfig(
        models_file=str(models_file),
        discovered_models_file=str(tmp_path / "discovered.yaml"),
        datasets_dir=str(Settings().datasets_dir),
        cache_dir=str(tmp_path / "cache"),
        models_dir=str(tmp_path / "models"),
        task_overrides_file=str(overrides),
        allow_downloads=False,
    )
    return env, themis
