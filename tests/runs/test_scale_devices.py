"""Device assignment without GPUs: runs claim disjoint devices through Dagster's concurrency slots.

The claims go through a real instance's storage (SQLite here, the same tables on PostgreSQL),
from threads and from separate processes; the evaluation job itself is run with the fake
engine on a host that lends two devices.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from pathlib import Path

import pytest
import yaml
from dagster import DagsterInstance

from tests.conftest import make_resources, requires_mirror, write_overrides
from themis_dagster.errors import ConfigError
from themis_dagster.registry.models import EngineArgs, parse_models
from themis_dagster.resources import engine_resource_class
from themis_dagster.runs.devices import (
    DEVICES_TAG,
    DeviceClaimError,
    claim_devices,
    device_pool,
    ensure_device_pools,
    holders,
    parse_devices,
    release_devices,
)
from themis_dagster.settings import Settings

GPUS = ("0", "1", "2", "3")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump({"telemetry": {"enabled": False}}))
    return tmp_path


def test_gpu_count_is_tensor_times_pipeline_parallel() -> None:
    assert EngineArgs().gpu_count == 1
    assert EngineArgs(tensor_parallel_size=2, pipeline_parallel_size=3).gpu_count == 6
    bad = {"models": [{"id": "m", "source": {"kind": "local", "path": "/x"}, "engine": {"pipeline_parallel_size": 0}}]}
    with pytest.raises(ConfigError, match=r"engine\.pipeline_parallel_size"):
        parse_models(bad)


def test_parse_devices_names_the_setting() -> None:
    assert parse_devices("0, 1,2") == ("0", "1", "2")
    assert parse_devices("") == ()
    with pytest.raises(ValueError, match="THEMIS_DEVICES"):
        parse_devices("0;1")
    with pytest.raises(ValueError, match="listed twice"):
        parse_devices("0,0")


def test_a_bad_devices_setting_fails_before_anything_is_built() -> None:
    from themis_dagster.resources import engine_resource

    with pytest.raises(ValueError, match="THEMIS_DEVICES"):
        engine_resource(Settings(engine="fake", devices="gpu0"))


def test_claims_are_disjoint_and_given_back(home: Path) -> None:
    with DagsterInstance.from_config(str(home)) as instance:
        first = claim_devices(instance, "run-a", 1, GPUS)
        pair = claim_devices(instance, "run-b", 2, GPUS)
        assert set(first).isdisjoint(pair) and len(pair) == 2
        assert holders(instance, GPUS) == {"0": "run-a", "1": "run-b", "2": "run-b", "3": None}
        with pytest.raises(DeviceClaimError, match="within"):
            claim_devices(instance, "run-c", 2, GPUS, timeout_s=0.5, poll_s=0.1)
        assert holders(instance, GPUS)["3"] is None  # the partial claim was given back
        release_devices(instance, "run-b")
        assert claim_devices(instance, "run-c", 2, GPUS) == ("1", "2")
        assert claim_devices(instance, "run-c", 2, GPUS) == ("1", "2")  # a retried step keeps its devices


def test_a_model_needing_more_gpus_than_the_host_lends_fails_naming_the_settings(home: Path) -> None:
    needs = r"needs 8 GPUs .*pipeline_parallel_size.*THEMIS_DEVICES lends .* 4"
    with DagsterInstance.from_config(str(home)) as instance, pytest.raises(DeviceClaimError, match=needs):
        claim_devices(instance, "run-a", 8, GPUS)


def test_a_waiting_run_gets_the_devices_when_they_are_freed(home: Path) -> None:
    with DagsterInstance.from_config(str(home)) as instance:
        claim_devices(instance, "big", 4, GPUS)
        got: list[tuple[str, ...]] = []
        waiting = threading.Thread(target=lambda: got.append(claim_devices(instance, "next", 2, GPUS, poll_s=0.05)))
        messages: list[str] = []
        claim_devices(instance, "probe", 0, GPUS, log=messages.append)  # needs none: never waits
        waiting.start()
        time.sleep(0.5)
        assert not got and waiting.is_alive()
        release_devices(instance, "big")
        waiting.join(timeout=10)
        assert got == [("0", "1")]


def test_a_slot_made_by_hand_with_more_room_is_set_back_to_one(home: Path) -> None:
    with DagsterInstance.from_config(str(home)) as instance:
        instance.event_log_storage.set_concurrency_slots(device_pool("0"), 3)
        claim_devices(instance, "a", 1, ("0",))
        with pytest.raises(DeviceClaimError):
            claim_devices(instance, "b", 1, ("0",), timeout_s=0.3, poll_s=0.1)


def _claim_in_process(home: str, run_id: str, hold_s: float, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    with DagsterInstance.from_config(home) as instance:
        chosen = claim_devices(instance, run_id, 1, GPUS[:2], poll_s=0.1)
        queue.put((run_id, chosen, time.monotonic()))
        time.sleep(hold_s)
        # Stamped before the release: the stamped span lies inside the span the storage held the slot,
        # so two stamped spans overlap only if the storage really let two runs hold one device.
        queue.put((run_id, "released", time.monotonic()))
        release_devices(instance, run_id)


def test_processes_claiming_at_once_never_share_a_device(home: Path) -> None:
    """Three processes, two devices: two get one each, the third waits for a release."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    with DagsterInstance.from_config(str(home)):
        pass  # create the storage once before the processes race to open it
    workers = [ctx.Process(target=_claim_in_process, args=(str(home), f"run-{i}", 1.5, queue)) for i in range(3)]
    for worker in workers:
        worker.start()
    events = [queue.get(timeout=120) for _ in range(6)]
    for worker in workers:
        worker.join(timeout=30)
    holding: dict[str, str] = {}  # device -> run, replayed in the order the events happened
    for run_id, what, _ in sorted(events, key=lambda event: event[2]):
        if what == "released":
            holding = {device: run for device, run in holding.items() if run != run_id}
            continue
        (device,) = what
        assert device not in holding, f"{run_id} got device {device} while {holding[device]} held it"
        holding[device] = run_id
    with DagsterInstance.from_config(str(home)) as instance:
        assert set(holders(instance, GPUS).values()) == {None}


