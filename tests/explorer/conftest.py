"""The explorer's tests share one small warehouse built by the project's own assets (tests/explorer_warehouse.py)
and a synthetic one (bench/explorer_drilldown.py); the app only reads: the warehouse's bytes are the same after
every page ran."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.explorer_drilldown import build_synthetic
from tests.explorer_warehouse import Built, build
from themis_dagster.explorer.engine_slot import shared_slot


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="package")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    warehouse = build(tmp_path_factory.mktemp("explorer"))
    saved = {key: os.environ.get(key) for key in warehouse.env()}
    os.environ.update(warehouse.env())
    before = _digest(warehouse.warehouse)
    yield warehouse
    shared_slot().release()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    assert _digest(warehouse.warehouse) == before, "the explorer wrote to the warehouse"


@pytest.fixture(scope="package")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("synthetic") / "synthetic.duckdb"
    build_synthetic(path, 1000)
    build_synthetic(path, 10, model="other-model")
    return path
