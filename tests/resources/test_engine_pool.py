"""The ``engine`` pool limits engine steps across processes: two in-process executions never overlap."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from dagster import DagsterInstance, DagsterRunStatus

from tests.conftest import requires_mirror
from tests.deployment import MODEL, themis_deployment
from themis_dagster import cli
from themis_dagster.cli.common import ensure_dagster_home
from themis_dagster.resources.engine import EngineResource
from themis_dagster.runs.orphans import fail_dead_runs
from themis_dagster.runs.pools import ENGINE_POOL, engine_pool_in_use, ensure_engine_pool_limit
from themis_dagster.settings import PROJECT_ROOT

STEP_SECONDS = 3.0


def _home(tmp_path: Path, pools: dict[str, object] | None) -> Path:
    """A Dagster home with the project's dagster.yaml (or that file with another ``concurrency.pools``)."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
    if pools is not None:
        settings = yaml.safe_load((home / "dagster.yaml").read_text())
        settings["concurrency"]["pools"] = pools
        (home / "dagster.yaml").write_text(yaml.safe_dump(settings))
    return home


def _start(home: Path, log: Path, seconds: float, marker: Path | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(PROJECT_ROOT)}
    argv = [sys.executable, "-m", "tests.pooled_job", str(log), str(seconds), *([str(marker)] if marker else [])]
    output = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
    return subprocess.Popen(argv, env=env, cwd=PROJECT_ROOT, **output)


def _finish(proc: subprocess.Popen[str], timeout: float = 300) -> None:
    output, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, output


def _steps(log: Path) -> list[dict[str, float]]:
    return sorted((json.loads(line) for line in log.read_text().splitlines()), key=lambda step: step["start"])


def _run_two_together(
    tmp_path: Path, pools: dict[str, object] | None, seconds: float = STEP_SECONDS
) -> list[dict[str, float]]:
    home, log = _home(tmp_path, pools), tmp_path / "steps.jsonl"
    with DagsterInstance.from_config(str(home)):
        pass  # create the storage once, so the two processes do not both migrate a new one
    procs = [_start(home, log, seconds) for _ in range(2)]
    for proc in procs:
        _finish(proc)
    return _steps(log)


def test_the_shipped_instance_settings_limit_the_pool_to_one() -> None:
    settings = yaml.safe_load((PROJECT_ROOT / "dagster.yaml").read_text())
    assert settings["concurrency"]["pools"] == {"default_limit": 1, "granularity": "op"}
    assert settings["concurrency"]["runs"]["max_concurrent_runs"] == 1


def test_two_executions_in_process_take_turns_in_the_engine(tmp_path: Path) -> None:
    first, second = _run_two_together(tmp_path, pools=None)
    assert first["run_id"] != second["run_id"]
    assert second["start"] >= first["end"], (first, second)


def test_without_a_limit_they_would_overlap(tmp_path: Path) -> None:
    """The control: the same two executions with the pool unlimited do run their steps together.

    Their steps last long enough that the two processes' start-up (seconds apart on a loaded
    host) cannot keep them apart.
    """
    first, second = _run_two_together(tmp_path, pools={"granularity": "op"}, seconds=30)
    assert second["start"] < first["end"], (first, second)


def test_a_killed_holder_s_slot_is_freed_by_the_dead_run_cleanup(tmp_path: Path) -> None:
    home, log, marker = _home(tmp_path, None), tmp_path / "steps.jsonl", tmp_path / "in-step"
    holder = _start(home, log, 600, marker)
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert holder.poll() is None and time.monotonic() < deadline, holder.communicate()[0]
        time.sleep(0.2)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    killed_run = marker.read_text()
    with DagsterInstance.from_config(str(home)) as instance:
        info = instance.event_log_storage.get_concurrency_info(ENGINE_POOL)
        assert [slot.run_id for slot in info.claimed_slots] == [killed_run]  # Dagster alone keeps it held
        assert engine_pool_in_use(instance)
        assert fail_dead_runs(instance) == [killed_run]
        assert instance.get_run_by_id(killed_run).status == DagsterRunStatus.FAILURE
        assert not engine_pool_in_use(instance)
    _finish(_start(home, log, 0.1), timeout=120)  # gets the slot at once
    assert len(_steps(log)) == 1


def test_a_host_may_allow_more_engines(tmp_path: Path) -> None:
    """``dagster instance concurrency set engine 2`` (here through the same storage call)."""
    home = _home(tmp_path, None)
    with DagsterInstance.from_config(str(home)) as instance:
        instance.event_log_storage.set_concurrency_slots(ENGINE_POOL, 2)
    log = tmp_path / "steps.jsonl"
    procs = [_start(home, log, STEP_SECONDS) for _ in range(2)]
    for proc in procs:
        _finish(proc)
    first, second = _steps(log)
    assert second["start"] < first["end"]


@requires_mirror
@pytest.mark.parametrize(("other_run_in_pool", "loads"), [(False, 1), (True, 2)])
def test_themis_run_lets_its_warm_engine_go_when_another_run_wants_the_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, other_run_in_pool: bool, loads: int
) -> None:
    """Two tasks of one model: one engine load, unless another run holds or waits for the engine pool."""
    env, _ = themis_deployment(tmp_path)
    for name, value in env.items():
        if name.startswith(("THEMIS_", "DAGSTER_HOME")):
            monkeypatch.setenv(name, value)
    ensure_dagster_home()
    with DagsterInstance.get() as instance:
        storage = instance.event_log_storage
        storage.set_concurrency_slots(ENGINE_POOL, 2)  # room for this run too
        if other_run_in_pool:
            assert storage.claim_concurrency_slot(ENGINE_POOL, "other-run", "raw_responses").is_claimed
    before = EngineResource.loads
    argv = ["run", "--model", MODEL, "--task", "crows_pairs", "--task", "crows_pairs_mc", "--skip-reports"]
    assert cli.main(argv) == 0
    assert EngineResource.loads - before == loads


def test_an_instance_without_any_pool_limit_gets_one_engine(tmp_path: Path) -> None:
    """A Dagster home from before the pool (no ``pools`` in its dagster.yaml): ``themis run`` limits it."""
    with DagsterInstance.from_config(str(_home(tmp_path, pools={"granularity": "op"}))) as instance:
        assert instance.event_log_storage.get_concurrency_info(ENGINE_POOL).limit is None
        assert ensure_engine_pool_limit(instance)
        assert instance.event_log_storage.get_concurrency_info(ENGINE_POOL).limit == 1
        instance.event_log_storage.set_concurrency_slots(ENGINE_POOL, 4)  # a GPU host's own choice stays
        assert not ensure_engine_pool_limit(instance)
        assert instance.event_log_storage.get_concurrency_info(ENGINE_POOL).limit == 4


def test_the_shipped_default_limit_is_left_to_the_instance(tmp_path: Path) -> None:
    with DagsterInstance.from_config(str(_home(tmp_path, pools=None))) as instance:
        assert not ensure_engine_pool_limit(instance)
        info = instance.event_log_storage.get_concurrency_info(ENGINE_POOL)
        assert (info.limit, info.using_default_limit) == (1, True)
