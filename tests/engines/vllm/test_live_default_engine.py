"""The default engine (vLLM in the run's own process) under the real ``dagster dev``.

A partition launched like the UI's "Materialize" button (GraphQL ``launchPartitionBackfill``)
is executed by the daemon in a run-worker process that Dagster's run launcher starts; vLLM's
engine core and worker then live inside that process. The run must succeed and record, in
the warehouse, that vLLM ran in-process with the batched prompt-logprobs step.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import yaml

from tests.conftest import requires_mirror
from tests.deploy.test_live_platform import Live, _runs_for, _wait, dagster_dev, launch_backfill
from themis_dagster.registry.models import DEFAULT_MODEL_ID

pytestmark = [pytest.mark.server, pytest.mark.engine, requires_mirror]


@pytest.fixture(scope="module")
def live_default(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    folder = tmp_path_factory.mktemp("live_default")
    (folder / "profile.yaml").write_text(yaml.safe_dump({"crows_pairs": {"limit": 16}}))
    settings = {
        "THEMIS_ENGINE": "vllm",
        "THEMIS_WAREHOUSE": str(folder / "warehouse.duckdb"),
        "THEMIS_TASK_OVERRIDES": str(folder / "profile.yaml"),
        "THEMIS_CHECKPOINTS_DIR": str(folder / "checkpoints"),
        "THEMIS_DISCOVERED_MODELS_FILE": str(folder / "discovered.yaml"),
        "THEMIS_REPORTS_DIR": str(folder / "reports"),
        "THEMIS_EXPORTS_DIR": str(folder / "exports"),
    }
    with dagster_dev(folder, settings, folder / "checkpoints", folder / "servers") as live:
        yield live


def test_a_ui_launched_run_hosts_vllm_in_its_own_process(live_default: Live) -> None:
    live = live_default
    launch_backfill(live, DEFAULT_MODEL_ID, ["crows_pairs"])

    def finished() -> list[str] | None:
        statuses = _runs_for(live, DEFAULT_MODEL_ID)
        return statuses if statuses and all(s in ("SUCCESS", "FAILURE", "CANCELED") for s in statuses) else None

    statuses = _wait(finished, 900, "the run", every=5)
    assert statuses == ["SUCCESS"], (live.folder / "dagster-dev.log").read_text()[-3000:]
    sql = "SELECT config FROM evaluation_runs WHERE model = ? AND task = 'crows_pairs'"
    (config,) = live.query(sql, [DEFAULT_MODEL_ID])
    engine = json.loads(config[0])["engine"]
    assert engine["engine"] == "vllm"
    assert engine["settings"]["distributed_executor_backend"] == "uni"
    assert engine["settings"]["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert engine["settings"]["THEMIS_BATCHED_PROMPT_LOGPROBS"] == "1"
    rows = live.query("SELECT count(*) FROM metrics WHERE model = ? AND task = 'crows_pairs'", [DEFAULT_MODEL_ID])
    assert rows[0][0] > 0
