"""A run asking for more GPUs than any node has stays QUEUED in Dagster's queue, saying why.

The unit tests submit runs to ``ThemisQueuedRunCoordinator`` on a real (SQLite) instance and ask
Dagster's own queue code (``TagConcurrencyLimitsCounter`` over the instance's run queue config)
which runs it would hold. The server test starts a real ``dagster-webserver`` and
``dagster-daemon`` with ``deploy/dagster.multi-gpu.yaml`` on a host lending one device: of two
runs launched together, the one whose model needs two GPUs stays QUEUED with its message while
the other completes, and the daemon stays healthy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus
from dagster._core.remote_origin import RegisteredCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.run_coordinator.base import SubmitRunContext
from dagster._core.test_utils import create_run_for_test
from dagster._utils.tags import TagConcurrencyLimitsCounter

from tests.conftest import requires_mirror
from tests.deploy.test_live_platform import CHAIN, Live, _free_port, _wait
from tests.deployment import TASK, themis_deployment
from tests.runs.test_daemon_restart import _start, _stop
from themis_dagster.registry.model_id import InvalidModelIdError
from themis_dagster.runs import gpu_queue
from themis_dagster.runs.gpu_queue import (
    GPUS_TAG,
    MODEL_TAG,
    OVER_COUNTED,
    ThemisQueuedRunCoordinator,
    gpus_tag_value,
    hold_limits,
    run_need,
)
from themis_dagster.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = {"kind": "local", "path": "/nonexistent/ckpt"}  # never loaded: only the registry is read
MODELS = [
    {"id": "small", "source": CHECKPOINT},
    {"id": "pair", "source": CHECKPOINT, "engine": {"tensor_parallel_size": 2}},
    {"id": "grid", "source": CHECKPOINT, "engine": {"tensor_parallel_size": 2, "pipeline_parallel_size": 4}},
    {"id": "served", "source": {"kind": "api", "base_url": "http://llm.example/v1", "model": "m"}},
]


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({"models": MODELS}))
    monkeypatch.setenv("THEMIS_MODELS_FILE", str(models))
    monkeypatch.setenv("THEMIS_DISCOVERED_MODELS_FILE", str(tmp_path / "discovered.yaml"))
    return Settings.from_env()


def _instance(home: Path, coordinator: dict[str, Any]) -> DagsterInstance:
    home.mkdir(exist_ok=True)
    config = {
        "telemetry": {"enabled": False},
        "run_coordinator": {"module": "themis_dagster.runs.gpu_queue", "class": "ThemisQueuedRunCoordinator",
                            "config": coordinator},
    }  # fmt: skip
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    return DagsterInstance.from_config(str(home))


@pytest.fixture
def host(tmp_path: Path, settings: Settings) -> Iterator[DagsterInstance]:
    """An instance whose queue knows a host lending two devices (``devices: "0,1"``)."""
    per_model = {"key": MODEL_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
    config = {"max_concurrent_runs": 8, "devices": "0,1", "tag_concurrency_limits": [per_model]}
    with _instance(tmp_path / "home", config) as instance:
        yield instance


def _submit(instance: DagsterInstance, tags: dict[str, str]) -> Any:
    location = RegisteredCodeLocationOrigin("themis_dagster")
    origin = RemoteJobOrigin(RemoteRepositoryOrigin(location, "__repository__"), "evaluate")
    run = create_run_for_test(instance, job_name="evaluate", tags=tags, remote_job_origin=origin)
    return instance.run_coordinator.submit_run(SubmitRunContext(run, workspace=None))  # type: ignore[arg-type]


def _engine_messages(instance: DagsterInstance, run_id: str) -> list[str]:
    records = instance.all_logs(run_id, of_type=DagsterEventType.ENGINE_EVENT)
    return [record.message for record in records]


def _blocked(instance: DagsterInstance, run: Any) -> bool:
    """What the daemon's dequeue asks of each queued run (no run in progress)."""
    config = instance.get_concurrency_config().run_queue_config
    assert config is not None
    return TagConcurrencyLimitsCounter(list(config.tag_concurrency_limits), []).is_blocked(run)


