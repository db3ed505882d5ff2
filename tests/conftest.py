"""Shared fixtures: temporary warehouses and instances, and the real default model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from dagster import DagsterInstance

from deploy.local_stack import Postgres, postgres
from themis_dagster.resources import ThemisConfig, WarehouseResource, engine_resource_class
from themis_dagster.settings import Settings

SETTINGS = Settings.from_env()
MIRROR = SETTINGS.datasets_dir


def write_overrides(path: Path, overrides: dict[str, dict[str, object]]) -> Path:
    path.write_text(yaml.safe_dump(overrides))
    return path


@pytest.fixture
def import_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """For `themis import` runs: a folder with a fresh Dagster home, warehouse (w.duckdb) and discovered models."""
    (tmp_path / "dagster_home").mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv("THEMIS_WAREHOUSE", str(tmp_path / "w.duckdb"))
    monkeypatch.setenv("THEMIS_DISCOVERED_MODELS_FILE", str(tmp_path / "discovered.yaml"))
    return tmp_path


def set_task_overrides(folder: Path, monkeypatch: pytest.MonkeyPatch, overrides: dict[str, dict[str, object]]) -> None:
    """Give tasks these parameters (``THEMIS_TASK_OVERRIDES``) for the runs that follow."""
    monkeypatch.setenv("THEMIS_TASK_OVERRIDES", str(write_overrides(folder / "overrides.yaml", overrides)))


@pytest.fixture
def warehouse_path(tmp_path: Path) -> Path:
    return tmp_path / "warehouse.duckdb"


@pytest.fixture
def instance() -> DagsterInstance:
    with DagsterInstance.ephemeral() as ephemeral:
        yield ephemeral


def make_resources(
    warehouse_path: Path,
    overrides_file: Path | None = None,
    engine: str = "fake",
    keep_warm: bool = False,
    **themis_settings: Any,
) -> dict[str, object]:
    """Resources pointing at the project's registries but a temporary warehouse (``themis_settings``: more config)."""
    themis = ThemisConfig(
        models_file=str(SETTINGS.models_file),
        datasets_dir=str(SETTINGS.datasets_dir),
        cache_dir=str(SETTINGS.cache_dir),
        models_dir=str(SETTINGS.models_dir),
        task_overrides_file=str(overrides_file or ""),
        exports_dir=str(warehouse_path.parent / "exports"),
        reports_dir=str(warehouse_path.parent / "reports"),
        allow_downloads=False,
        **themis_settings,
    )
    return {
        "themis": themis,
        "warehouse": WarehouseResource(database=str(warehouse_path)),
        "engine": engine_resource_class(engine)(keep_warm=keep_warm),
    }


requires_mirror = pytest.mark.skipif(not MIRROR.is_dir(), reason=f"dataset mirror not found at {MIRROR}")


# The DuckLake catalogs of the cluster tests: one database each in one PostgreSQL server per session.
DUCKLAKE_CATALOGS = ("lake", "readers")


@pytest.fixture(scope="session")
def ducklake_postgres() -> Iterator[Postgres]:
    """One throwaway PostgreSQL server for every DuckLake test module (``deploy/local_stack.py``)."""
    with postgres(DUCKLAKE_CATALOGS) as pg:
        yield pg
