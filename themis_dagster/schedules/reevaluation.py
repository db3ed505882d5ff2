"""Scheduled re-evaluation: launch ``evaluate`` only for (model, task) partitions missing or stale.

Stale means the partition's last materializations were made with another code version,
dataset, task declaration or parameters, model revision, weights or LoRA adapter than the
current ones.
The decision is a pure function (``staleness``) over the recorded metadata and the current
fingerprints; the schedule gathers both from the Dagster instance and the registries.

Nothing is prepared or downloaded inside a tick: a model whose weights are not on disk yet
(a packaged model not converted, a hub model) has an unknown weights fingerprint, so its
partitions are evaluated only when missing (or stale on something known).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DagsterEventType,
    DagsterInstance,
    DagsterRunStatus,
    DefaultScheduleStatus,
    MultiPartitionKey,
    RunRequest,
    RunsFilter,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SkipReason,
    schedule,
)

from themis_dagster.assets.jobs import evaluate_job
from themis_dagster.datasets import DatasetNotFoundError, resolve_file
from themis_dagster.errors import ConfigError
from themis_dagster.partitions import MODELS_PARTITION
from themis_dagster.provenance import code_version
from themis_dagster.registry.models import (
    HubSource,
    LocalSource,
    ModelSpec,
    PackagedSource,
)
from themis_dagster.registry.weights import MARKER_FILE, WeightsError, folder_is_complete, resolve_weights
from themis_dagster.resources.config import ThemisConfig
from themis_dagster.runs.orphans import fail_dead_runs
from themis_dagster.tasks.loader import LoadedTask, task_names

DEFAULT_CRON = "0 3 * * *"
FINGERPRINT_TAG = "themis/reevaluation_key"
FINISHED_WITHOUT_SUCCESS = {DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}
NOT_FINISHED = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
]

# Where each recorded fingerprint lives: asset -> metadata keys (see assets/evaluation.py).
RECORDED_KEYS: dict[str, tuple[str, ...]] = {
    "task_dataset": ("dataset_sha256",),
    "raw_responses": ("model_revision", "weights_sha256", "lora_adapter_sha256"),
    "bias_metrics": ("code_version", "task_fingerprint", "task_params"),
}
COMPLETION_ASSET = "bias_metrics"  # a partition without it is missing


@dataclass(frozen=True)
class Fingerprints:
    """What a fresh evaluation of one partition would record; None where not known without work."""

    code_version: str
    dataset_sha256: str | None = None
    task_fingerprint: str | None = None
    task_params: Any = None
    model_revision: str | None = None
    weights_sha256: str | None = None
    lora_adapter_sha256: str | None = None  # only for a base model plus a LoRA adapter

    def digest(self) -> str:
        """A short stable hash of all fields (unknown ones included), for run keys."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Staleness:
    status: Literal["missing", "stale", "fresh"]
    reasons: tuple[str, ...] = ()

    @property
    def needs_run(self) -> bool:
        return self.status != "fresh"

    def describe(self) -> str:
        return self.status + (": " + ", ".join(self.reasons) if self.reasons else "")


def staleness(recorded: Mapping[str, Any] | None, current: Fingerprints) -> Staleness:
    """Compare the last recorded metadata of a partition with what a run now would record.

    ``recorded`` is None when the partition was never completed (missing). A field is
    compared only when the current value is known; a known current value that was never
    recorded counts as stale (the old run cannot be shown to match).
    """
    if recorded is None:
        return Staleness("missing")
    reasons = []
    for name, now in asdict(current).items():
        if now is None:
            continue
        if name not in recorded or recorded[name] != now:
            reasons.append(name)
    return Staleness("stale", tuple(reasons)) if reasons else Staleness("fresh")


def reevaluation_run_key(model: str, task: str, current: Fingerprints) -> str:
    """Deterministic per (partition, fingerprints): one stale state is launched once."""
    return f"reeval|{model}|{task}|{current.digest()}"


