"""New checkpoints: the pure scan decisions, the discovered-models file, and the sensor on an instance."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from dagster import (
    DagsterInstance,
    Definitions,
    MultiPartitionKey,
    SensorResult,
    build_sensor_context,
    instance_for_test,
)
from safetensors.numpy import save_file

from tests.conftest import SETTINGS
from themis_dagster.assets import evaluation_assets
from themis_dagster.assets.jobs import evaluate_job
from themis_dagster.errors import ConfigError
from themis_dagster.partitions import MODELS_PARTITION
from themis_dagster.registry.discovered import (
    add_discovered,
    allocate_model_id,
    checkpoint_spec,
    load_discovered,
    write_discovered,
)
from themis_dagster.registry.model_id import validate_model_id
from themis_dagster.registry.models import LocalSource, load_registry
from themis_dagster.registry.weights import weights_fingerprint
from themis_dagster.resources import FakeEngineResource, ThemisConfig, WarehouseResource
from themis_dagster.sensors import CheckpointWatchConfig, checkpoint_sensor
from themis_dagster.sensors.checkpoint_folders import inspect_checkpoint
from themis_dagster.sensors.checkpoints import (
    checkpoint_run_key,
    dump_cursor,
    parse_cursor,
    run_requests_for,
    scan_checkpoints,
)
from themis_dagster.settings import Settings
from themis_dagster.tasks.loader import task_names, tasks_with_local_data

NOW = 2_000_000_000.0
OLD = NOW - 3600
SETTLE = 60.0


def make_checkpoint(
    root: Path, name: str, *, seed: int = 0, mtime: float | None = OLD, config: str | None = None, chat: bool = True
) -> Path:
    """A tiny Hugging Face-format folder: config.json, one safetensors file, a tokenizer config."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(config if config is not None else json.dumps({"max_position_embeddings": 512}))
    save_file({"w": np.full((4, 4), seed, dtype=np.float32)}, str(folder / "model.safetensors"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ x }}"} if chat else {}))
    if mtime is not None:
        touch(folder, mtime)
    return folder


def touch(folder: Path, mtime: float) -> None:
    for child in folder.iterdir():
        os.utime(child, (mtime, mtime))


def scan(root: Path, cursor: dict | None = None, *, now: float = NOW, declared=(), discovered=None, max_new=None):
    return scan_checkpoints(
        root,
        cursor or {},
        now=now,
        settle_seconds=SETTLE,
        declared_ids=declared,
        discovered=discovered or {},
        max_new=max_new,
    )


# --- pure decisions ---------------------------------------------------------------------


def test_new_checkpoint_is_registered_once(tmp_path: Path) -> None:
    folder = make_checkpoint(tmp_path, "my-model-step-500")
    first = scan(tmp_path)
    [decision] = first.decisions
    assert decision.action == "new"
    assert decision.model_id == "my-model-step-500"
    assert decision.fingerprint == weights_fingerprint(folder)
    assert decision.spec is not None and decision.spec.source == LocalSource(path=folder.resolve())
    assert first.cursor[str(folder.resolve())]["status"] == "registered"

    again = scan(tmp_path, first.cursor)  # the same checkpoint again does nothing
    assert [d.action for d in again.decisions] == ["unchanged"]
    assert again.cursor == first.cursor
    assert run_requests_for(again.decisions, ["crows_pairs"]) == []


def test_half_written_folders_are_pending_and_not_recorded(tmp_path: Path) -> None:
    only_config = tmp_path / "a-config-only"
    only_config.mkdir()
    (only_config / "config.json").write_text("{}")
    only_weights = make_checkpoint(tmp_path, "b-weights-only")
    (only_weights / "config.json").unlink()
    empty_weights = tmp_path / "c-empty-weights"
    empty_weights.mkdir()
    (empty_weights / "config.json").write_text("{}")
    (empty_weights / "model.safetensors").write_bytes(b"")
    for folder in (only_config, empty_weights):
        touch(folder, OLD)
    result = scan(tmp_path)
    assert [(d.action, d.reason) for d in result.decisions] == [
        ("pending", "no weights file yet"),
        ("pending", "no config.json yet"),
        ("pending", "no weights file yet"),
    ]
    assert result.cursor == {}


