"""The read layer's tests share one synthetic warehouse (``synthetic.py``), opened read-only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from tests.warehouse.read.synthetic import build


@pytest.fixture(scope="package")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("read") / "synthetic.duckdb")


@pytest.fixture
def conn(synthetic: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    with duckdb.connect(str(synthetic), read_only=True) as connection:
        yield connection
