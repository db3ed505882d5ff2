"""The platform as users run it: `dagster dev` (webserver + daemon) on 127.0.0.1, driven over GraphQL.

One module-scoped `dagster dev` with the warm vLLM server engine (THEMIS_ENGINE=vllm-server):
- a checkpoint dropped into the watched folder is registered by the sensor, evaluated,
  and ends up in the metrics view, on the leaderboard and in an HTML report;
- a backfill launched with the UI's GraphQL mutation completes, with one engine start
  for all of the model's tasks;
- the asset graph and a materialization's metadata page render in headless Chromium
  (screenshots kept under tests/artifacts/).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import SETTINGS, requires_mirror
from themis_dagster.engines.vllm.server import VLLMServerManager
from themis_dagster.registry.models import DEFAULT_MODEL_ID

pytestmark = [pytest.mark.server, pytest.mark.engine, requires_mirror]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
TASKS = ["crows_pairs", "bbq_generate"]
PROFILE = {"crows_pairs": {"limit": 16}, "bbq_generate": {"limit": 4}}
CHECKPOINT = "smollm2-ckpt-step-1"
CHAIN = ["task_dataset", "rendered_prompts", "raw_responses", "judgments", "bias_metrics"]


@dataclass
class Live:
    url: str
    env: dict[str, str]
    folder: Path
    warehouse: Path
    checkpoints: Path
    servers: Path

    def gql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(self.url + "/graphql", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            payload = json.loads(response.read())
        assert "errors" not in payload, payload
        return payload["data"]  # type: ignore[no-any-return]

    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """Read the warehouse like an analyst: short read-only connections, retried while a run writes."""
        for _ in range(60):
            try:
                with duckdb.connect(str(self.warehouse), read_only=True) as conn:
                    return conn.execute(sql, params or []).fetchall()
            except (duckdb.IOException, duckdb.CatalogException):
                time.sleep(1)
        raise TimeoutError(sql)


def new_dagster_home(folder: Path) -> Path:
    """A new instance home with the shipped settings, its storage created before any server opens it.

    A webserver, a daemon and their code servers starting together on a new SQLite home can each
    stamp the schema version; the code server then fails with alembic's "more than one head"
    and no run is ever launched (seen once in the full suite at load 14).
    """
    from dagster import DagsterInstance

    home = folder / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    with DagsterInstance.from_config(str(home)):
        pass
    return home


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(predicate: Any, timeout: float, what: str, every: float = 3.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


@contextlib.contextmanager
def dagster_dev(folder: Path, settings: dict[str, str], checkpoints: Path, servers: Path) -> Iterator[Live]:
    """A real ``dagster dev`` (webserver and daemon) on a free port, its instance in ``folder``.

    ``settings`` are its THEMIS_* variables; THEMIS_* and VLLM_* variables of this process
    (engines of earlier tests set some) are not passed on. The log is
    ``folder/dagster-dev.log``; the whole process group is stopped on exit.
    """
    home = new_dagster_home(folder)
    port = _free_port()
    inherited = {key: value for key, value in os.environ.items() if not key.startswith(("VLLM_", "THEMIS_"))}
    env = inherited | {"DAGSTER_HOME": str(home)} | settings
    log = (folder / "dagster-dev.log").open("w")
    process = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "dagster"), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    live = Live(f"http://127.0.0.1:{port}", env, folder, folder / "warehouse.duckdb", checkpoints, servers)
    try:
        _wait(lambda: _answers(live), 120, "the Dagster webserver")
        yield live
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    import yaml

    folder = tmp_path_factory.mktemp("live")
    checkpoints, servers = folder / "checkpoints", folder / "servers"
    for path in (checkpoints, servers):
        path.mkdir()
    (folder / "profile.yaml").write_text(yaml.safe_dump(PROFILE))
    settings = {
        "THEMIS_ENGINE": "vllm-server",
        "THEMIS_SERVER_STATE_DIR": str(servers),
        "THEMIS_WAREHOUSE": str(folder / "warehouse.duckdb"),
        "THEMIS_TASK_OVERRIDES": str(folder / "profile.yaml"),
        "THEMIS_CHECKPOINTS_DIR": str(checkpoints),
        "THEMIS_CHECKPOINT_SETTLE_SECONDS": "2",
        "THEMIS_SENSOR_INTERVAL_S": "5",  # the sensors' ticks, not the platform, are what a test waits on
        "THEMIS_CHECKPOINT_TASKS": ",".join(TASKS),
        # a new checkpoint's path is a new key of vLLM's compile cache: eager, it starts without compiling
        # (about a minute on 2 cores), and the test is about the sensor, the runs and the reports
        "THEMIS_CHECKPOINT_ENGINE": '{"enforce_eager": true}',
        "THEMIS_DISCOVERED_MODELS_FILE": str(folder / "discovered.yaml"),
        "THEMIS_REPORTS_DIR": str(folder / "reports"),
        "THEMIS_EXPORTS_DIR": str(folder / "exports"),
    }
    try:
        with dagster_dev(folder, settings, checkpoints, servers) as live:
            yield live
    finally:
        for model in (DEFAULT_MODEL_ID, CHECKPOINT):
            VLLMServerManager(servers).stop(model)
        shutil.copy(folder / "dagster-dev.log", ARTIFACTS / "dagster-dev.log") if ARTIFACTS.is_dir() else None


def _answers(live: Live) -> bool:
    try:
        return bool(live.gql("{ version }"))
    except OSError:
        return False


RUNS = """query($filter: RunsFilter) { runsOrError(filter: $filter, limit: 100) {
  ... on Runs { results { runId status tags { key value } } } } }"""


def _runs_for(live: Live, model: str) -> list[str]:
    data = live.gql(RUNS, {"filter": {"tags": [{"key": "dagster/partition/model", "value": model}]}})
    return [run["status"] for run in data["runsOrError"]["results"]]


def _server_starts(live: Live, model: str) -> int:
    return VLLMServerManager(live.servers).start_count(model)


def test_checkpoint_dropped_in_the_folder_reaches_the_leaderboard_and_report(live: Live) -> None:
    # "Write" a checkpoint the way a trainer does: into a temporary name, then rename into place.
    staging = live.checkpoints / f"{CHECKPOINT}.partial"
    shutil.copytree(SETTINGS.models_dir / DEFAULT_MODEL_ID, staging)
    staging.rename(live.checkpoints / CHECKPOINT)

    # The daemon submits a tick's run requests one after another: wait for all of them to appear.
    _wait(
        lambda: len(_runs_for(live, CHECKPOINT)) >= len(TASKS), 240, "the sensor's runs for the new checkpoint",
        every=1,
    )  # fmt: skip
    _wait(
        lambda: all(s == "SUCCESS" for s in _runs_for(live, CHECKPOINT)) or "FAILURE" in _runs_for(live, CHECKPOINT),
        900, "the checkpoint's runs to finish",
    )  # fmt: skip
    assert _runs_for(live, CHECKPOINT) == ["SUCCESS"] * len(TASKS)
    rows = live.query("SELECT DISTINCT task FROM metrics WHERE model = ? AND subset IS NULL ORDER BY 1", [CHECKPOINT])
    assert [task for (task,) in rows] == sorted(TASKS)
    # the declarative automation sensor rebuilds the leaderboard and the reports on its own
    board = _wait(
        lambda: live.query("SELECT count(*) FROM leaderboard WHERE model = ?", [CHECKPOINT])[0][0], 300,
        "the leaderboard to include the checkpoint",
    )  # fmt: skip
    assert board >= 2
    report = live.folder / "reports" / CHECKPOINT / "report.html"
    _wait(report.is_file, 300, "the checkpoint's HTML report")
    assert CHECKPOINT in report.read_text()
    assert _server_starts(live, CHECKPOINT) == 1  # one warm engine served all of its runs


def launch_backfill(live: Live, model: str, tasks: list[str]) -> str:
    """What the UI does: register the model partition, then "Materialize" the chain for ``tasks``."""
    repo = {"repositoryLocationName": "themis_dagster", "repositoryName": "__repository__"}
    added = live.gql(
        """mutation($repo: RepositorySelector!, $key: String!) { addDynamicPartition(repositorySelector: $repo,
        partitionsDefName: "models", partitionKey: $key) { __typename } }""",
        {"repo": repo, "key": model},
    )
    assert added["addDynamicPartition"]["__typename"] in (
        "AddDynamicPartitionSuccess",
        "DuplicateDynamicPartitionError",
    )
    launched = live.gql(
        """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
        __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }""",
        {"params": {"assetSelection": [{"path": [key]} for key in CHAIN],
                    "partitionNames": [f"{model}|{task}" for task in tasks]}},
    )  # fmt: skip
    assert launched["launchPartitionBackfill"]["__typename"] == "LaunchBackfillSuccess", launched
    return str(launched["launchPartitionBackfill"]["backfillId"])


def test_backfill_through_the_ui_mutation_loads_the_engine_once(live: Live) -> None:
    backfill_id = launch_backfill(live, DEFAULT_MODEL_ID, TASKS)

    def status() -> str | None:
        data = live.gql(
            """query($id: String!) { partitionBackfillOrError(backfillId: $id) {
            ... on PartitionBackfill { status } } }""",
            {"id": backfill_id},
        )
        value = data["partitionBackfillOrError"]["status"]
        return value if value not in ("REQUESTED",) else None

    assert _wait(status, 900, "the backfill to finish", every=5) == "COMPLETED_SUCCESS"
    assert _runs_for(live, DEFAULT_MODEL_ID) == ["SUCCESS"] * len(TASKS)
    assert _server_starts(live, DEFAULT_MODEL_ID) == 1, "the engine must load once for the whole backfill"
    rows = live.query("SELECT count(DISTINCT task) FROM metrics WHERE model = ?", [DEFAULT_MODEL_ID])
    assert rows == [(len(TASKS),)]


def _screenshot(url: str, target: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("headless Chromium not installed (Debian package 'chromium')")
    with_profile = target.parent / f".chromium-{target.stem}"
    subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={with_profile}", "--window-size=1600,1000", "--virtual-time-budget=15000",
         f"--screenshot={target}", url],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    shutil.rmtree(with_profile, ignore_errors=True)


def test_ui_pages_render(live: Live) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    pages = {
        "asset-graph.png": f"{live.url}/locations/themis_dagster/asset-groups/evaluation",
        "raw-responses-metadata.png": f"{live.url}/assets/raw_responses?view=events",
        "leaderboard.png": f"{live.url}/assets/leaderboard?view=events",
    }
    for name, url in pages.items():
        _screenshot(url, ARTIFACTS / name)
        assert (ARTIFACTS / name).stat().st_size > 20_000, f"{name} looks empty"
    # the instance settings shipped in dagster.yaml keep the community pop-up off these pages
    assert "nux" in (ROOT / "dagster.yaml").read_text()
