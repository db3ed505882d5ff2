"""An API key set in the environment ends up in no table, Dagster event, log line, report or file.

An API-backed model is evaluated against the local fake OpenAI-style server on a loglikelihood
task and a chat task; the server echoes the Authorization header it received in a retried 503,
in a 503 body long enough that an error snippet cuts it, and in a 401. The report assets run
too; then every place a run leaves text is scanned for the key and for either half of it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml
from dagster import AssetKey, DagsterInstance, materialize, serialize_value

from tests.conftest import SETTINGS, requires_mirror, write_overrides
from tests.engines.openai_fake import FakeServer, Reply, json_reply
from tests.engines.openai_fake import fake as server  # noqa: F401 - the fixture
from themis_dagster.assets import evaluation_assets, report_assets
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.resources import ThemisConfig, WarehouseResource
from themis_dagster.resources.served import OpenAIEngineResource
from themis_dagster.warehouse.tables import quote

KEY_ENV = "THEMIS_TEST_SECRET_KEY"
KEY = "sk-themis-LEAKCHECK-7f3a9c2e5b1d4086aa"
MODEL = "hosted-toy"
TASKS = {"crows_pairs": 10, "crows_pairs_mc": 6}  # loglikelihood, chat
PIECES = (KEY, KEY[: len(KEY) // 2], KEY[len(KEY) // 2 :])  # a cut key is a leak too


def _models_file(tmp_path: Path, base_url: str) -> Path:
    """The project's registry plus a model behind the fake server, its key named by KEY_ENV."""
    registry = yaml.safe_load(SETTINGS.models_file.read_text())
    registry["models"].append(
        {
            "id": MODEL,
            "description": "a hosted model (the test's fake server)",
            "source": {
                "kind": "api",
                "base_url": base_url,
                "model": "toy",
                "api_key_env": KEY_ENV,
                "max_concurrency": 1,
            },
        }
    )
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(registry))
    return path


def _echoing(fake: FakeServer, refuse_chats: dict[str, bool]) -> Any:
    """Fails some requests with bodies that repeat the Authorization header the server received."""
    seen = {"/v1/completions": 0, "/v1/chat/completions": 0}

    def respond(method: str, path: str, body: dict[str, Any]) -> Reply | None:
        if path not in seen:
            return None
        with fake.lock:
            seen[path] += 1
            n = seen[path]
            header = fake.requests[-1][3]  # every request carries the same header
        if path == "/v1/completions" and n == 1:  # retried: logged as a warning
            return json_reply({"error": f"overloaded, got Authorization: {header}"}, status=503)
        if path == "/v1/completions" and n == 2:  # the key straddles the error's 300-character snippet
            return json_reply({"error": "x" * 240 + f" got Authorization: {header}"}, status=503)
        if path == "/v1/chat/completions" and (n == 3 or refuse_chats["on"]):  # stops the run's later chats
            return json_reply({"error": {"message": f"Incorrect API key provided: {header}"}}, status=401)
        return None

    return respond


def _warehouse_hits(warehouse: Path, pieces: tuple[str, ...] = PIECES) -> list[str]:
    """Every column of every table and view, as text, that contains one of ``pieces``."""
    hits = []
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_catalog = current_database()"
        ).fetchall()
        assert len({table for table, _ in columns}) > 5
        for table, column in columns:
            for piece in pieces:
                found = conn.execute(
                    f"SELECT count(*) FROM {quote(table)} WHERE contains(CAST({quote(column)} AS VARCHAR), ?)",
                    [piece],
                ).fetchone()
                if found and found[0]:
                    hits.append(f"{table}.{column}")
    return hits


def _file_hits(root: Path, pieces: tuple[str, ...] = PIECES) -> list[str]:
    """Every file under ``root`` (warehouse, reports, exports, Dagster's storage and logs) holding one of ``pieces``."""
    return [
        str(path)
        for path in root.rglob("*")
        if path.is_file() and any(piece.encode() in path.read_bytes() for piece in pieces)
    ]


def _instance_text(instance: DagsterInstance) -> dict[str, str]:
    """Each run's record (config, tags) and every event it logged, serialized."""
    texts = {}
    for run in instance.get_runs():
        texts[f"run {run.run_id}"] = serialize_value(run) + repr(run.run_config) + repr(run.tags)
        texts[f"events {run.run_id}"] = "\n".join(serialize_value(event) for event in instance.all_logs(run.run_id))
    return texts