def test_a_process_that_imports_only_the_device_claims_gets_the_compare_and_set_claim() -> None:
    """The claim that keeps two processes off one device is installed by the module that claims them."""
    import subprocess
    import sys

    check = (
        "import themis_dagster.runs.devices\n"
        "from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage as S\n"
        "from themis_dagster.runs import dagster_fixes\n"
        "assert S._claim_concurrency_slot is not dagster_fixes.DAGSTER_CLAIM"
    )
    subprocess.run([sys.executable, "-c", check], check=True, timeout=120)


def _racing_storage(instance: DagsterInstance, rival: DagsterInstance, devices: tuple[str, ...]) -> None:
    """Make ``instance`` lose the pool-creation race once: it saw no limit row, ``rival`` then creates it."""
    from dagster._core.storage.event_log.schema import ConcurrencyLimitsTable

    storage = instance.event_log_storage
    original = storage._upsert_and_lock_limit_row  # type: ignore[attr-defined]
    raced: list[bool] = []

    def upsert(conn, concurrency_key, num, has_default_pool_limit_col):  # type: ignore[no-untyped-def]
        if raced:
            return original(conn, concurrency_key, num, has_default_pool_limit_col)
        raced.append(True)
        ensure_device_pools(rival, devices)  # the other run, in between our look and our insert
        conn.execute(ConcurrencyLimitsTable.insert().values(concurrency_key=concurrency_key, limit=num))
        return None

    storage._upsert_and_lock_limit_row = upsert  # type: ignore[attr-defined]


@pytest.mark.parametrize("attempts", [1, 5])
def test_two_runs_creating_the_device_pools_at_once(home: Path, attempts: int) -> None:
    """Dagster's own insert of a new pool's limit row fails for the later of two runs on SQLite; ours looks again."""
    from sqlalchemy.exc import IntegrityError

    with DagsterInstance.from_config(str(home)) as ours, DagsterInstance.from_config(str(home)) as rival:
        _racing_storage(ours, rival, GPUS)
        if attempts == 1:
            with pytest.raises(IntegrityError, match="concurrency_limits"):
                ensure_device_pools(ours, GPUS, attempts=1)
            return
        ensure_device_pools(ours, GPUS, attempts=attempts)
        infos = ours.event_log_storage.get_concurrency_infos([device_pool(device) for device in GPUS])
        assert {pool: info.slot_count for pool, info in infos.items()} == {device_pool(d): 1 for d in GPUS}


@requires_mirror
def test_each_run_of_the_job_gets_its_own_device_and_tag(tmp_path: Path, home: Path) -> None:
    from themis_dagster.definitions import build_definitions
    from themis_dagster.partitions import MODELS_PARTITION, evaluation_key

    overrides = write_overrides(tmp_path / "overrides.yaml", {"crows_pairs": {"limit": 2}})
    resources = make_resources(tmp_path / "warehouse.duckdb", overrides)
    resources["engine"] = engine_resource_class("fake")(devices="5,7")
    defs = build_definitions(Settings(engine="fake"))
    job = defs.resolve_job_def("evaluate")
    model = "smollm2-135m-instruct"
    with DagsterInstance.from_config(str(home)) as local:
        local.add_dynamic_partitions(MODELS_PARTITION, [model])
        result = job.execute_in_process(
            instance=local,
            resources=resources,
            partition_key=evaluation_key(model, "crows_pairs"),
        )
        assert result.success
        run = local.get_run_by_id(result.run_id)
        assert run is not None and run.tags[DEVICES_TAG] == "5"
        assert os.environ.pop("CUDA_VISIBLE_DEVICES") == "5"
        assert set(holders(local, ("5", "7")).values()) == {None}  # given back at the end of the run
