"""Faults during a run lose no answer: dropped connections, a dead engine process, a full disk.

Each test breaks one thing on a first run, checks what the warehouse holds afterwards, then
runs the partition again healthy and checks it equals a clean run's, with nothing lost and
nothing duplicated.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pytest
from dagster import DagsterInstance, materialize

from tests.conftest import make_resources, requires_mirror, write_overrides
from tests.engines.openai_fake import FakeServer, running_fake_server
from themis_dagster.assets import evaluation_assets
from themis_dagster.engines.base import Engine
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.evaluation.answering import chunk_order
from themis_dagster.exchange import Request, Response
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.registry.models import DEFAULT_MODEL_ID, ModelSpec
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources import FakeEngineResource
from themis_dagster.resources.served import OpenAIEngineResource
from themis_dagster.warehouse.frames import from_frame
from themis_dagster.warehouse.integrity import check_warehouse
from themis_dagster.warehouse.reads import read_partition

MODEL = DEFAULT_MODEL_ID
TASK = "crows_pairs"
ITEMS = 20  # 40 loglikelihood requests
REQUESTS = 2 * ITEMS
RESPONSE_COLUMNS = (
    "request_id, item_id, request_type, logprob, is_greedy, n_prompt_tokens, n_continuation_tokens, "
    "text, finish_reason, error"
)


# -- helpers ----------------------------------------------------------------------------------


@pytest.fixture
def overrides(tmp_path: Path) -> Path:
    return write_overrides(tmp_path / "overrides.yaml", {TASK: {"limit": ITEMS}})


def run_partition(
    warehouse: Path, overrides: Path, instance: DagsterInstance, engine: object, **settings: object
) -> dict[str, object]:
    """Materialize the partition's evaluation chain; ``raw_responses``' metadata of this run."""
    resources = make_resources(warehouse, overrides, **settings)
    resources["engine"] = engine
    result = materialize(
        evaluation_assets, partition_key=evaluation_key(MODEL, TASK), resources=resources, instance=instance
    )
    assert result.success
    event = instance.get_latest_materialization_event(evaluation_assets[2].key)
    assert event is not None and event.asset_materialization is not None
    assert event.run_id == result.run_id
    return {key: value.value for key, value in event.asset_materialization.metadata.items()}


def responses(warehouse: Path) -> list[tuple[object, ...]]:
    """The partition's responses, without timings (which differ from run to run)."""
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        return conn.execute(
            f"SELECT {RESPONSE_COLUMNS} FROM responses WHERE model = ? AND task = ? ORDER BY request_id",
            [MODEL, TASK],
        ).fetchall()


def cached(warehouse: Path) -> int:
    """Answers in ``request_cache``; each fingerprint is there once."""
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        row = conn.execute("SELECT count(*), count(DISTINCT fingerprint) FROM request_cache").fetchone()
    assert row is not None and row[0] == row[1], "a fingerprint is cached once"
    return int(row[0])


def errors(rows: Sequence[tuple[object, ...]]) -> list[str]:
    return [str(row[-1]) for row in rows if row[-1] is not None]


# -- an OpenAI-compatible server that drops connections half-way ------------------------------


class DroppingServer(FakeServer):
    """The project's fake vLLM-like server; while ``dropping``, chosen completions die mid-body."""

    dropping: bool = False

    def drops(self, path: str, body: dict[str, Any]) -> bool:
        """About a third of the scoring requests, chosen by their tokens (so a retry drops again)."""
        if not self.dropping or path != "/v1/completions":
            return False
        digest = hashlib.sha256(json.dumps(body["prompt"]).encode()).digest()
        return digest[0] % 3 == 0


@pytest.fixture
def dropping() -> Iterator[DroppingServer]:
    with running_fake_server(DroppingServer()) as state:
        yield state


def _scored(server: DroppingServer) -> int:
    return server.count("/v1/completions")


