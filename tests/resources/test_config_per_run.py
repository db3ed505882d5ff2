"""The model registry and each task are read once per run, however many of the run's assets ask."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance, materialize

import themis_dagster.resources.config as config
from tests.conftest import make_resources, requires_mirror, write_overrides
from themis_dagster.assets import evaluation_assets
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.registry.models import DEFAULT_MODEL_ID
from themis_dagster.resources import ThemisConfig


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Count the reads of the models file and of task files behind ``ThemisConfig``."""
    reads = {"registry": 0, "task": 0}
    load_registry, load_task = config.load_registry, config.load_task

    def registry(*args: Any, **kwargs: Any) -> Any:
        reads["registry"] += 1
        return load_registry(*args, **kwargs)

    def task(*args: Any, **kwargs: Any) -> Any:
        reads["task"] += 1
        return load_task(*args, **kwargs)

    monkeypatch.setattr(config, "load_registry", registry)
    monkeypatch.setattr(config, "load_task", task)
    return reads


@requires_mirror
def test_a_run_of_the_chain_reads_the_registry_and_its_task_once(
    tmp_path: Path, instance: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    overrides = write_overrides(tmp_path / "o.yaml", {"crows_pairs": {"limit": 4}})
    resources = make_resources(tmp_path / "w.duckdb", overrides)
    instance.add_dynamic_partitions(MODELS_PARTITION, [DEFAULT_MODEL_ID])
    reads = _counting(monkeypatch)
    for run in (1, 2):  # each run reads them afresh
        result = materialize(
            evaluation_assets, partition_key=evaluation_key(DEFAULT_MODEL_ID, "crows_pairs"), resources=resources,
            instance=instance,
        )  # fmt: skip
        assert result.success
        assert reads == {"registry": run, "task": run}


def test_outside_a_run_every_lookup_reads_the_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    themis = make_resources(tmp_path / "w.duckdb")["themis"]
    assert isinstance(themis, ThemisConfig)
    reads = _counting(monkeypatch)
    themis.model(DEFAULT_MODEL_ID)
    themis.task("crows_pairs")
    themis.task("crows_pairs")
    assert reads == {"registry": 3, "task": 2}  # a sensor or the command line sees edits at once
