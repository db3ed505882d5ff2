"""The Dagster daemon killed in the middle of a backfill, then started again: the backfill completes.

A real ``dagster-webserver`` (to launch the backfill as the UI does) and a real
``dagster-daemon`` share an instance; the fake engine takes a fixed time per call so runs are
long enough to be caught in flight. The daemon's whole process group (its code server and
the run worker it launched) is SIGKILLed, as a crashed or restarted host would lose it; a new
daemon then fails the dead run (``dead_run_sweeper``), Dagster's run retries launch it again
and the backfill counts the retry. Afterwards every partition has exactly its rows.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import requires_mirror
from tests.deploy.test_live_platform import Live, _free_port, _wait, launch_backfill, new_dagster_home
from themis_dagster.registry.models import DEFAULT_MODEL_ID

pytestmark = [pytest.mark.server, pytest.mark.faults, requires_mirror]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# three partitions, run one at a time: one done, one killed in flight, one not yet started
TASKS = ["crows_pairs", "bbq", "crows_pairs_prompted"]
PROFILE = {"crows_pairs": {"limit": 12}, "bbq": {"limit": 2}, "crows_pairs_prompted": {"limit": 12}}


def _start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if process.poll() is None:
        os.killpg(process.pid, sig)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[tuple[Live, dict[str, Any]]]:
    home = new_dagster_home(tmp_path)
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(PROFILE))
    inherited = {key: value for key, value in os.environ.items() if not key.startswith(("VLLM_", "THEMIS_"))}
    env = inherited | {
        "DAGSTER_HOME": str(home),
        "THEMIS_ENGINE": "fake",
        "THEMIS_FAKE_ENGINE_LATENCY_S": "1.5",
        "THEMIS_REQUEST_CHUNK_SIZE": "4",
        "THEMIS_SENSOR_INTERVAL_S": "5",  # the dead-run sweeper finds the killed run sooner
        "THEMIS_WAREHOUSE": str(tmp_path / "warehouse.duckdb"),
        "THEMIS_TASK_OVERRIDES": str(tmp_path / "profile.yaml"),
        "THEMIS_DISCOVERED_MODELS_FILE": str(tmp_path / "discovered.yaml"),
        "THEMIS_REPORTS_DIR": str(tmp_path / "reports"),
        "THEMIS_CHECKPOINTS_DIR": str(tmp_path / "checkpoints"),
        **{key: os.environ[key] for key in ("THEMIS_MODELS_DIR", "THEMIS_CACHE_DIR") if key in os.environ},
    }
    port = _free_port()
    live = Live(f"http://127.0.0.1:{port}", env, tmp_path, tmp_path / "warehouse.duckdb", tmp_path, tmp_path)
    web = _start(
        [str(BIN / "dagster-webserver"), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        env,
        tmp_path / "webserver.log",
    )
    daemons: dict[str, Any] = {"log": tmp_path / "daemon.log", "env": env}
    daemons["process"] = _start([str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"], env, daemons["log"])
    try:
        _wait(lambda: _answers(live), 180, "the Dagster webserver")
        yield live, daemons
    finally:
        _stop(daemons["process"])
        _stop(web)


def _answers(live: Live) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(live.url + "/server_info", timeout=5):
            return True
    except OSError:
        return False


def _runs(live: Live) -> list[dict[str, Any]]:
    data = live.gql("""{ runsOrError { ... on Runs { results { runId status tags { key value } } } } }""")
    runs = data["runsOrError"]["results"]
    return [{"id": r["runId"], "status": r["status"], "tags": {t["key"]: t["value"] for t in r["tags"]}} for r in runs]


def _backfill_status(live: Live, backfill_id: str) -> str:
    data = live.gql(
        """query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill { status } } }""",
        {"id": backfill_id},
    )
    return str(data["partitionBackfillOrError"]["status"])


def test_a_daemon_killed_mid_backfill_restarts_and_the_backfill_completes_whole(
    platform: tuple[Live, dict[str, Any]],
) -> None:
    live, daemons = platform
    backfill_id = launch_backfill(live, DEFAULT_MODEL_ID, TASKS)

    def one_done_one_running() -> bool:
        statuses = [run["status"] for run in _runs(live)]
        return "SUCCESS" in statuses and "STARTED" in statuses

    _wait(one_done_one_running, 600, "a finished run and one in flight", every=1)
    in_flight = [run["id"] for run in _runs(live) if run["status"] == "STARTED"]
    _stop(daemons["process"], signal.SIGKILL)  # the daemon, its code server and the run worker it launched
    assert _backfill_status(live, backfill_id) == "REQUESTED"  # killed in the middle

    daemons["process"] = _start(
        [str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"], daemons["env"], daemons["log"]
    )
    status = _wait(
        lambda: (s := _backfill_status(live, backfill_id)) != "REQUESTED" and s, 900, "the backfill to end", every=5
    )
    runs = _runs(live)
    assert status == "COMPLETED_SUCCESS", (status, [(r["status"], r["tags"].get("dagster/partition")) for r in runs])
    killed = [run for run in runs if run["id"] in in_flight]
    assert [run["status"] for run in killed] == ["FAILURE"]  # marked failed, not left STARTED
    retried = [run for run in runs if run["tags"].get("dagster/parent_run_id") == in_flight[0]]
    assert [run["status"] for run in retried] == ["SUCCESS"]

    for task in TASKS:
        prompts, responses, distinct = live.query(
            "SELECT (SELECT count(*) FROM prompts WHERE model = ? AND task = ?), count(*), count(DISTINCT request_id) "
            "FROM responses WHERE model = ? AND task = ?",
            [DEFAULT_MODEL_ID, task, DEFAULT_MODEL_ID, task],
        )[0]
        assert prompts == responses == distinct > 0, task  # nothing lost, nothing duplicated
    complete = live.query("SELECT task FROM partition_status WHERE complete ORDER BY task")
    assert [row[0] for row in complete] == sorted(TASKS)
    assert live.query("SELECT count(DISTINCT task) FROM metrics") == [(len(TASKS),)]