@requires_mirror
@pytest.mark.faults
def test_dropped_connections_are_recorded_and_only_they_are_sent_again(
    tmp_path: Path, overrides: Path, dropping: DroppingServer
) -> None:
    warehouse, clean = tmp_path / "w.duckdb", tmp_path / "clean.duckdb"

    def engine() -> OpenAIEngineResource:
        return OpenAIEngineResource(base_url=dropping.base_url, model="toy", max_retries=1, max_concurrency=4)

    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL])
        dropping.dropping = True
        first = run_partition(warehouse, overrides, instance, engine(), request_chunk_size=8)
        broken = responses(warehouse)
        failed = errors(broken)
        assert dropping.dropped > 0 and 0 < len(failed) < REQUESTS, (dropping.dropped, len(failed))
        assert len(broken) == REQUESTS and first["errors"] == len(failed)
        for error in failed:
            assert "POST" in error and "/v1/completions" in error and "RemoteProtocolError" in error, error
            assert "gave up after 2 attempts" in error
        assert cached(warehouse) == REQUESTS - len(failed), "every answer that arrived is kept"
        assert (first["requests_sent"], first["chunks_committed"]) == (REQUESTS, 5)

        dropping.dropping = False
        sent_before = _scored(dropping)
        second = run_partition(warehouse, overrides, instance, engine(), request_chunk_size=8)
        assert (second["requests_sent"], second["answers_reused"]) == (len(failed), REQUESTS - len(failed))
        assert _scored(dropping) - sent_before == len(failed), "only the failed requests reach the server"
        assert second["errors"] == 0
        run_partition(clean, overrides, instance, engine(), request_chunk_size=8)
    healed = responses(warehouse)
    assert len(healed) == REQUESTS and not errors(healed)
    assert len({row[0] for row in healed}) == REQUESTS, "one row per prompt"
    assert healed == responses(clean)
    assert cached(warehouse) == REQUESTS


# -- an engine process killed mid-batch -------------------------------------------------------

_ECHO = "import sys\nfor line in sys.stdin:\n    print(line.strip(), flush=True)\n"


class ProcessEngine(FakeEngine):
    """Scores like the fake engine, but each answer goes through a child process it owns.

    On call ``kill_at_call`` the child is SIGKILLed half-way through the batch, as an engine
    process killed by the OOM killer would be: talking to it then raises BrokenPipeError, in
    that call and every later one, which is what the run would see from a dead engine. Its answers
    come back with the batch only (an engine that does not hand them on while it works).
    """

    streams_answers = False

    def __init__(self, model_path: str, kill_at_call: int | None) -> None:
        super().__init__(model_path)
        self.kill_at_call = kill_at_call
        self.child = subprocess.Popen(
            [sys.executable, "-c", _ECHO], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def _ask(self, request_id: str, kill_first: bool) -> None:
        assert self.child.stdin is not None and self.child.stdout is not None
        if kill_first:
            self.child.kill()
            self.child.wait()
        self.child.stdin.write(request_id + "\n")
        self.child.stdin.flush()
        if self.child.stdout.readline().strip() != request_id:
            raise EOFError(f"the engine process (pid {self.child.pid}) exited mid-batch")

    def loglikelihood(self, requests: Sequence[Request]) -> list[Response]:
        answers = super().loglikelihood(requests)
        for index, request in enumerate(requests):
            self._ask(request.request_id, len(self.calls) == self.kill_at_call and index == len(requests) // 2)
        return answers

    def shutdown(self) -> None:
        self.child.kill()
        self.child.wait()
        for stream in (self.child.stdin, self.child.stdout):
            if stream is not None:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()


class ProcessEngineResource(FakeEngineResource):
    """The fake engine behind a child process; ``kill_at_call`` 0: never killed."""

    kill_at_call: int = 0

    def output_identity(self) -> dict[str, str]:
        return {"engine": "FakeEngineResource", "reply": self.reply}  # answers as the fake engine's

    def _build(self, spec: ModelSpec, weights: ResolvedWeights) -> Engine:
        return ProcessEngine(weights.path, self.kill_at_call or None)


@requires_mirror
@pytest.mark.faults
def test_an_engine_process_killed_mid_batch_keeps_the_chunks_answered_before(tmp_path: Path, overrides: Path) -> None:
    warehouse, clean = tmp_path / "w.duckdb", tmp_path / "clean.duckdb"
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL])
        dying = ProcessEngineResource(kill_at_call=2)
        first = run_partition(warehouse, overrides, instance, dying, request_chunk_size=8)
        broken = responses(warehouse)
        failed = errors(broken)
        assert len(broken) == REQUESTS and first["errors"] == len(failed) == REQUESTS - 8
        assert cached(warehouse) == 8, "the chunk answered before the engine died is committed"
        assert set(failed) == {"BrokenPipeError: [Errno 32] Broken pipe"}, "the dead chunk and the later ones"
        with duckdb.connect(str(warehouse), read_only=True) as conn:
            prompts = from_frame("prompts", read_partition(conn, "prompts", MODEL, TASK), Request)
        first_chunk = [r.request_id for r in sorted(prompts, key=chunk_order)[:8]]  # as the asset chunks them
        assert sorted(first_chunk) == [row[0] for row in broken if row[-1] is None and row[3] is not None]

        second = run_partition(warehouse, overrides, instance, ProcessEngineResource(), request_chunk_size=8)
        assert (second["requests_sent"], second["answers_reused"], second["errors"]) == (REQUESTS - 8, 8, 0)
        run_partition(clean, overrides, instance, FakeEngineResource(), request_chunk_size=8)
    healed = responses(warehouse)
    assert len(healed) == REQUESTS and not errors(healed)
    assert len({row[0] for row in healed}) == REQUESTS, "one row per prompt"
    assert healed == responses(clean)
    assert cached(warehouse) == REQUESTS


