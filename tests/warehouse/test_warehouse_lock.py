"""Writers wait for another process's lock with backoff, up to a configurable limit, then fail clearly."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest

from themis_dagster.resources import WarehouseResource
from themis_dagster.settings import Settings
from themis_dagster.warehouse.lock_wait import (
    LOCK_CONFLICT,
    WarehouseLockTimeout,
    backoff_delays,
    connect_waiting,
    is_lock_conflict,
)
from themis_dagster.warehouse.schema import ensure_schema

HOLD = """
import sys, time, duckdb
conn = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "ro")
print("locked", flush=True)
time.sleep(float(sys.argv[3]))
conn.close()
"""


@contextmanager
def held(path: Path, seconds: float, read_only: bool = False) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the file for ``seconds``."""
    mode = "ro" if read_only else "rw"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path), mode, str(seconds)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    path = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
    return path


def test_the_limit_is_a_setting() -> None:
    assert Settings().warehouse_lock_timeout_s == 900.0
    assert WarehouseResource(database="w.duckdb").lock_timeout_s == 900.0


def test_the_setting_reads_its_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THEMIS_WAREHOUSE_LOCK_TIMEOUT_S", "42.5")
    assert Settings.from_env().warehouse_lock_timeout_s == 42.5


def test_backoff_doubles_with_jitter_up_to_a_cap() -> None:
    delays = backoff_delays(first=0.1, cap=1.0)
    drawn = [delays() for _ in range(8)]
    nominal = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0]
    for value, bound in zip(drawn, nominal, strict=True):
        assert bound / 2 <= value < bound


def test_a_write_waits_until_the_other_process_lets_go(warehouse: Path) -> None:
    resource = WarehouseResource(database=str(warehouse), lock_timeout_s=60)
    with held(warehouse, seconds=3):
        started = time.monotonic()
        with resource.connect() as conn:
            conn.execute("CREATE TABLE written AS SELECT 1 AS one")
        waited = time.monotonic() - started
    assert 1.5 < waited < 30, waited
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM written").fetchone() == (1,)


def test_a_reader_also_makes_writers_wait(warehouse: Path) -> None:
    with held(warehouse, seconds=2, read_only=True):
        started = time.monotonic()
        with WarehouseResource(database=str(warehouse), lock_timeout_s=60).connect() as conn:
            conn.execute("SELECT 1")
    assert time.monotonic() - started > 1.0


def test_past_the_limit_it_fails_naming_file_wait_and_setting(warehouse: Path) -> None:
    resource = WarehouseResource(database=str(warehouse), lock_timeout_s=1)
    with held(warehouse, seconds=30):
        started = time.monotonic()
        with pytest.raises(WarehouseLockTimeout) as caught, resource.connect():
            pass
        waited = time.monotonic() - started
    assert 1.0 <= waited < 5, waited
    message = str(caught.value)
    assert str(warehouse) in message
    assert "after waiting 1 s" in message
    assert "THEMIS_WAREHOUSE_LOCK_TIMEOUT_S=1" in message
    assert LOCK_CONFLICT in message  # DuckDB's own words, with the holder's pid
    assert is_lock_conflict(caught.value.__cause__ or caught.value)


def test_other_errors_are_not_retried(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.duckdb"
    garbage.write_bytes(b"not a database" * 1000)
    sleeps: list[float] = []
    with pytest.raises(duckdb.IOException) as caught:
        connect_waiting(str(garbage), read_only=True, timeout_s=60, sleep=sleeps.append)
    assert not is_lock_conflict(caught.value)
    assert sleeps == []