# --- reading what was recorded -------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A metadata value as plain data (``MetadataValue.value``), JSON round-tripped for comparison."""
    raw = getattr(value, "value", value)
    return json.loads(json.dumps(raw, default=str))


def recorded_metadata(instance: DagsterInstance, partitions: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Partition key -> the recorded fingerprints of its latest materializations (completed ones only).

    Two queries per asset: the latest storage id of each partition, then those events.
    """
    partition_set = set(partitions)
    merged: dict[str, dict[str, Any]] = {}
    completed: set[str] = set()
    for asset, keys in RECORDED_KEYS.items():
        asset_key = AssetKey(asset)
        latest = instance.get_latest_storage_id_by_partition(
            asset_key, DagsterEventType.ASSET_MATERIALIZATION, partitions=partition_set
        )
        if not latest:
            continue
        records = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=asset_key, storage_ids=list(latest.values())), limit=len(latest)
        ).records
        for record in records:
            materialization = record.asset_materialization
            if materialization is None or materialization.partition is None:
                continue
            metadata = materialization.metadata
            row = merged.setdefault(materialization.partition, {})
            row.update({key: _plain(metadata[key]) for key in keys if key in metadata})
            if asset == COMPLETION_ASSET:
                completed.add(materialization.partition)
    return {key: row for key, row in merged.items() if key in completed}


# --- what a run now would record -----------------------------------------------------------


def current_model_fingerprint(spec: ModelSpec, themis: ThemisConfig) -> tuple[str | None, str | None, str | None]:
    """(revision, weights sha256, LoRA adapter sha256) without preparing or downloading anything.

    None where unknown (and always for the adapter of a model without one). An adapter that
    no longer matches its base leaves all three unknown: the run itself reports the mismatch.
    """
    source = spec.source
    if isinstance(source, HubSource):
        return source.revision, None, None
    if isinstance(source, PackagedSource):
        folder = Path(themis.models_dir) / spec.id
        if not (folder_is_complete(folder) and (folder / MARKER_FILE).is_file()):
            return source.package, None, None
    elif isinstance(source, LocalSource) and not folder_is_complete(source.path.expanduser().resolve()):
        return None, None, None
    try:
        weights = resolve_weights(spec, Path(themis.models_dir), Path(themis.cache_dir))
    except (WeightsError, OSError, ValueError):  # LoraMismatchError is a ValueError
        return None, None, None
    return weights.revision, weights.weights_sha256, weights.lora_sha256


def current_task_fingerprint(task: LoadedTask, themis: ThemisConfig) -> tuple[str | None, str, Any]:
    """(dataset sha256 as task_dataset records it, or None if not on disk; task fingerprint; params)."""
    shas = []
    for name in task.spec.files:
        try:
            resolved = resolve_file(
                task.spec.dataset,
                name,
                datasets_dir=Path(themis.datasets_dir),
                cache_dir=Path(themis.cache_dir),
                allow_download=False,
            )
        except (DatasetNotFoundError, KeyError, OSError):
            return None, task.spec.fingerprint(), _plain(task.params.model_dump(mode="json"))
        shas.append(resolved.sha256)
    return "+".join(shas), task.spec.fingerprint(), _plain(task.params.model_dump(mode="json"))


# --- the schedule --------------------------------------------------------------------------


def _launched_before(instance: DagsterInstance, key: str) -> bool:
    """A run with this key that has not failed or been canceled (those are retried next tick)."""
    runs = instance.get_runs(RunsFilter(tags={FINGERPRINT_TAG: key}), limit=20)
    return any(run.status not in FINISHED_WITHOUT_SUCCESS for run in runs)


def _in_flight(instance: DagsterInstance) -> set[str]:
    """Partition keys of ``evaluate`` runs queued or running now (whatever launched them)."""
    runs = instance.get_runs(RunsFilter(job_name=evaluate_job.name, statuses=NOT_FINISHED))
    return {run.tags["dagster/partition"] for run in runs if "dagster/partition" in run.tags}


def plan_reevaluation(
    context: ScheduleEvaluationContext, themis: ThemisConfig, tasks: Iterable[str] | None = None
) -> list[RunRequest] | SkipReason:
    """The schedule's body: every registered model x every task, launched only when missing or stale."""
    instance = context.instance
    models = themis.models()
    partition_models = instance.get_dynamic_partitions(MODELS_PARTITION)
    unknown = sorted(set(partition_models) - set(models))
    if unknown:
        context.log.warning(f"model partitions not in the registry, skipped: {', '.join(unknown)}")
    model_ids = [model_id for model_id in partition_models if model_id in models]
    task_list = list(tasks) if tasks is not None else task_names()
    keys = {(m, t): str(MultiPartitionKey({"model": m, "task": t})) for m in model_ids for t in task_list}
    recorded = recorded_metadata(instance, keys.values())
    for run_id in fail_dead_runs(instance):  # killed runs stay STARTED and would look in flight forever
        context.log.warning(f"run {run_id} was left unfinished by a process that is gone: marked failed")
    in_flight = _in_flight(instance)
    base = code_version()
    task_prints = {}
    for task in task_list:
        try:
            task_prints[task] = current_task_fingerprint(themis.task(task), themis)
        except ConfigError as error:  # one task's bad parameters must not stop the others
            context.log.error(f"task {task} skipped: {error}")
    keys = {pair: key for pair, key in keys.items() if pair[1] in task_prints}
    model_prints = {model_id: current_model_fingerprint(models[model_id], themis) for model_id in model_ids}
    requests: list[RunRequest] = []
    counts = {"missing": 0, "stale": 0, "fresh": 0, "in_flight": 0, "launched_before": 0}
    for (model_id, task), key in keys.items():
        dataset_sha, task_fp, params = task_prints[task]
        current = Fingerprints(base, dataset_sha, task_fp, params, *model_prints[model_id])
        verdict = staleness(recorded.get(key), current)
        counts[verdict.status] += 1
        if not verdict.needs_run:
            continue
        if key in in_flight:
            counts["in_flight"] += 1
            continue
        run_key = reevaluation_run_key(model_id, task, current)
        if _launched_before(instance, run_key):
            counts["launched_before"] += 1
            continue
        requests.append(
            RunRequest(
                run_key=run_key,
                partition_key=MultiPartitionKey({"model": model_id, "task": task}),
                tags={
                    FINGERPRINT_TAG: run_key,
                    "themis/trigger": "reevaluation",
                    "themis/reason": verdict.describe()[:200],
                },
            )
        )
    summary = ", ".join(f"{name} {count}" for name, count in counts.items())
    context.log.info(f"re-evaluation over {len(keys)} partitions: {summary}; launching {len(requests)}")
    if not requests:
        return SkipReason(f"nothing missing or stale ({summary})")
    return requests


def build_reevaluation_schedule(
    cron_schedule: str = DEFAULT_CRON,
    execution_timezone: str = "UTC",
    default_status: DefaultScheduleStatus = DefaultScheduleStatus.STOPPED,
) -> ScheduleDefinition:
    """The schedule, with its timing chosen at definition time."""

    @schedule(
        name="reevaluation_schedule",
        cron_schedule=cron_schedule,
        execution_timezone=execution_timezone,
        job=evaluate_job,
        default_status=default_status,
        description="Re-evaluates every registered model on every task whose results are missing or stale "
        "(code version, dataset, task declaration or parameters, model revision, weights or LoRA adapter changed).",
    )
    def reevaluation_schedule(
        context: ScheduleEvaluationContext, themis: ThemisConfig
    ) -> list[RunRequest] | SkipReason:
        return plan_reevaluation(context, themis)  # a broken registry file fails the tick, naming the field

    return reevaluation_schedule


reevaluation_schedule = build_reevaluation_schedule()