# -- a warehouse on a full disk ---------------------------------------------------------------

DISK_BYTES = 32 * 1024 * 1024
SPARE_BYTES = 64 * 1024  # what the ballast leaves free: less than the bigger run's rows need


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of DISK_BYTES mounted for the test (needs root, or CAP_SYS_ADMIN); unmounted afterwards."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    try:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount_point)],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as error:
        pytest.skip(f"cannot mount a small tmpfs here (no mount command: {error})")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (mount: {mounted.stderr.strip() or mounted.returncode})")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


def fill(disk: Path, spare: int) -> Path:
    """A ballast file leaving ``spare`` bytes free on ``disk``."""
    stats = os.statvfs(disk)
    ballast = disk / "ballast"
    with ballast.open("wb") as out:
        left = stats.f_bavail * stats.f_frsize - spare
        block = b"\0" * (1 << 20)
        while left > 0:
            left -= out.write(block[: min(left, len(block))])
    return ballast


def partition_counts(warehouse: Path) -> dict[str, int]:
    """Rows of the partition in each stage's table."""
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        return {
            table: read_partition(conn, table, MODEL, TASK).height
            for table in ("task_items", "prompts", "responses", "judgments")
        }


@requires_mirror
@pytest.mark.faults
def test_a_full_disk_fails_the_run_and_keeps_the_partition(tmp_path: Path, small_disk: Path) -> None:
    """A commit that cannot write the WAL fails the run naming the disk; the next run, with space, completes."""
    more = 25 * ITEMS
    small = write_overrides(tmp_path / "small.yaml", {TASK: {"limit": ITEMS}})
    bigger = write_overrides(tmp_path / "bigger.yaml", {TASK: {"limit": more}})
    warehouse, clean = small_disk / "w.duckdb", tmp_path / "clean.duckdb"
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL])
        run_partition(warehouse, small, instance, FakeEngineResource(), request_chunk_size=8)
        before, counts = responses(warehouse), partition_counts(warehouse)
        assert len(before) == REQUESTS and counts == {"task_items": 20, "prompts": 40, "responses": 40, "judgments": 20}

        ballast = fill(small_disk, SPARE_BYTES)
        resources = make_resources(warehouse, bigger, request_chunk_size=8)
        result = materialize(
            evaluation_assets,
            partition_key=evaluation_key(MODEL, TASK),
            resources=resources,
            instance=instance,
            raise_on_error=False,
        )
        assert not result.success
        failure = result.get_step_failure_events()[0]
        assert failure.step_key == "task_dataset"
        error = failure.step_failure_data.error
        assert error is not None and error.cause is not None
        assert "No space left on device" in error.cause.message and "w.duckdb.wal" in error.cause.message, (
            error.cause.message  # the disk-full error itself, not a failed ROLLBACK's
        )

        check_warehouse(warehouse)  # still opens, its metadata and blocks intact
        assert responses(warehouse) == before and partition_counts(warehouse) == counts
        assert cached(warehouse) == REQUESTS

        ballast.unlink()
        healed_run = run_partition(warehouse, bigger, instance, FakeEngineResource(), request_chunk_size=8)
        assert (healed_run["answers_reused"], healed_run["requests_sent"]) == (REQUESTS, 2 * more - REQUESTS)
        run_partition(clean, bigger, instance, FakeEngineResource(), request_chunk_size=8)
    healed = responses(warehouse)
    assert len(healed) == 2 * more and not errors(healed)
    assert len({row[0] for row in healed}) == 2 * more, "one row per prompt"
    assert healed == responses(clean)
    assert set(before) <= set(healed), "the first run's answers are the same in the healed partition"
    assert cached(warehouse) == 2 * more
    assert partition_counts(warehouse) == {
        "task_items": more,
        "prompts": 2 * more,
        "responses": 2 * more,
        "judgments": more,
    }


