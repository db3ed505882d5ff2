"""Answers are committed a chunk at a time: a killed run resumes, and no request is computed twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInstance, materialize

from tests.conftest import SETTINGS, make_resources, requires_mirror, write_overrides
from themis_dagster.assets import evaluation_assets
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.engines.fingerprint import cacheable, model_fingerprint, request_fingerprint
from themis_dagster.exchange import Request, Response
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.registry.models import DEFAULT_MODEL_ID, load_models
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources import FakeEngineResource

MODEL = DEFAULT_MODEL_ID
TASK = "crows_pairs"
ITEMS = 20  # 40 loglikelihood requests


def _materialize(warehouse: Path, overrides: Path, instance: DagsterInstance, **settings: object) -> dict[str, object]:
    resources = make_resources(warehouse, overrides, **settings)
    result = materialize(
        evaluation_assets, partition_key=evaluation_key(MODEL, TASK), resources=resources, instance=instance
    )
    assert result.success
    event = instance.get_latest_materialization_event(evaluation_assets[2].key)
    assert event is not None and event.asset_materialization is not None
    return {key: value.value for key, value in event.asset_materialization.metadata.items()}


def _responses(warehouse: Path) -> list[tuple[object, ...]]:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        return conn.execute(
            "SELECT request_id, item_id, request_type, logprob, is_greedy, n_prompt_tokens, finish_reason, error "
            "FROM responses WHERE model = ? AND task = ? ORDER BY request_id",
            [MODEL, TASK],
        ).fetchall()


def _cached(warehouse: Path) -> int:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        row = conn.execute("SELECT count(*), count(DISTINCT fingerprint) FROM request_cache").fetchone()
    assert row is not None and row[0] == row[1], "a fingerprint is cached once"
    return int(row[0])


def _committed_so_far(warehouse: Path) -> int:
    """Answers the running writer has committed, read between its chunks (0 while it holds the file)."""
    try:
        with duckdb.connect(str(warehouse), read_only=True) as conn:
            row = conn.execute("SELECT count(*) FROM request_cache").fetchone()
    except duckdb.Error:  # the writer holds the file, or has not created the table yet
        return 0
    return int(row[0]) if row else 0


@pytest.fixture
def overrides(tmp_path: Path) -> Path:
    return write_overrides(tmp_path / "overrides.yaml", {TASK: {"limit": ITEMS}})


@requires_mirror
def test_a_rerun_reuses_every_answer_and_equals_the_first(tmp_path: Path, overrides: Path) -> None:
    warehouse = tmp_path / "w.duckdb"
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL])
        first = _materialize(warehouse, overrides, instance, request_chunk_size=7)
        rows = _responses(warehouse)
        second = _materialize(warehouse, overrides, instance, request_chunk_size=7)
    assert (first["requests_sent"], first["answers_reused"], first["chunks_committed"]) == (40, 0, 6)
    assert (second["requests_sent"], second["answers_reused"], second["chunks_committed"]) == (0, 40, 0)
    assert second["engine"] == "FakeEngineResource (not loaded: every answer reused)"
    assert _responses(warehouse) == rows and len(rows) == 40
    assert _cached(warehouse) == 40


@requires_mirror
def test_the_cache_switch_sends_everything_and_keeps_nothing(tmp_path: Path, overrides: Path) -> None:
    warehouse = tmp_path / "w.duckdb"
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL])
        _materialize(warehouse, overrides, instance, request_cache=False)
        again = _materialize(warehouse, overrides, instance, request_cache=False)
    assert (again["requests_sent"], again["answers_reused"], again["request_cache"]) == (40, 0, "off")
    assert _cached(warehouse) == 0


def test_fingerprints_change_with_what_changes_an_answer() -> None:
    spec = load_models(SETTINGS.models_file)[MODEL]
    weights = ResolvedWeights("/a", "r", "w" * 64)
    base = model_fingerprint(spec, weights, {"engine": "VLLMResource"})
    moved = ResolvedWeights("/elsewhere", "r", "w" * 64)
    assert model_fingerprint(spec, moved, {"engine": "VLLMResource"}) == base  # the path is not the model
    faster = spec.model_copy(update={"engine": spec.engine.model_copy(update={"kv_cache_gib": 9.0, "block_size": 64})})
    assert model_fingerprint(faster, weights, {"engine": "VLLMResource"}) == base  # speed-only settings
    renamed = spec.model_copy(update={"id": "another-id"})
    assert model_fingerprint(renamed, weights, {"engine": "VLLMResource"}) == base
    for changed in (
        model_fingerprint(spec.model_copy(update={"dtype": "float32"}), weights, {"engine": "VLLMResource"}),
        model_fingerprint(spec, ResolvedWeights("/a", "r", "v" * 64), {"engine": "VLLMResource"}),
        model_fingerprint(spec, ResolvedWeights("/a", "r", "w" * 64, "/l", "l" * 64), {"engine": "VLLMResource"}),
        model_fingerprint(spec, weights, {"engine": "FakeEngineResource", "reply": "1"}),
    ):
        assert changed != base
    request = Request("r1", "i1", "chat", messages=[{"role": "user", "content": "hi"}], gen_params={"seed": 1})
    other_id = Request("r2", "i2", "chat", messages=[{"role": "user", "content": "hi"}], gen_params={"seed": 1})
    reseeded = Request("r1", "i1", "chat", messages=[{"role": "user", "content": "hi"}], gen_params={"seed": 2})
    assert request_fingerprint(base, request) == request_fingerprint(base, other_id)  # who asks does not matter
    assert request_fingerprint(base, request) != request_fingerprint(base, reseeded)
    unseeded = Request("r", "i", "generate", prompt="x", gen_params={"seed": None, "temperature": 1.0})
    assert cacheable(request) and not cacheable(unseeded)
    assert cacheable(Request("r", "i", "generate", prompt="x", gen_params={"seed": None, "temperature": 0.0}))


def test_failed_answers_are_not_cached_and_are_sent_again(tmp_path: Path) -> None:
    from themis_dagster.evaluation.answering import answer_requests
    from themis_dagster.resources import WarehouseResource

    warehouse = WarehouseResource(database=str(tmp_path / "w.duckdb"))
    requests = [Request(f"r{i}", f"i{i}", "loglikelihood", context="a", continuation=f"b {i}") for i in range(5)]
    flaky = FakeEngine(fail=lambda text: "HTTP 503" if text.endswith("3") else None)
    answers, stats = answer_requests(
        requests, engine=lambda: flaky, warehouse=warehouse, model_id=MODEL, model_fingerprint="m",
        chunk_size=2, retries=0,
    )  # fmt: skip
    assert [a.error for a in answers] == [None, None, None, "HTTP 503", None]
    assert (stats.sent, stats.reused, stats.chunks, stats.cached_now) == (5, 0, 3, 4)
    healthy = FakeEngine()
    again, stats = answer_requests(
        requests, engine=lambda: healthy, warehouse=warehouse, model_id=MODEL, model_fingerprint="m",
        chunk_size=2, retries=0,
    )  # fmt: skip
    assert (stats.sent, stats.reused) == (1, 4) and healthy.calls == ["loglikelihood:1"]
    assert all(a.error is None for a in again)
    assert [a.logprob for a in again[:3]] == [a.logprob for a in answers[:3]]


_KILLED_RUN = """
import sys
from pathlib import Path
from dagster import DagsterInstance, materialize
from tests.conftest import make_resources
from themis_dagster.assets import evaluation_assets
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.resources import FakeEngineResource
warehouse, overrides, model, task = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
resources = make_resources(warehouse, overrides, request_chunk_size=4)
resources["engine"] = FakeEngineResource(latency_s=0.4)
with DagsterInstance.ephemeral() as instance:
    instance.add_dynamic_partitions(MODELS_PARTITION, [model])
    print("started", flush=True)
    materialize(evaluation_assets, partition_key=evaluation_key(model, task), resources=resources, instance=instance)