def test_hold_limits_cover_every_need_above_the_capacity() -> None:
    limits = hold_limits(2)
    assert {limit["key"] for limit in limits} == {GPUS_TAG} and {limit["limit"] for limit in limits} == {0}
    values = [limit["value"] for limit in limits]
    assert values[:2] == ["3", "4"] and values[-2:] == ["64", OVER_COUNTED] and "2" not in values
    assert hold_limits(None) == []
    assert hold_limits(0)[0]["value"] == "1"  # no GPUs at all: every GPU model waits
    assert gpus_tag_value(8) == "8" and gpus_tag_value(65) == OVER_COUNTED


def test_run_need_reads_the_registry_and_validates_the_model_id_first(settings: Settings) -> None:
    task = {"dagster/partition/task": "bbq"}
    assert run_need({MODEL_TAG: "small", **task}, settings) == ("small", 1)
    assert run_need({MODEL_TAG: "grid"}, settings) == ("grid", 8)
    assert run_need({MODEL_TAG: "served"}, settings) == ("served", 0)  # its GPUs are the server's
    assert run_need(task, settings) is None  # not a one-model run (the report job)
    for bad in ("A|b", "../etc", "x y", ""):
        with pytest.raises(InvalidModelIdError, match=MODEL_TAG):
            run_need({MODEL_TAG: bad}, settings)
    with pytest.raises(KeyError, match="no such model"):
        run_need({MODEL_TAG: "unknown"}, settings)


def test_a_run_needing_more_gpus_than_the_host_lends_is_queued_and_held_with_a_message(
    host: DagsterInstance,
) -> None:
    big = _submit(host, {MODEL_TAG: "grid"})
    fits = _submit(host, {MODEL_TAG: "pair"})
    assert big.status == fits.status == DagsterRunStatus.QUEUED
    assert big.tags[GPUS_TAG] == "8" and fits.tags[GPUS_TAG] == "2"
    assert _blocked(host, big) and not _blocked(host, fits)
    (message,) = _engine_messages(host, big.run_id)
    assert "model grid needs 8 GPUs" in message and "the largest node offers 2 (THEMIS_DEVICES=0,1)" in message
    assert _engine_messages(host, fits.run_id) == []
    host.run_coordinator.submit_run(SubmitRunContext(big, workspace=None))  # type: ignore[arg-type]
    assert len(_engine_messages(host, big.run_id)) == 1  # submitted again: no second message


def test_runs_of_no_model_an_api_model_or_an_unknown_one_are_not_held(host: DagsterInstance) -> None:
    served = _submit(host, {MODEL_TAG: "served"})
    assert served.tags[GPUS_TAG] == "0" and not _blocked(host, served)
    reports = _submit(host, {})
    assert GPUS_TAG not in reports.tags and not _blocked(host, reports)
    unknown = _submit(host, {MODEL_TAG: "Bad|Id"})  # a key added by hand in the UI: never looked up
    assert unknown.status == DagsterRunStatus.QUEUED and GPUS_TAG not in unknown.tags
    (message,) = _engine_messages(host, unknown.run_id)
    assert "invalid model id 'Bad|Id'" in message and MODEL_TAG in message
    handset = _submit(host, {MODEL_TAG: "grid", GPUS_TAG: "1"})  # a tag set by hand wins
    assert handset.tags[GPUS_TAG] == "1" and not _blocked(host, handset)


