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

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CONFIGS = sorted(path.name for path in DEPLOY.glob("dagster.*.yaml"))
ENV = {
    "THEMIS_DAGSTER_POSTGRES_URL": "postgresql+psycopg2://dagster@db.example:5432/dagster",
    "THEMIS_RAY_JOB_ADDRESS": "http://ray-head.example:8265",
    "THEMIS_DEVICES": "0,1,2,3",  # the multi-GPU host's run coordinator counts them
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


# Dagster's Helm chart (dagster-io/dagster, helm/dagster, the 1.13 line): the keys its values schema
# (helm/dagster/schema/.../values.py and subschema/) accepts where deploy/helm/values.yaml sets
# them, read from the chart's source; the chart's schema forbids unknown keys in these sections.
HELM_VALUES = DEPLOY / "helm" / "values.yaml"
CHART_TOP_LEVEL = {
    "dagsterWebserver", "dagster-user-deployments", "postgresql", "generatePostgresqlPasswordSecret",
    "generateCeleryConfigSecret", "rabbitmq", "redis", "flower", "ingress", "imagePullSecrets", "computeLogManager",
    "scheduler", "runLauncher", "pythonLogs", "dagsterDaemon", "busybox", "migrate", "telemetry", "serviceAccount",
    "global", "retention", "additionalInstanceConfig", "concurrency",
}  # fmt: skip
K8S_LAUNCHER_KEYS = {
    "image", "imagePullPolicy", "jobNamespace", "loadInclusterConfig", "kubeconfigFile", "envConfigMaps",
    "envSecrets", "envVars", "volumeMounts", "volumes", "labels", "failPodOnRunFailure", "resources",
    "schedulerName", "securityContext", "runK8sConfig",
}  # fmt: skip
K8S_LAUNCHER_REQUIRED = {"imagePullPolicy", "loadInclusterConfig", "envConfigMaps", "envSecrets", "envVars",
                         "volumeMounts", "volumes"}  # fmt: skip
RUN_K8S_CONFIG_KEYS = {"containerConfig", "podSpecConfig", "podTemplateSpecMetadata", "jobSpecConfig", "jobMetadata"}
POSTGRESQL_KEYS = {"enabled", "image", "postgresqlHost", "postgresqlUsername", "postgresqlPassword",
                   "postgresqlDatabase", "postgresqlParams", "postgresqlScheme", "service"}  # fmt: skip
COORDINATOR_KEYS = {"maxConcurrentRuns", "tagConcurrencyLimits", "dequeueIntervalSeconds", "dequeueNumWorkers",
                    "dequeueUseThreads", "blockOpConcurrencyLimitedRuns"}  # fmt: skip


def _helm_values() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load(HELM_VALUES.read_text())  # type: ignore[no-any-return]


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def render_helm_instance(values: dict) -> dict:  # type: ignore[type-arg]
    """The dagster.yaml the chart's instance ConfigMap holds for these values (its templates
    helpers/instance/_run-launcher.tpl, _postgresql.tpl, _run-coordinator.tpl and _concurrency.tpl,
    re-expressed here for the keys our values file uses)."""
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    pg = values["postgresql"]
    instance: dict = {  # type: ignore[type-arg]
        "telemetry": {"enabled": values["telemetry"]["enabled"]},
        "storage": {"postgres": {"postgres_db": {
            "username": pg["postgresqlUsername"], "password": {"env": "DAGSTER_PG_PASSWORD"},
            "hostname": pg["postgresqlHost"], "db_name": pg["postgresqlDatabase"], "port": pg["service"]["port"],
            "params": pg.get("postgresqlParams", {}),
        }}},
        "run_launcher": {"module": "dagster_k8s", "class": "K8sRunLauncher", "config": {
            "load_incluster_config": launcher["loadInclusterConfig"],
            "job_namespace": launcher["jobNamespace"],
            "image_pull_policy": launcher["imagePullPolicy"],
            "service_account_name": values["global"]["serviceAccountName"],
            "dagster_home": values["global"]["dagsterHome"],
            "instance_config_map": "themis-dagster-instance",
            "postgres_password_secret": "dagster-postgresql-secret",
            "env_config_maps": [ref["name"] for ref in launcher["envConfigMaps"]],
            "env_secrets": [ref["name"] for ref in launcher["envSecrets"]],
            "env_vars": launcher["envVars"],
            "volume_mounts": launcher["volumeMounts"],
            "volumes": launcher["volumes"],
            "run_k8s_config": {_snake(key): value for key, value in launcher["runK8sConfig"].items()},
        }},
        "run_coordinator": {"module": "dagster.core.run_coordinator", "class": "QueuedRunCoordinator", "config": {
            _snake(key): value
            for key, value in values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"].items()
        }},
        "concurrency": {"runs": {
            "max_concurrent_runs": values["concurrency"]["runs"]["maxConcurrentRuns"],
            "tag_concurrency_limits": values["concurrency"]["runs"]["tagConcurrencyLimits"],
        }},
        "run_monitoring": {_snake(key): value for key, value in values["dagsterDaemon"]["runMonitoring"].items()},
    }  # fmt: skip
    return instance


def test_the_helm_values_use_only_keys_the_chart_knows() -> None:
    values = _helm_values()
    assert set(values) <= CHART_TOP_LEVEL, set(values) - CHART_TOP_LEVEL
    assert values["runLauncher"]["type"] in {"K8sRunLauncher", "CeleryK8sRunLauncher", "CustomRunLauncher"}
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    assert K8S_LAUNCHER_REQUIRED <= set(launcher) <= K8S_LAUNCHER_KEYS, set(launcher) ^ K8S_LAUNCHER_KEYS
    assert set(launcher["runK8sConfig"]) <= RUN_K8S_CONFIG_KEYS
    assert all(set(ref) == {"name"} for ref in launcher["envSecrets"] + launcher["envConfigMaps"])
    assert set(values["postgresql"]) <= POSTGRESQL_KEYS and values["postgresql"]["enabled"] is False
    coordinator = values["dagsterDaemon"]["runCoordinator"]
    assert coordinator["type"] == "QueuedRunCoordinator" and set(coordinator["config"]["queuedRunCoordinator"]) <= (
        COORDINATOR_KEYS
    )
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    assert {"name", "image", "port"} <= set(deployment) and deployment["dagsterApiGrpcArgs"][:2] == [
        "-m",
        "themis_dagster.definitions",
    ]
    assert {"repository", "tag"} <= set(deployment["image"])
    # the same run admission and GPU request as deploy/dagster.k8s.yaml
    k8s = yaml.safe_load((DEPLOY / "dagster.k8s.yaml").read_text())
    assert render_helm_instance(values)["concurrency"]["runs"] == k8s["concurrency"]["runs"]
    assert (
        launcher["runK8sConfig"]["containerConfig"]
        == k8s["run_launcher"]["config"]["run_k8s_config"]["container_config"]
    )


def test_the_instance_the_chart_renders_from_the_values_is_valid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dagster_k8s = pytest.importorskip("dagster_k8s")
    dagster_postgres = pytest.importorskip("dagster_postgres")
    from dagster._core.run_coordinator import QueuedRunCoordinator

    monkeypatch.setenv("DAGSTER_PG_PASSWORD", "from-the-secret")
    instance = render_helm_instance(_helm_values())
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(instance))
    dagster_instance_config(str(tmp_path), "dagster.yaml")  # raises DagsterInvalidConfigError when invalid
    checks = [
        (dagster_k8s.K8sRunLauncher, instance["run_launcher"]["config"]),
        (dagster_postgres.DagsterPostgresStorage, instance["storage"]["postgres"]),
        (QueuedRunCoordinator, instance["run_coordinator"]["config"]),
    ]
    for cls, config in checks:
        result = process_config(cls.config_type(), config)
        assert result.success, f"{cls.__name__}: {[error.message for error in result.errors or []]}"