"""


@requires_mirror
@pytest.mark.faults
def test_a_run_killed_during_inference_resumes_with_nothing_lost_or_duplicated(tmp_path: Path, overrides: Path) -> None:
    """SIGKILL mid-inference keeps every committed chunk; the re-run sends only the rest and equals a clean run."""
    warehouse = tmp_path / "killed.duckdb"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    run = subprocess.Popen(
        [sys.executable, "-c", _KILLED_RUN, str(warehouse), str(overrides), MODEL, TASK],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert run.stdout is not None and run.stdout.readline().strip() == "started"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not warehouse.exists():
        time.sleep(0.1)
    while time.monotonic() < deadline and _committed_so_far(warehouse) < 8:  # two chunks of ten, however loaded
        time.sleep(0.1)
    run.send_signal(signal.SIGKILL)
    run.wait()
    kept = _cached(warehouse)
    assert 0 < kept < 40, f"the kill should land mid-inference, {kept} of 40 answers were committed"
    assert not _responses(warehouse), "the killed run never wrote its partition's responses"

    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL])
        resumed = _materialize(warehouse, overrides, instance, request_chunk_size=4)
        clean_warehouse = tmp_path / "clean.duckdb"
        _materialize(clean_warehouse, overrides, instance, request_chunk_size=4)
    assert (resumed["answers_reused"], resumed["requests_sent"]) == (kept, 40 - kept)
    assert _responses(warehouse) == _responses(clean_warehouse)
    assert len(_responses(warehouse)) == 40
    assert _cached(warehouse) == 40


class _DyingEngine(FakeEngine):
    """Answers one request at a time and dies (a process killed) after ``lives`` answers."""

    def __init__(self, lives: int) -> None:
        super().__init__(per_request_s=0.01, step_size=1)
        self.lives = lives

    def _score(self, request: Request) -> Response:
        if self.lives == 0:
            raise KeyboardInterrupt("killed")  # a BaseException: nothing in the answering path catches it
        self.lives -= 1
        return super()._score(request)


def test_answers_are_committed_every_interval_inside_one_chunk(tmp_path: Path) -> None:
    """One chunk larger than the partition (the default 4096): a death mid-chunk keeps the answers of all but
    the last interval, and the re-run sends only the rest."""
    from themis_dagster.evaluation.answering import answer_requests
    from themis_dagster.resources import WarehouseResource

    warehouse = WarehouseResource(database=str(tmp_path / "w.duckdb"))
    requests = [Request(f"r{i}", f"i{i}", "loglikelihood", context="a", continuation=f"b {i}") for i in range(60)]
    dying = _DyingEngine(lives=40)
    with pytest.raises(KeyboardInterrupt):
        answer_requests(
            requests, engine=lambda: dying, warehouse=warehouse, model_id=MODEL, model_fingerprint="m",
            chunk_size=4096, retries=0, commit_interval_s=0.05,
        )  # fmt: skip
    kept = _cached(tmp_path / "w.duckdb")
    assert 30 <= kept <= 40, f"answers of the last interval at most are lost: {kept} of 40 kept"
    healthy = FakeEngine()
    answers, stats = answer_requests(
        requests, engine=lambda: healthy, warehouse=warehouse, model_id=MODEL, model_fingerprint="m",
        chunk_size=4096, retries=0, commit_interval_s=0.05,
    )  # fmt: skip
    assert (stats.reused, stats.sent) == (kept, 60 - kept)
    assert healthy.calls == [f"loglikelihood:{60 - kept}"]
    clean, _ = answer_requests(
        requests, engine=FakeEngine, warehouse=WarehouseResource(database=str(tmp_path / "clean.duckdb")),
        model_id=MODEL, model_fingerprint="m", chunk_size=4096, retries=0,
    )  # fmt: skip
    assert [(a.request_id, a.logprob) for a in answers] == [(a.request_id, a.logprob) for a in clean]
    assert _cached(tmp_path / "w.duckdb") == 60


def test_commits_made_while_the_engine_works_are_counted_and_timed(tmp_path: Path) -> None:
    """What the interval costs is measured where it is paid: the commits that held the engine's step loop."""
    from themis_dagster.evaluation.answering import answer_requests, answering_metadata
    from themis_dagster.resources import WarehouseResource

    requests = [Request(f"r{i}", f"i{i}", "loglikelihood", context="a", continuation=f"b {i}") for i in range(30)]
    slow = FakeEngine(per_request_s=0.01, step_size=1)
    _, stats = answer_requests(
        requests, engine=lambda: slow, warehouse=WarehouseResource(database=str(tmp_path / "w.duckdb")),
        model_id=MODEL, model_fingerprint="m", chunk_size=4096, retries=0, commit_interval_s=0.05,
    )  # fmt: skip
    assert stats.interval_commits >= 2 and stats.interval_commit_seconds > 0
    metadata = answering_metadata(stats, request_cache=True)
    assert metadata["interval_commits"] == stats.interval_commits
    _, once = answer_requests(
        requests, engine=FakeEngine, warehouse=WarehouseResource(database=str(tmp_path / "once.duckdb")),
        model_id=MODEL, model_fingerprint="m", chunk_size=4096, retries=0,
    )  # fmt: skip
    assert (once.interval_commits, once.interval_commit_seconds) == (0, 0.0)