def _errors(warehouse: Path) -> tuple[list[tuple[str, int]], int, str]:
    """Failed responses per task, the chat task's request count, and one 401 error as recorded."""
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        failed = conn.execute(
            "SELECT task, count(*) FROM responses WHERE model = ? AND error IS NOT NULL GROUP BY task ORDER BY task",
            [MODEL],
        ).fetchall()
        chats = conn.execute(
            "SELECT count(*) FROM prompts WHERE model = ? AND task = 'crows_pairs_mc'", [MODEL]
        ).fetchone()
        unauthorised = conn.execute(
            "SELECT error FROM responses WHERE model = ? AND error LIKE '%HTTP 401%' LIMIT 1", [MODEL]
        ).fetchone()
    assert chats is not None and unauthorised is not None
    return failed, int(chats[0]), str(unauthorised[0])


def _resources(themis: ThemisConfig, warehouse: Path) -> dict[str, object]:
    """A run's resources; the engine resource is the HTTP one (an API model is answered over HTTP anyway)."""
    return {"themis": themis, "warehouse": WarehouseResource(database=str(warehouse)), "engine": OpenAIEngineResource()}


@requires_mirror
@pytest.mark.faults
def test_an_api_key_leaves_no_trace(
    tmp_path: Path,
    server: FakeServer,  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    caplog.set_level(logging.DEBUG)
    refuse_chats = {"on": False}
    server.responder = _echoing(server, refuse_chats)
    warehouse = tmp_path / "w.duckdb"
    settings: dict[str, Any] = {
        "models_file": str(_models_file(tmp_path, server.base_url)),
        "datasets_dir": str(SETTINGS.datasets_dir),
        "cache_dir": str(SETTINGS.cache_dir),
        "models_dir": str(SETTINGS.models_dir),
        "task_overrides_file": str(
            write_overrides(tmp_path / "overrides.yaml", {t: {"limit": n} for t, n in TASKS.items()})
        ),
        "exports_dir": str(tmp_path / "exports"),
        "reports_dir": str(tmp_path / "reports"),
        "allow_downloads": False,
        "request_chunk_size": 4,
    }
    themis = ThemisConfig(**settings)
    (tmp_path / "dagster_home").mkdir()
    with DagsterInstance.local_temp(tempdir=str(tmp_path / "dagster_home")) as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL])
        for task in TASKS:
            result = materialize(
                [*evaluation_assets, *report_assets],
                partition_key=evaluation_key(MODEL, task),
                selection=[asset.key for asset in evaluation_assets],
                resources=_resources(themis, warehouse),
                instance=instance,
            )
            assert result.success
        failed, chats, unauthorised = _errors(warehouse)

        refuse_chats["on"] = True  # a run whose every request fails raises, quoting the first error
        refused = materialize(
            [*evaluation_assets, *report_assets],
            partition_key=evaluation_key(MODEL, "crows_pairs_mc"),
            selection=[asset.key for asset in evaluation_assets],
            resources=_resources(ThemisConfig(**settings, request_cache=False), warehouse),
            instance=instance,
            raise_on_error=False,
        )
        assert not refused.success
        error = refused.get_step_failure_events()[0].step_failure_data.error
        assert error is not None and error.cause is not None
        assert "every request failed" in error.cause.message and "HTTP 401" in error.cause.message
        assert "Bearer ***" in error.cause.message

        reports = materialize(
            [*evaluation_assets, *report_assets],
            selection=[AssetKey("leaderboard"), AssetKey("model_reports")],
            resources=_resources(themis, warehouse),
            instance=instance,
        )
        assert reports.success
        texts = _instance_text(instance)
        run_ids = [run.run_id for run in instance.get_runs() if run.tags.get("dagster/partition")]
        assert len(run_ids) == len(TASKS) + 1

    # the faults really happened, and were recorded (redacted) where they belong
    assert all(auth == f"Bearer {KEY}" for _, _, _, auth in server.requests)
    assert server.count("/v1/chat/completions") == 3 + 1, "after a 401 no chat is sent, in either run"
    assert failed == [("crows_pairs_mc", chats - 2)], "the 401 and every chat after it"
    assert "Bearer ***" in unauthorised
    assert list((tmp_path / "reports").rglob("*.html")), "the reports were written"
    assert "overloaded, got Authorization: Bearer ***" in caplog.text

    captured = capfd.readouterr()
    texts |= {"caplog": caplog.text, "stdout": captured.out, "stderr": captured.err}
    leaks = [name for name, text in texts.items() if any(piece in text for piece in PIECES)]
    assert not leaks, f"the key is in {leaks}"
    assert not _warehouse_hits(warehouse)
    assert not _file_hits(tmp_path)
    # the scans see what is there: the redacted 401 in the warehouse and the reports, Dagster's own log lines
    assert "responses.error" in _warehouse_hits(warehouse, ("Bearer ***",))
    assert any(path.endswith(".html") for path in _file_hits(tmp_path, (MODEL,)))
    assert any("STEP_SUCCESS" in text for text in (captured.err, caplog.text))
    assert all(MODEL in texts[f"events {run}"] for run in run_ids)