def test_settle_time(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, "fresh", mtime=NOW - 10)
    [decision] = scan(tmp_path).decisions
    assert decision.action == "pending" and "settle time" in decision.reason
    assert [d.action for d in scan(tmp_path, now=NOW + SETTLE).decisions] == ["new"]


def test_modified_again_while_settling_keeps_the_old_record(tmp_path: Path) -> None:
    folder = make_checkpoint(tmp_path, "ckpt")
    first = scan(tmp_path)
    save_file({"w": np.ones((4, 4), dtype=np.float32)}, str(folder / "model.safetensors"))
    touch(folder, NOW - 1)
    being_written = scan(tmp_path, first.cursor)
    assert [d.action for d in being_written.decisions] == ["pending"]
    assert being_written.cursor == first.cursor
    later = scan(tmp_path, being_written.cursor, now=NOW + SETTLE)
    [decision] = later.decisions
    assert decision.action == "changed" and decision.model_id == "ckpt"
    assert decision.fingerprint != first.decisions[0].fingerprint
    assert decision.spec is not None and decision.spec.id == "ckpt"  # re-added only if the file lost it


def test_broken_checkpoints_are_reported_once_and_retried_when_changed(tmp_path: Path) -> None:
    bad_config = make_checkpoint(tmp_path, "a-bad-config", config="{not json")
    bad_header = make_checkpoint(tmp_path, "b-bad-header")
    (bad_header / "model.safetensors").write_bytes(b"\xff" * 8 + b"garbage")
    truncated = make_checkpoint(tmp_path, "c-truncated")
    data = (truncated / "model.safetensors").read_bytes()
    (truncated / "model.safetensors").write_bytes(data[:-7])
    shards = make_checkpoint(tmp_path, "d-missing-shard")
    (shards / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": "model-2.safetensors"}}))
    not_object = make_checkpoint(tmp_path, "e-config-list", config="[1, 2]")
    for folder in (bad_header, truncated, shards, not_object):
        touch(folder, OLD)

    first = scan(tmp_path)
    reasons = {Path(d.path).name: (d.action, d.reason) for d in first.decisions}
    assert all(action == "broken" for action, _ in reasons.values())
    assert "config.json is not valid JSON" in reasons["a-bad-config"][1]
    assert "model.safetensors: invalid safetensors file" in reasons["b-bad-header"][1]
    assert "model.safetensors: invalid safetensors file" in reasons["c-truncated"][1]
    assert "missing shards: model-2.safetensors" in reasons["d-missing-shard"][1]
    assert reasons["e-config-list"][1] == "config.json is not a JSON object"
    record = first.cursor[str(bad_config.resolve())]
    assert record["status"] == "broken" and "not valid JSON" in record["reason"]

    again = scan(tmp_path, first.cursor, now=NOW + 999)  # not retried while nothing changes
    assert {d.action for d in again.decisions} == {"unchanged"}

    (bad_config / "config.json").write_text("{}")  # fixed: the stamp changes, so it is looked at again
    touch(bad_config, OLD + 1)
    fixed = scan(tmp_path, again.cursor)
    assert {Path(d.path).name: d.action for d in fixed.decisions}["a-bad-config"] == "new"


def test_id_clashes_get_a_suffix(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, "Declared Model")
    make_checkpoint(tmp_path, "a b")
    make_checkpoint(tmp_path, "a-b")
    result = scan(tmp_path, declared=["declared-model"])
    ids = {Path(d.path).name: d.model_id for d in result.decisions}
    assert ids == {"Declared Model": "declared-model-2", "a b": "a-b", "a-b": "a-b-2"}


@pytest.mark.parametrize(
    ("name", "expected"),
    [("Checkpoint|500 ü", "checkpoint-500"), ("___", "model"), ("step.1000", "step.1000"), ("X" * 80, "x" * 64)],
)
def test_unsafe_folder_names_become_valid_ids(tmp_path: Path, name: str, expected: str) -> None:
    make_checkpoint(tmp_path, name)
    [decision] = scan(tmp_path).decisions
    assert decision.model_id == expected
    assert validate_model_id(decision.model_id) == expected


def test_allocate_model_id_stays_within_64_characters() -> None:
    long_id = "x" * 64
    assert allocate_model_id("X" * 70, [long_id]) == "x" * 62 + "-2"
    assert allocate_model_id("m", ["m", "m-2"]) == "m-3"


def test_at_most_max_new_folders_are_hashed_per_tick(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        make_checkpoint(tmp_path, name)
    first = scan(tmp_path, max_new=2)
    assert [(d.action, d.reason[:8]) for d in first.decisions] == [("new", ""), ("new", ""), ("pending", "deferred")]
    second = scan(tmp_path, first.cursor, max_new=2)  # already-seen folders cost nothing
    assert [d.action for d in second.decisions] == ["unchanged", "unchanged", "new"]


def test_hidden_temporary_and_plain_files_are_ignored(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, ".hidden")
    make_checkpoint(tmp_path, "copy.partial")
    make_checkpoint(tmp_path, "copy.tmp")
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    assert scan(tmp_path).decisions == []
    assert scan(tmp_path / "absent").decisions == []


def test_a_lost_cursor_keeps_ids_from_the_discovered_file(tmp_path: Path) -> None:
    root = tmp_path / "ckpts"
    folder = make_checkpoint(root, "ckpt")
    spec = checkpoint_spec("ckpt-custom", folder, {}, "f" * 64)
    [decision] = scan(root, discovered={spec.id: spec}).decisions
    assert decision.model_id == "ckpt-custom"
    assert decision.spec is None  # nothing new to write; the run keys dedupe in Dagster
    [request] = run_requests_for([decision], ["crows_pairs"])
    assert request.run_key == checkpoint_run_key("ckpt-custom", "crows_pairs", weights_fingerprint(folder))


def test_vanished_folders_leave_the_cursor(tmp_path: Path) -> None:
    folder = make_checkpoint(tmp_path, "gone")
    first = scan(tmp_path)
    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()
    assert scan(tmp_path, first.cursor).cursor == {}


def test_fingerprint_cache_file_does_not_count_as_a_modification(tmp_path: Path) -> None:
    folder = make_checkpoint(tmp_path, "ckpt")
    first = inspect_checkpoint(folder, NOW, SETTLE)
    weights_fingerprint(folder)  # writes .themis-weights-sha256.json into the folder now
    assert inspect_checkpoint(folder, NOW, SETTLE) == first


def test_cursor_round_trip_and_garbage() -> None:
    state = {"/x": {"status": "broken", "reason": "r", "stamp": "s"}}
    assert parse_cursor(dump_cursor(state)) == state
    for garbage in (None, "", "not json", "[]", '{"checkpoints": 3}', '{"other": {}}'):
        assert parse_cursor(garbage) == {}


# --- the discovered-models file ---------------------------------------------------------


def test_discovered_file_keeps_entries_and_loads_with_the_registry(tmp_path: Path) -> None:
    declared = tmp_path / "models.yaml"
    declared.write_text(yaml.safe_dump({"models": [{"id": "base", "source": {"kind": "packaged"}}]}))
    discovered = tmp_path / "discovered.yaml"
    chat = make_checkpoint(tmp_path / "c", "chat-ckpt")
    base = make_checkpoint(tmp_path / "c", "base-ckpt", chat=False, config=json.dumps({"max_position_embeddings": 8}))
    add_discovered(discovered, [checkpoint_spec("chat-ckpt", chat, {"max_position_embeddings": 512}, "a" * 64)])
    merged = add_discovered(discovered, [checkpoint_spec("base-ckpt", base, {"max_position_embeddings": 8}, "b" * 64)])
    assert list(merged) == ["chat-ckpt", "base-ckpt"]
    assert list(load_discovered(discovered)) == ["chat-ckpt", "base-ckpt"]
    registry = load_registry(declared, discovered)
    assert set(registry) == {"base", "chat-ckpt", "base-ckpt"}
    assert registry["chat-ckpt"].chat_template == "auto" and registry["chat-ckpt"].max_model_len == 512
    assert registry["base-ckpt"].chat_template is None  # no chat template: a base model
    assert registry["base-ckpt"].max_model_len == 2048  # 8 is below the minimum context; the default stays
    assert not list(tmp_path.glob(".discovered.yaml.*"))  # no temp file left behind
    text = discovered.read_text()
    assert text.startswith("# Models registered automatically") and "kind: local" in text

    again = add_discovered(discovered, [checkpoint_spec("chat-ckpt", chat, {}, "a" * 64)])  # same folder: no-op
    assert list(again) == ["chat-ckpt", "base-ckpt"]
    with pytest.raises(ConfigError, match="already registered"):
        add_discovered(discovered, [checkpoint_spec("chat-ckpt", base, {}, "c" * 64)])


def test_write_discovered_never_writes_an_unreadable_file(tmp_path: Path) -> None:
    target = tmp_path / "discovered.yaml"
    spec = checkpoint_spec("ok", make_checkpoint(tmp_path, "ok"), {}, "a" * 64)
    with pytest.raises(ConfigError, match="duplicate model id"):
        write_discovered(target, [spec, spec])
    assert not target.exists()


# --- the Dagster sensor -----------------------------------------------------------------


def _setup(tmp_path: Path) -> tuple[ThemisConfig, Path]:
    declared_folder = make_checkpoint(tmp_path / "declared", "weights")
    models_file = tmp_path / "models.yaml"
    models_file.write_text(
        yaml.safe_dump({"models": [{"id": "my-model", "source": {"kind": "local", "path": str(declared_folder)}}]})
    )
    settings = Settings()
    themis = ThemisConfig(
        models_file=str(models_file),
        discovered_models_file=str(tmp_path / "discovered.yaml"),
        datasets_dir=str(settings.datasets_dir),
        cache_dir=str(tmp_path / "cache"),
        models_dir=str(tmp_path / "models"),
        allow_downloads=False,
    )
    return themis, tmp_path / "checkpoints"


def _run_sensor(instance: DagsterInstance, themis: ThemisConfig, watch: CheckpointWatchConfig, cursor: str | None):
    context = build_sensor_context(
        instance=instance, cursor=cursor, resources={"themis": themis, "checkpoint_watch": watch}
    )
    result = checkpoint_sensor(context)
    assert isinstance(result, SensorResult)
    return result


def test_sensor_registers_and_evaluates_new_checkpoints(tmp_path: Path) -> None:
    themis, root = _setup(tmp_path)
    recent = time.time()
    ready = make_checkpoint(root, "My Model", mtime=recent - 600)  # clashes with the declared "my-model"
    make_checkpoint(root, "being-written", mtime=recent)
    make_checkpoint(root, "broken", config="{oops", mtime=recent - 600)
    watch = CheckpointWatchConfig(checkpoints_dir=str(root), settle_seconds=60, tasks=["crows_pairs", "iat"])
    with DagsterInstance.ephemeral() as instance:
        result = _run_sensor(instance, themis, watch, None)
        fingerprint = weights_fingerprint(ready)
        assert [(r.run_key, r.partition_key) for r in result.run_requests] == [
            (f"my-model-2|{task}|{fingerprint}", str(MultiPartitionKey({"model": "my-model-2", "task": task})))
            for task in ("crows_pairs", "iat")
        ]
        assert all(r.tags["themis/trigger"] == "checkpoint_new" for r in result.run_requests)
        [add] = result.dynamic_partitions_requests
        assert add.partitions_def_name == MODELS_PARTITION
        assert list(add.partition_keys) == ["my-model", "my-model-2"]  # the declared model is registered too
        cursor = json.loads(result.cursor)["checkpoints"]
        assert {Path(p).name: r["status"] for p, r in cursor.items()} == {"My Model": "registered", "broken": "broken"}
        assert list(load_discovered(Path(themis.discovered_models_file))) == ["my-model-2"]
        assert set(themis.models()) == {"my-model", "my-model-2"}

        instance.add_dynamic_partitions(MODELS_PARTITION, list(add.partition_keys))  # what the daemon does
        second = _run_sensor(instance, themis, watch, result.cursor)
        assert second.run_requests == [] and second.dynamic_partitions_requests == []
        assert second.skip_reason is not None and "1 pending" in second.skip_reason.skip_message
        assert second.cursor == result.cursor


def test_sensor_runs_every_task_by_default_and_resolves_against_the_definitions(tmp_path: Path) -> None:
    themis, root = _setup(tmp_path)
    make_checkpoint(root, "step-100", mtime=time.time() - 600)
    watch = CheckpointWatchConfig(checkpoints_dir=str(root), settle_seconds=60)
    resources = {
        "themis": themis,
        "checkpoint_watch": watch,
        "warehouse": WarehouseResource(database=str(tmp_path / "w.duckdb")),
        "engine": FakeEngineResource(),
    }
    defs = Definitions(assets=evaluation_assets, jobs=[evaluate_job], sensors=[checkpoint_sensor], resources=resources)
    with instance_for_test() as instance:  # a persistent instance has a ref, as in the daemon
        sensor_resources = {"themis": themis, "checkpoint_watch": watch}
        with build_sensor_context(
            instance=instance, instance_ref=instance.get_ref(), definitions=defs, resources=sensor_resources
        ) as context:
            data = checkpoint_sensor.evaluate_tick(context)  # validates partition keys as the daemon would
        # every task whose data is on this host (gb_gest_creative needs gest.csv, absent from the mirror)
        local, _ = tasks_with_local_data(task_names(), SETTINGS.datasets_dir, SETTINGS.cache_dir)
        assert len(data.run_requests) == len(local)
        tags = data.run_requests[0].tags
        assert tags["dagster/partition/model"] == "step-100" and tags["dagster/partition/task"] == task_names()[0]
        assert checkpoint_sensor.default_status.value == "RUNNING"
        assert checkpoint_sensor.minimum_interval_seconds == 30


def test_sensor_refuses_to_run_without_a_discovered_file(tmp_path: Path) -> None:
    themis, root = _setup(tmp_path)
    themis = ThemisConfig(**{**themis.model_dump(), "discovered_models_file": ""})
    watch = CheckpointWatchConfig(checkpoints_dir=str(root))
    with DagsterInstance.ephemeral() as instance, pytest.raises(Exception, match="discovered_models_file"):
        _run_sensor(instance, themis, watch, None)


def test_sensor_can_also_evaluate_newly_declared_models(tmp_path: Path) -> None:
    themis, root = _setup(tmp_path)
    watch = CheckpointWatchConfig(checkpoints_dir=str(root), tasks=["crows_pairs"], evaluate_declared_models=True)
    with DagsterInstance.ephemeral() as instance:
        result = _run_sensor(instance, themis, watch, None)
        assert [r.run_key for r in result.run_requests] == ["my-model|crows_pairs|declared"]
        assert result.run_requests[0].tags["themis/trigger"] == "declared_model"
        instance.add_dynamic_partitions(MODELS_PARTITION, ["my-model"])
        assert _run_sensor(instance, themis, watch, result.cursor).run_requests == []


def test_unknown_configured_tasks_fail_the_tick(tmp_path: Path) -> None:
    themis, root = _setup(tmp_path)
    watch = CheckpointWatchConfig(checkpoints_dir=str(root), tasks=["no_such_task"])
    with DagsterInstance.ephemeral() as instance, pytest.raises(ConfigError, match="no_such_task"):
        _run_sensor(instance, themis, watch, None)


def test_checkpoints_get_the_watchs_engine_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a folder of weights cannot say (tensor parallelism, eager mode) is set once for every checkpoint."""
    from themis_dagster.definitions import build_resources
    from themis_dagster.errors import ConfigError

    themis, root = _setup(tmp_path)
    make_checkpoint(root, "step-100", mtime=time.time() - 600)
    engine = {"enforce_eager": True, "max_num_seqs": 8}
    watch = CheckpointWatchConfig(checkpoints_dir=str(root), settle_seconds=60, tasks=["crows_pairs"], engine=engine)
    with DagsterInstance.ephemeral() as instance:
        _run_sensor(instance, themis, watch, None)
    spec = load_discovered(Path(themis.discovered_models_file))["step-100"]
    assert (spec.engine.enforce_eager, spec.engine.max_num_seqs) == (True, 8)  # written where the runs read it

    monkeypatch.setenv("THEMIS_CHECKPOINT_ENGINE", '{"enforce_eagr": true}')
    with pytest.raises(ConfigError, match="THEMIS_CHECKPOINT_ENGINE: enforce_eagr"):  # before any engine or tick
        build_resources(Settings.from_env())
    monkeypatch.setenv("THEMIS_CHECKPOINT_ENGINE", "[1]")
    with pytest.raises(ConfigError, match="THEMIS_CHECKPOINT_ENGINE"):
        Settings.from_env()