def test_the_capacity_comes_from_configuration(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _instance(tmp_path / "fixed", {"gpus_per_node": 8}) as instance:
        coordinator = instance.run_coordinator
        assert isinstance(coordinator, ThemisQueuedRunCoordinator)
        assert coordinator.capacity() == (8, "run_coordinator.config.gpus_per_node")
        assert not _blocked(instance, _submit(instance, {MODEL_TAG: "grid"}))
    asked: list[tuple[str, str]] = []

    def largest(address: str, resource: str) -> int:
        asked.append((address, resource))
        return 4

    monkeypatch.setattr(gpu_queue, "ray_largest_node", largest)
    monkeypatch.setenv("THEMIS_RAY_GPU_RESOURCE", "fake_gpu")
    monkeypatch.setenv("RAY_ADDRESS_FOR_TEST", "http://ray-head.example:8265")
    with _instance(tmp_path / "ray", {"ray_address": {"env": "RAY_ADDRESS_FOR_TEST"}}) as instance:
        big = _submit(instance, {MODEL_TAG: "grid"})
        assert _blocked(instance, big) and not _blocked(instance, _submit(instance, {MODEL_TAG: "pair"}))
        assert (
            "the largest node offers 4 (Ray resource 'fake_gpu' of the largest node)"
            in _engine_messages(instance, big.run_id)[0]
        )
        assert asked == [("http://ray-head.example:8265", "fake_gpu")]  # asked once a minute, not per run

    def unreachable(address: str, resource: str) -> int:
        raise ConnectionError("refused")

    monkeypatch.setattr(gpu_queue, "ray_largest_node", unreachable)
    with _instance(tmp_path / "down", {"ray_address": "http://ray-head.example:8265"}) as instance:
        assert not _blocked(instance, _submit(instance, {MODEL_TAG: "grid"}))  # unknown: Ray decides, as before


def test_a_malformed_devices_setting_fails_when_the_instance_loads(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="THEMIS_DEVICES"):
        _instance(tmp_path / "home", {"devices": "0;1"}).run_coordinator  # noqa: B018


def test_the_deploy_configs_hold_runs_above_their_capacity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THEMIS_DEVICES", "0,1,2,3")
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "dagster.multi-gpu.yaml", home / "dagster.yaml")
    with DagsterInstance.from_config(str(home)) as instance:
        config = instance.get_concurrency_config()
        assert config.run_queue_config is not None and config.run_queue_config.max_concurrent_runs == 8
        limits = config.run_queue_config.tag_concurrency_limits
        assert limits[0]["key"] == MODEL_TAG  # the per-model limit survives beside the GPU limits
        assert next(limit["value"] for limit in limits if limit["key"] == GPUS_TAG) == "5"
        assert config.pool_config.default_pool_limit == 4
    ray = yaml.safe_load((ROOT / "deploy" / "dagster.ray.yaml").read_text())["run_coordinator"]
    assert ray["class"] == "ThemisQueuedRunCoordinator"
    assert ray["config"]["ray_address"] == {"env": "THEMIS_RAY_JOB_ADDRESS"}


# --- the real daemon -------------------------------------------------------------------------------

BIN = Path(sys.executable).parent
SERVER_MODELS = {"fits": {}, "pair": {"tensor_parallel_size": 2}}  # one device lent: "pair" fits nowhere