class FillingEngine(FakeEngine):
    """The fake engine, on a host where something else fills the disk during call ``fill_at_call``; its answers
    come back with the batch only."""

    streams_answers = False

    def __init__(self, model_path: str, disk: Path, fill_at_call: int) -> None:
        super().__init__(model_path)
        self.disk, self.fill_at_call = disk, fill_at_call

    def loglikelihood(self, requests: Sequence[Request]) -> list[Response]:
        answers = super().loglikelihood(requests)
        if len(self.calls) == self.fill_at_call:
            fill(self.disk, 0)
        return answers


class FillingEngineResource(FakeEngineResource):
    """``FillingEngine``; answers as the fake engine does (same request fingerprints)."""

    disk: str
    fill_at_call: int

    def output_identity(self) -> dict[str, str]:
        return {"engine": "FakeEngineResource", "reply": self.reply}

    def _build(self, spec: ModelSpec, weights: ResolvedWeights) -> Engine:
        return FillingEngine(weights.path, Path(self.disk), self.fill_at_call)


@requires_mirror
@pytest.mark.faults
def test_a_disk_that_fills_during_inference_keeps_the_chunks_committed_before(tmp_path: Path, small_disk: Path) -> None:
    """The disk fills while the engine works: the chunks committed before stay, and so do the old responses."""
    more = 25 * ITEMS
    small = write_overrides(tmp_path / "small.yaml", {TASK: {"limit": ITEMS}})
    bigger = write_overrides(tmp_path / "bigger.yaml", {TASK: {"limit": more}})
    warehouse, clean = small_disk / "w.duckdb", tmp_path / "clean.duckdb"
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL])
        run_partition(warehouse, small, instance, FakeEngineResource(), request_chunk_size=8)
        before = responses(warehouse)
        resources = make_resources(warehouse, bigger, request_chunk_size=8)
        resources["engine"] = FillingEngineResource(disk=str(small_disk), fill_at_call=6)
        result = materialize(
            evaluation_assets,
            partition_key=evaluation_key(MODEL, TASK),
            resources=resources,
            instance=instance,
            raise_on_error=False,
        )
        assert not result.success
        failure = result.get_step_failure_events()[0]
        error = failure.step_failure_data.error
        assert failure.step_key == "raw_responses" and error is not None and error.cause is not None
        assert "No space left on device" in error.cause.message, error.cause.message

        check_warehouse(warehouse)
        fresh = more * 2 - REQUESTS  # the 40 of the first run are reused
        assert fresh > 5 * 8
        # the five chunks answered before the disk filled are kept; the sixth, answered while it filled, is kept
        # too when its commit still fits in the WAL's last block (the connection is kept across fast chunks)
        kept = cached(warehouse) - REQUESTS
        assert kept in (5 * 8, 6 * 8), "the five chunks answered before the disk filled are kept"
        assert responses(warehouse) == before, "the partition's responses are the previous run's"
        assert partition_counts(warehouse) == {
            "task_items": more,
            "prompts": 2 * more,
            "responses": 40,
            "judgments": 20,
        }

        (small_disk / "ballast").unlink()
        healed_run = run_partition(warehouse, bigger, instance, FakeEngineResource(), request_chunk_size=8)
        assert (healed_run["answers_reused"], healed_run["requests_sent"]) == (REQUESTS + kept, fresh - kept)
        run_partition(clean, bigger, instance, FakeEngineResource(), request_chunk_size=8)
    healed = responses(warehouse)
    assert len(healed) == 2 * more and not errors(healed)
    assert len({row[0] for row in healed}) == 2 * more, "one row per prompt"
    assert healed == responses(clean)
    assert cached(warehouse) == 2 * more
