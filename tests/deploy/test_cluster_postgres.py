"""A shared Dagster instance on a real PostgreSQL server that this module starts and stops.

deploy/dagster.postgres.yaml as shipped: runs, event logs and schedules land in PostgreSQL
(dagster-postgres); a run executed by one process is seen by another; device slots claimed
from two instances on the same database never overlap; an unreachable server fails naming it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterInstance

from deploy.local_stack import Postgres, free_port, postgres, why_no_postgres
from tests.conftest import make_resources, requires_mirror, write_overrides
from themis_dagster.runs.devices import claim_devices, holders, release_devices
from themis_dagster.runs.reachability import UnreachableError, check_url

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("dagster_postgres", reason="dagster-postgres is not installed (requirements/*.txt pins it)")
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(why_no_postgres() is not None, reason=str(why_no_postgres())),
]
URL_VAR = "THEMIS_DAGSTER_POSTGRES_URL"


@pytest.fixture(scope="module")
def server() -> Iterator[Postgres]:
    with postgres(("dagster",)) as pg:
        yield pg


@pytest.fixture
def home(tmp_path: Path, server: Postgres, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copy(ROOT / "deploy" / "dagster.postgres.yaml", tmp_path / "dagster.yaml")
    monkeypatch.setenv(URL_VAR, server.url)
    return tmp_path


def test_the_instance_keeps_runs_events_and_schedules_in_postgres(home: Path) -> None:
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage

    with DagsterInstance.from_config(str(home)) as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
        assert instance.event_log_storage.supports_global_concurrency_limits


@requires_mirror
def test_a_run_executed_here_is_seen_by_another_process(home: Path, tmp_path: Path) -> None:
    from themis_dagster.definitions import build_definitions
    from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
    from themis_dagster.settings import Settings

    model = "smollm2-135m-instruct"
    overrides = write_overrides(tmp_path / "overrides.yaml", {"crows_pairs": {"limit": 2}})
    job = build_definitions(Settings(engine="fake")).resolve_job_def("evaluate")
    with DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [model])
        result = job.execute_in_process(
            instance=instance,
            resources=make_resources(tmp_path / "warehouse.duckdb", overrides),
            partition_key=evaluation_key(model, "crows_pairs"),
        )
        assert result.success
    reader = (
        "import sys\nfrom dagster import DagsterInstance, AssetKey\n"
        "with DagsterInstance.from_config(sys.argv[1]) as i:\n"
        "    run = i.get_run_by_id(sys.argv[2])\n"
        "    event = i.get_latest_materialization_event(AssetKey('bias_metrics'))\n"
        "    print(run.status.value, event.run_id == sys.argv[2], sorted(i.get_dynamic_partitions('models')))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", reader, str(home), result.run_id], env=env, capture_output=True,
                         text=True, check=True, timeout=300)  # fmt: skip
    assert out.stdout.split() == ["SUCCESS", "True", f"['{model}']"]


def test_device_slots_are_shared_by_every_instance_on_the_database(home: Path) -> None:
    gpus = ("0", "1")
    with DagsterInstance.from_config(str(home)) as one, DagsterInstance.from_config(str(home)) as two:
        first = claim_devices(one, "pg-run-a", 1, gpus)
        second = claim_devices(two, "pg-run-b", 1, gpus)
        assert {*first, *second} == {"0", "1"}
        assert holders(one, gpus) == holders(two, gpus) == {first[0]: "pg-run-a", second[0]: "pg-run-b"}
        release_devices(one, "pg-run-a")
        release_devices(two, "pg-run-b")


def test_an_unreachable_server_fails_fast_and_the_preflight_names_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(ROOT / "deploy" / "dagster.postgres.yaml", tmp_path / "dagster.yaml")
    url = f"postgresql+psycopg2://nobody:s3cret@127.0.0.1:{free_port()}/dagster"  # nothing listens there
    monkeypatch.setenv(URL_VAR, url)
    with pytest.raises(Exception, match="too many retries for DB connection"):  # Dagster's own words
        DagsterInstance.from_config(str(tmp_path))
    with pytest.raises(UnreachableError, match=rf"^{URL_VAR}: cannot reach 127\.0\.0\.1:\d+") as error:
        check_url(URL_VAR, url, 5432)
    assert "s3cret" not in str(error.value)