def test_a_commit_interval_of_zero_fails_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from themis_dagster.errors import ConfigError
    from themis_dagster.settings import Settings

    for value in ("0", "-5"):
        monkeypatch.setenv("THEMIS_COMMIT_INTERVAL_S", value)
        with pytest.raises(ConfigError, match="THEMIS_COMMIT_INTERVAL_S"):
            Settings.from_env()


def test_fake_engine_latency_is_per_call() -> None:
    engine = FakeEngineResource(latency_s=0.05)
    assert engine.output_identity() == {"engine": "FakeEngineResource", "reply": "1"}


@requires_mirror
def test_cache_command_shows_and_clears(
    tmp_path: Path, overrides: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from themis_dagster.cli import main

    warehouse = tmp_path / "w.duckdb"
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL])
        _materialize(warehouse, overrides, instance)
    monkeypatch.setenv("THEMIS_WAREHOUSE", str(warehouse))
    assert main(["cache", "stats"]) == 0
    assert f"{MODEL}" in capsys.readouterr().out
    assert main(["cache", "clear", "--model", "other-model"]) == 0
    assert "cleared 0 cached answers of other-model" in capsys.readouterr().out
    assert main(["cache", "clear", "--model", MODEL]) == 0
    assert "cleared 40 cached answers" in capsys.readouterr().out
    assert _cached(warehouse) == 0
    assert main(["cache", "clear", "--model", "Bad|Id"]) == 2
    assert "Bad|Id" in capsys.readouterr().err
