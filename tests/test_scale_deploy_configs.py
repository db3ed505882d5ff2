"""Every instance configuration under deploy/ passes Dagster's own config schema, run launcher included.

The Kubernetes and Ray settings cannot run here without a cluster (the Ray one runs on a local
cluster in the cluster tests); this checks what Dagster checks when an instance starts: the
instance schema, then the run launcher's and storage's own config types, with their env sources.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
CONFIGS = sorted(path.name for path in DEPLOY.glob("dagster.*.yaml"))
ENV = {
    "THEMIS_DAGSTER_POSTGRES_URL": "postgresql+psycopg2://dagster@db.example:5432/dagster",
    "THEMIS_RAY_JOB_ADDRESS": "http://ray-head.example:8265",
}


def test_every_tier_has_its_instance_config() -> None:
    assert {"dagster.multi-gpu.yaml", "dagster.postgres.yaml", "dagster.ray.yaml", "dagster.k8s.yaml"} <= set(CONFIGS)


@pytest.mark.parametrize("name", CONFIGS)
def test_the_instance_config_is_valid(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    config, _ = dagster_instance_config(str(DEPLOY), name)  # raises DagsterInvalidConfigError when invalid
    raw = yaml.safe_load((DEPLOY / name).read_text())
    for section in ("run_launcher", "run_coordinator"):
        if section not in raw:
            continue
        pytest.importorskip(raw[section]["module"].split(".")[0])
        cls = getattr(importlib.import_module(raw[section]["module"]), raw[section]["class"])
        result = process_config(cls.config_type(), raw[section].get("config", {}))
        assert result.success, f"{name} {section}: {[error.message for error in result.errors or []]}"
    if "storage" in raw:
        DagsterPostgresStorage = pytest.importorskip("dagster_postgres").DagsterPostgresStorage

        result = process_config(DagsterPostgresStorage.config_type(), raw["storage"]["postgres"])
        assert result.success, [error.message for error in result.errors or []]
        assert result.value["postgres_url"] == ENV["THEMIS_DAGSTER_POSTGRES_URL"]  # the env source resolved
    assert config["telemetry"] == {"enabled": False}


def test_a_wrong_launcher_setting_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    dagster_k8s = pytest.importorskip("dagster_k8s")
    raw = yaml.safe_load((DEPLOY / "dagster.k8s.yaml").read_text())
    raw["run_launcher"]["config"]["job_namspace"] = "typo"
    result = process_config(dagster_k8s.K8sRunLauncher.config_type(), raw["run_launcher"]["config"])
    assert not result.success and "job_namspace" in str([error.message for error in result.errors or []])