@pytest.fixture
def one_gpu_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Live, subprocess.Popen[bytes]]]:
    """A webserver and daemon with ``deploy/dagster.multi-gpu.yaml`` as it ships, ``THEMIS_DEVICES=0``."""
    env, _ = themis_deployment(tmp_path)
    source = yaml.safe_load(Path(env["THEMIS_MODELS_FILE"]).read_text())["models"][0]["source"]
    models = [{"id": model, "source": source, "engine": engine} for model, engine in SERVER_MODELS.items()]
    Path(env["THEMIS_MODELS_FILE"]).write_text(yaml.safe_dump({"models": models}))
    env = {key: value for key, value in env.items() if not key.startswith("VLLM_")} | {"THEMIS_DEVICES": "0"}
    home = Path(env["DAGSTER_HOME"])
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "dagster.multi-gpu.yaml", home / "dagster.yaml")
    monkeypatch.setenv("THEMIS_DEVICES", "0")
    with DagsterInstance.from_config(str(home)):
        pass  # create the storage once, so the webserver and the daemon do not both migrate a new one
    port = _free_port()
    live = Live(f"http://127.0.0.1:{port}", env, tmp_path, Path(env["THEMIS_WAREHOUSE"]), tmp_path, tmp_path)
    web = _start(
        [str(BIN / "dagster-webserver"), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        env,
        tmp_path / "webserver.log",
    )
    daemon = _start([str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"], env, tmp_path / "daemon.log")
    try:
        _wait(lambda: _answers(live), 180, "the Dagster webserver", every=1)
        yield live, daemon
    finally:
        _stop(daemon)
        _stop(web)


def _answers(live: Live) -> bool:
    try:
        return bool(live.gql("{ version }"))
    except OSError:
        return False


def _runs(live: Live) -> dict[str, dict[str, Any]]:
    data = live.gql("""{ runsOrError { ... on Runs { results { runId status tags { key value } } } } }""")
    runs = [{"id": r["runId"], "status": r["status"], "tags": {t["key"]: t["value"] for t in r["tags"]}}
            for r in data["runsOrError"]["results"]]  # fmt: skip
    return {run["tags"][MODEL_TAG]: run for run in runs}


def _messages(live: Live, run_id: str) -> list[str]:
    data = live.gql(
        """query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events {
        __typename ... on MessageEvent { message } } } } }""",
        {"id": run_id},
    )
    return [event["message"] for event in data["logsForRun"]["events"] if event["__typename"] == "EngineEvent"]


@requires_mirror
@pytest.mark.server
def test_the_daemon_keeps_a_too_big_run_queued_while_the_rest_of_its_backfill_runs(
    one_gpu_host: tuple[Live, subprocess.Popen[bytes]],
) -> None:
    live, daemon = one_gpu_host
    repo = {"repositoryLocationName": "themis_dagster", "repositoryName": "__repository__"}
    for model in SERVER_MODELS:
        live.gql(
            """mutation($repo: RepositorySelector!, $key: String!) { addDynamicPartition(repositorySelector: $repo,
            partitionsDefName: "models", partitionKey: $key) { __typename } }""",
            {"repo": repo, "key": model},
        )
    launched = live.gql(
        """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
        __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }""",
        {"params": {"assetSelection": [{"path": [key]} for key in CHAIN],
                    "partitionNames": [f"{model}|{TASK}" for model in SERVER_MODELS]}},
    )  # fmt: skip
    assert launched["launchPartitionBackfill"]["__typename"] == "LaunchBackfillSuccess", launched

    def fitting_run_ended() -> dict[str, dict[str, Any]] | None:
        runs = _runs(live)
        done = "fits" in runs and runs["fits"]["status"] in ("SUCCESS", "FAILURE", "CANCELED")
        return runs if done else None

    runs = _wait(fitting_run_ended, 240, "the fitting run to end", every=1)
    assert runs["fits"]["status"] == "SUCCESS", (live.folder / "daemon.log").read_text()[-3000:]
    assert runs["fits"]["tags"][GPUS_TAG] == "1", runs["fits"]["tags"]
    held = runs["pair"]
    assert held["status"] == "QUEUED" and held["tags"][GPUS_TAG] == "2"
    (message,) = [m for m in _messages(live, held["id"]) if "needs" in m]
    assert "model pair needs 2 GPUs" in message and "the largest node offers 1 (THEMIS_DEVICES=0)" in message
    queue = live.gql("{ instance { runQueueConfig { tagConcurrencyLimitsYaml } } }")["instance"]["runQueueConfig"]
    assert "key: themis/gpus\n  limit: 0\n  value: '2'" in queue["tagConcurrencyLimitsYaml"]  # the UI's queue reason

    time.sleep(6)  # more dequeue ticks (every 5 s): still held, nothing failed, the daemon healthy
    assert _runs(live)["pair"]["status"] == "QUEUED"
    assert daemon.poll() is None
    statuses = "{ daemonType required healthy lastHeartbeatErrors { message } }"
    answer = live.gql("{ instance { daemonHealth { allDaemonStatuses " + statuses + " } } }")
    health = answer["instance"]["daemonHealth"]["allDaemonStatuses"]
    queue = next(status for status in health if status["daemonType"] == "QUEUED_RUN_COORDINATOR")
    assert queue["healthy"] and not queue["lastHeartbeatErrors"], queue
    assert all(status["healthy"] for status in health if status["required"]), health


@pytest.mark.cluster
@pytest.mark.server  # starts Ray nodes: outside the fast suite, serialized with the other server tests
def test_the_capacity_of_a_real_ray_cluster_is_its_largest_node(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ray.dashboard", reason="ray[default] is not installed (the state API needs it)")
    from deploy.local_stack import ray_cluster

    env = {key: value for key, value in os.environ.items() if not key.startswith(("RAY_", "THEMIS_"))}
    with ray_cluster(env, {"fake_gpu": 1}, {"fake_gpu": 2}) as cluster:
        assert gpu_queue.ray_largest_node(cluster.dashboard, "fake_gpu") == 2
        assert gpu_queue.ray_largest_node(cluster.dashboard, "GPU") == 0  # no real GPU on either node
        monkeypatch.setenv("THEMIS_RAY_GPU_RESOURCE", "fake_gpu")
        with _instance(tmp_path / "home", {"ray_address": cluster.dashboard}) as instance:
            assert _blocked(instance, _submit(instance, {MODEL_TAG: "grid"}))  # 8 > 2
            assert not _blocked(instance, _submit(instance, {MODEL_TAG: "pair"}))  # 2 fit the worker
