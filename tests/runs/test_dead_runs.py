"""A killed run is marked failed (at the next ``themis run`` or schedule tick), so its partition is retried."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import (
    DagsterEventType,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    RunRequest,
    RunsFilter,
    asset,
    build_schedule_context,
    materialize,
)

from tests.conftest import requires_mirror
from tests.deployment import MODEL, TASK, themis_deployment
from themis_dagster.partitions import evaluation_key
from themis_dagster.resources import WarehouseResource
from themis_dagster.runs.orphans import fail_dead_runs
from themis_dagster.runs.owner import HOST_TAG, PID_TAG, RUN_TAG, START_TAG, owner_liveness, owner_tags
from themis_dagster.schedules.reevaluation import _in_flight, plan_reevaluation

# ``themis run`` with an engine that blocks on its first request (after telling the test).
BLOCKING_RUN = """
import sys, time
from pathlib import Path
from themis_dagster.engines.fake import FakeEngine

def block(self, *args, **kwargs):
    Path(sys.argv[1]).write_text("in the engine")
    time.sleep(600)

for name in ("loglikelihood", "generate", "chat"):
    setattr(FakeEngine, name, block)
from themis_dagster.cli import main
sys.exit(main(sys.argv[2:]))
"""


# --- whose process is it --------------------------------------------------------------------


def test_this_process_is_alive() -> None:
    assert owner_liveness(owner_tags("r1"), "r1") == "alive"


def test_a_finished_process_is_gone() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert owner_liveness({**owner_tags("r1"), PID_TAG: str(proc.pid), START_TAG: ""}, "r1") == "gone"


def test_a_reused_pid_is_gone() -> None:
    tags = owner_tags("r1")
    assert owner_liveness({**tags, START_TAG: tags[START_TAG] + "1"}) == "gone"


def test_other_hosts_and_untagged_runs_are_left_alone() -> None:
    assert owner_liveness({**owner_tags("r1"), HOST_TAG: "elsewhere"}) == "unknown"
    assert owner_liveness({}) == "unknown"


def test_tags_copied_to_a_retry_do_not_make_it_dead() -> None:
    """Dagster copies a run's tags to its retry: the dead parent's owner does not own the retry."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    parent = {**owner_tags("parent"), PID_TAG: str(proc.pid), START_TAG: ""}
    assert owner_liveness(parent, "parent") == "gone"
    assert owner_liveness(parent, "its-retry") == "unknown"


# --- a real in-process run, SIGKILLed in its engine step ---------------------------------------


def _kill_in_engine(env: dict[str, str], tmp_path: Path) -> None:
    """Start ``themis run`` in a subprocess and SIGKILL it once its engine step is running."""
    marker = tmp_path / f"engine-{time.monotonic_ns()}"
    argv = [sys.executable, "-c", BLOCKING_RUN, str(marker), "run", "--model", MODEL, "--task", TASK, "--skip-reports"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the run never reached its engine:\n{proc.communicate()[0]}")
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def _only_run(instance: DagsterInstance, status: DagsterRunStatus) -> DagsterRun:
    [run] = instance.get_runs(RunsFilter(statuses=[status]))
    return run


def _failure_message(instance: DagsterInstance, run_id: str) -> str:
    [event] = instance.all_logs(run_id, of_type=DagsterEventType.RUN_FAILURE)
    return event.message


@requires_mirror
def test_the_schedule_fails_a_killed_run_and_retries_its_partition(tmp_path: Path) -> None:
    env, themis = themis_deployment(tmp_path)
    _kill_in_engine(env, tmp_path)
    partition = str(evaluation_key(MODEL, TASK))
    with DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        killed = _only_run(instance, DagsterRunStatus.STARTED)  # what Dagster alone leaves behind
        assert killed.tags["dagster/partition"] == partition
        assert _in_flight(instance) == {partition}

        with build_schedule_context(instance=instance, resources={"themis": themis}) as context:
            plan = plan_reevaluation(context, themis, tasks=[TASK])

        assert isinstance(plan, list)
        [request] = plan
        assert isinstance(request, RunRequest)
        assert (request.partition_key, request.tags["themis/reason"]) == (partition, "missing")
        assert instance.get_run_by_id(killed.run_id).status == DagsterRunStatus.FAILURE
        message = _failure_message(instance, killed.run_id)
        assert f"pid {killed.tags[PID_TAG]}" in message and "is gone" in message
        assert _in_flight(instance) == set()


@requires_mirror
def test_the_next_themis_run_fails_the_killed_run_then_evaluates(tmp_path: Path) -> None:
    env, _ = themis_deployment(tmp_path)
    _kill_in_engine(env, tmp_path)
    argv = [sys.executable, "-m", "themis_dagster.cli", "run", "--model", MODEL, "--task", TASK, "--skip-reports"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    with DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        killed = _only_run(instance, DagsterRunStatus.FAILURE)
        assert f"run {killed.run_id} was left unfinished by a process that is gone" in done.stderr
        assert "is gone" in _failure_message(instance, killed.run_id)
        assert _only_run(instance, DagsterRunStatus.SUCCESS).tags["dagster/partition"] == str(
            evaluation_key(MODEL, TASK)
        )
        assert fail_dead_runs(instance) == []  # nothing left to fail


@asset
def uses_warehouse(warehouse: WarehouseResource) -> None:
    with warehouse.connect() as conn:
        conn.execute("SELECT 1")


def test_every_run_using_the_warehouse_records_its_owner(tmp_path: Path, instance: DagsterInstance) -> None:
    """Also runs a daemon launched: their run worker tags them when the warehouse resource starts."""
    resources = {"warehouse": WarehouseResource(database=str(tmp_path / "w.duckdb"))}
    result = materialize([uses_warehouse], resources=resources, instance=instance)
    tags = instance.get_run_by_id(result.run_id).tags
    assert {key: tags[key] for key in (HOST_TAG, PID_TAG, START_TAG, RUN_TAG)} == owner_tags(result.run_id)
