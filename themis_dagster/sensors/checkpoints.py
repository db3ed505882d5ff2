"""New checkpoints become models: a sensor registers each one and evaluates it on every task.

The decisions are pure functions over the folder and the cursor (``scan_checkpoints``);
the Dagster sensor only reads the configuration, writes the discovered-models file and
turns decisions into partition and run requests.

A checkpoint is one sub-folder of the watched folder in Hugging Face format
(``config.json`` + weights). Each folder is, per tick, one of:

- ``pending``: still being written (no config or weights yet, or a file modified within
  the settle time); not recorded, so it is looked at again next tick;
- ``broken``: settled but unreadable (config.json not a JSON object, a safetensors header
  that does not parse or does not cover its file, a missing shard); logged and recorded
  with its reason and file stamp, and only looked at again once its files change;
- ``new``/``changed``: registered (or re-fingerprinted); runs of ``evaluate`` on every task;
- ``unchanged``: seen before with the same files (or the same weights fingerprint); nothing.

Ids: ``slugify_model_id`` of the folder name. An id already taken (by a declared model or
another checkpoint) gets a ``-2``, ``-3``, ... suffix, never replacing a declaration; the
chosen id is written to the discovered-models file, so a folder keeps it for good. Hidden
folders and names ending in ``.partial``/``.tmp``/``.incomplete`` are ignored (copies in
progress). Only safetensors weights are validated; ``.bin``/``.pt`` pickles are not opened.
Run keys are ``model|task|weights_sha256``: a lost cursor re-requests runs Dagster dedupes.

Lineage: a new checkpoint's ``parent`` is the previous checkpoint of its family by training
step (``with_parents``), so its ``evaluate`` runs also compare it with that parent (the
``comparisons`` asset) and carry the gate's verdict as the ``themis/gate`` tag.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dagster import (
    ConfigurableResource,
    DefaultSensorStatus,
    MultiPartitionKey,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)
from pydantic import Field, ValidationError

from themis_dagster.assets.jobs import evaluate_job
from themis_dagster.errors import ConfigError, format_validation_error
from themis_dagster.partitions import MODELS_PARTITION, models_partitions
from themis_dagster.registry.discovered import (
    add_discovered,
    allocate_model_id,
    checkpoint_spec,
    ids_by_path,
    load_discovered,
)
from themis_dagster.registry.model_engine import parse_engine_args
from themis_dagster.registry.models import AnyEngineArgs, ModelSpec, load_models
from themis_dagster.registry.weights import weights_fingerprint
from themis_dagster.reports.family import split_checkpoint
from themis_dagster.resources.config import ThemisConfig
from themis_dagster.sensors.checkpoint_folders import Inspection, checkpoint_folders, inspect_checkpoint
from themis_dagster.tasks.loader import task_names, tasks_with_local_data

CURSOR_VERSION = 1
DEFAULT_SETTLE_SECONDS = 60.0
DEFAULT_MIN_INTERVAL_SECONDS = 30

Action = Literal["pending", "broken", "new", "changed", "unchanged"]


class CheckpointWatchConfig(ConfigurableResource):  # type: ignore[type-arg]
    """Where new checkpoints appear and how long a folder must be quiet before it is read."""

    checkpoints_dir: str
    settle_seconds: float = Field(default=DEFAULT_SETTLE_SECONDS, ge=0.0)
    tasks: list[str] = Field(default_factory=list, description="Tasks to run on a new checkpoint; empty: all.")
    max_new_per_tick: int = Field(
        default=8,
        ge=1,
        description="At most this many folders are fingerprinted (weights hashed) per tick; the rest wait, "
        "so one tick stays well inside the sensor's evaluation timeout.",
    )
    evaluate_declared_models: bool = Field(
        default=False,
        description="Also evaluate models newly declared in the models file (otherwise they are only "
        "registered as partitions, and the re-evaluation schedule picks them up as missing).",
    )
    engine: dict[str, Any] = Field(
        default_factory=dict,
        description="Engine settings (a models file's ``engine:`` keys) for every checkpoint this watch registers: "
        "what a folder of weights cannot say, e.g. tensor_parallel_size for a model larger than one accelerator.",
    )

    def engine_args(self, origin: str = "CheckpointWatchConfig.engine") -> AnyEngineArgs | None:
        """``engine`` validated (None: vLLM's defaults); an unknown or invalid key is an error naming ``origin``."""
        if not self.engine:
            return None
        try:
            return parse_engine_args(self.engine)
        except ValidationError as error:
            raise ConfigError(format_validation_error(error, origin)) from None


# --- the cursor ----------------------------------------------------------------------------


def parse_cursor(raw: str | None) -> dict[str, dict[str, Any]]:
    """Checkpoint path -> its record; an absent or unreadable cursor starts empty (run keys dedupe)."""
    if not raw:
        return {}
    try:
        data = json.loads(raw)
        checkpoints = data["checkpoints"]
    except (ValueError, KeyError, TypeError):
        return {}
    if not isinstance(checkpoints, dict):
        return {}
    return {str(path): dict(record) for path, record in checkpoints.items() if isinstance(record, dict)}


def dump_cursor(checkpoints: Mapping[str, Mapping[str, Any]]) -> str:
    return json.dumps({"version": CURSOR_VERSION, "checkpoints": dict(sorted(checkpoints.items()))}, sort_keys=True)


# --- scanning the folder -------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """What to do about one checkpoint folder this tick."""

    path: str
    action: Action
    reason: str = ""
    model_id: str | None = None
    fingerprint: str | None = None
    spec: ModelSpec | None = None  # set for a folder registered this tick
    hashed: bool = False  # its weights were fingerprinted this tick (counts against max_new)


@dataclass(frozen=True)
class Scan:
    decisions: list[Decision]
    cursor: dict[str, dict[str, Any]]

    def by_action(self, *actions: Action) -> list[Decision]:
        return [decision for decision in self.decisions if decision.action in actions]


def _decide(
    folder: Path,
    prior: Mapping[str, Any] | None,
    now: float,
    settle_seconds: float,
    known_ids: dict[str, str],
    taken: set[str],
    may_hash: bool = True,
) -> tuple[Decision, dict[str, Any] | None]:
    path = str(folder.resolve())
    inspection = inspect_checkpoint(folder, now, settle_seconds)
    if prior is not None and inspection.stamp and prior.get("stamp") == inspection.stamp:
        return Decision(path, "unchanged", str(prior.get("reason", "")), prior.get("model_id"),
                        prior.get("fingerprint")), dict(prior)  # fmt: skip
    if inspection.status == "ready" and not may_hash:
        inspection = Inspection("pending", "deferred to the next tick (max_new_per_tick reached)", inspection.stamp)
    if inspection.status == "pending":
        return Decision(path, "pending", inspection.reason), None if prior is None else dict(prior)
    if inspection.status == "broken":
        return Decision(path, "broken", inspection.reason), {
            "status": "broken",
            "reason": inspection.reason,
            "stamp": inspection.stamp,
        }
    try:
        fingerprint = weights_fingerprint(folder)
    except OSError as error:
        reason = f"cannot read weights ({error})"
        return Decision(path, "broken", reason), {"status": "broken", "reason": reason, "stamp": inspection.stamp}
    registered = prior is not None and prior.get("status") == "registered"
    model_id = (prior or {}).get("model_id") if registered else None
    model_id = model_id or known_ids.get(path) or allocate_model_id(folder.name, taken)
    taken.add(model_id)
    record = {"status": "registered", "model_id": model_id, "fingerprint": fingerprint, "stamp": inspection.stamp}
    if registered and prior is not None and prior.get("fingerprint") == fingerprint:
        return Decision(path, "unchanged", "same weights", model_id, fingerprint, hashed=True), record
    spec = None if path in known_ids else checkpoint_spec(model_id, folder, inspection.config, fingerprint)
    action: Action = "changed" if registered or path in known_ids else "new"
    return Decision(path, action, "", model_id, fingerprint, spec, hashed=True), record


def scan_checkpoints(
    root: Path,
    cursor: Mapping[str, Mapping[str, Any]],
    *,
    now: float,
    settle_seconds: float,
    declared_ids: Iterable[str],
    discovered: Mapping[str, ModelSpec],
    max_new: int | None = None,
) -> Scan:
    """Decide, for every checkpoint folder under ``root``, what this tick does; returns the next cursor.

    ``declared_ids`` and ``discovered`` (the discovered-models file) reserve ids, and a folder
    already in the discovered file keeps its id (so a lost cursor re-registers nothing).
    Folders that disappeared drop out of the cursor; their registry entries stay. At most
    ``max_new`` folders have their weights hashed per call; later ones stay pending.
    """
    known_ids = ids_by_path(discovered)
    taken = set(declared_ids) | set(discovered)
    decisions: list[Decision] = []
    next_cursor: dict[str, dict[str, Any]] = {}
    hashed = 0
    for folder in checkpoint_folders(root):
        path = str(folder.resolve())
        may_hash = max_new is None or hashed < max_new
        decision, record = _decide(folder, cursor.get(path), now, settle_seconds, known_ids, taken, may_hash)
        hashed += decision.hashed
        decisions.append(decision)
        if record is not None:
            next_cursor[path] = record
    return Scan(decisions, next_cursor)


# --- from decisions to Dagster requests ----------------------------------------------------


def with_parents(new: Iterable[ModelSpec], registered: Iterable[str]) -> list[ModelSpec]:
    """Each new checkpoint with its parent: the previous checkpoint of its family by training step.

    A family is the ids sharing the prefix before a trailing step (``reports/family.py``);
    the parent is the member, registered before or in this tick, with the largest step below
    the new one's. A checkpoint without a step, or the first of its family, has no parent. A
    spec that already names a parent keeps it.
    """
    fresh = list(new)
    steps: dict[str, list[tuple[int, str]]] = {}
    for model_id in {*registered, *(spec.id for spec in fresh)}:
        prefix, step = split_checkpoint(model_id)
        if step is not None:
            steps.setdefault(prefix, []).append((step, model_id))
    linked = []
    for spec in fresh:
        prefix, step = split_checkpoint(spec.id)
        earlier = [member for member in steps.get(prefix, []) if step is not None and member[0] < step]
        if spec.parent is None and earlier:
            spec = spec.model_copy(update={"parent": max(earlier)[1]})
        linked.append(spec)
    return linked


def checkpoint_run_key(model_id: str, task: str, fingerprint: str) -> str:
    """Deterministic: the same weights on the same task are launched once per sensor, ever."""
    return f"{model_id}|{task}|{fingerprint}"


def run_requests_for(decisions: Iterable[Decision], tasks: Iterable[str]) -> list[RunRequest]:
    """One ``evaluate`` run per (new or changed checkpoint, task)."""
    task_list = list(tasks)
    requests = []
    for decision in decisions:
        if decision.action not in ("new", "changed") or decision.model_id is None or decision.fingerprint is None:
            continue
        for task in task_list:
            requests.append(
                RunRequest(
                    run_key=checkpoint_run_key(decision.model_id, task, decision.fingerprint),
                    partition_key=MultiPartitionKey({"model": decision.model_id, "task": task}),
                    tags={
                        "themis/trigger": f"checkpoint_{decision.action}",
                        "themis/weights_sha256": decision.fingerprint[:16],
                    },
                )
            )
    return requests


def selected_tasks(configured: Iterable[str]) -> list[str]:
    """The configured tasks (validated), or every task."""
    known = task_names()
    chosen = list(configured) or known
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise ConfigError(f"CheckpointWatchConfig.tasks: unknown task(s) {', '.join(unknown)}")
    return chosen


def evaluate_checkpoints(
    context: SensorEvaluationContext, themis: ThemisConfig, watch: CheckpointWatchConfig, now: float | None = None
) -> SensorResult:
    """The sensor's body: scan, register, request partitions and runs, advance the cursor."""
    if not themis.discovered_models_file:
        raise ConfigError("ThemisConfig.discovered_models_file is not set: nowhere to register new checkpoints")
    discovered_file = Path(themis.discovered_models_file)
    declared = load_models(Path(themis.models_file))
    discovered = load_discovered(discovered_file)
    clash = sorted(set(declared) & set(discovered))
    if clash:  # a hand declaration reused a discovered id: load_registry refuses both files until resolved
        context.log.error(f"ids in both {themis.models_file} and {discovered_file}: {', '.join(clash)}")
    tasks, unavailable = tasks_with_local_data(
        selected_tasks(watch.tasks), Path(themis.datasets_dir), Path(themis.cache_dir)
    )
    for task in unavailable:
        context.log.info(f"task {task} is not evaluated on new checkpoints: its data is not on this host")
    scan = scan_checkpoints(
        Path(watch.checkpoints_dir),
        parse_cursor(context.cursor),
        now=time.time() if now is None else now,
        settle_seconds=watch.settle_seconds,
        declared_ids=declared,
        discovered=discovered,
        max_new=watch.max_new_per_tick,
    )
    engine = watch.engine_args()
    new_specs = [
        decision.spec if engine is None else decision.spec.model_copy(update={"engine": engine})
        for decision in scan.by_action("new", "changed")
        if decision.spec is not None
    ]
    new_specs = with_parents(new_specs, [*declared, *discovered])
    if new_specs:
        discovered = add_discovered(discovered_file, new_specs)
    for decision in scan.by_action("broken"):
        context.log.warning(f"checkpoint {decision.path} is broken, skipped until its files change: {decision.reason}")
    for decision in scan.by_action("new", "changed"):
        context.log.info(f"checkpoint {decision.path} -> model {decision.model_id} ({decision.action})")

    existing = set(context.instance.get_dynamic_partitions(MODELS_PARTITION))
    wanted = [*declared, *(model_id for model_id in discovered if model_id not in declared)]
    to_add = [model_id for model_id in wanted if model_id not in existing]
    runs = run_requests_for(scan.by_action("new", "changed"), tasks)
    parents = {model_id: spec.parent for model_id, spec in discovered.items() if spec.parent}
    runs = [
        run.with_replaced_attrs(tags={**run.tags, "themis/parent": parents[model]})
        if (model := _run_model(run)) in parents
        else run
        for run in runs
    ]
    if watch.evaluate_declared_models:
        fresh_declared = [model_id for model_id in declared if model_id not in existing]
        runs += [
            RunRequest(
                run_key=f"{model_id}|{task}|declared",
                partition_key=MultiPartitionKey({"model": model_id, "task": task}),
                tags={"themis/trigger": "declared_model"},
            )
            for model_id in fresh_declared
            for task in tasks
        ]
    cursor = dump_cursor(scan.cursor)
    if not runs and not to_add:
        pending = scan.by_action("pending")
        detail = "; ".join(f"{Path(d.path).name}: {d.reason}" for d in pending[:5])
        reason = f"no new checkpoints ({len(pending)} pending{': ' + detail if detail else ''})"
        return SensorResult(skip_reason=SkipReason(reason), cursor=cursor)
    return SensorResult(
        run_requests=runs,
        dynamic_partitions_requests=[models_partitions.build_add_request(to_add)] if to_add else [],
        cursor=cursor,
    )


def _run_model(run: RunRequest) -> str | None:
    key = run.partition_key
    return key.keys_by_dimension["model"] if isinstance(key, MultiPartitionKey) else None


def build_checkpoint_sensor(
    minimum_interval_seconds: int = DEFAULT_MIN_INTERVAL_SECONDS,
    default_status: DefaultSensorStatus = DefaultSensorStatus.RUNNING,
) -> SensorDefinition:
    """The sensor, with its polling interval chosen at definition time."""

    @sensor(
        name="checkpoint_sensor",
        job=evaluate_job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description="Registers new Hugging Face checkpoints (and newly declared models) as model partitions "
        "and evaluates each new checkpoint on every task.",
    )
    def checkpoint_sensor(
        context: SensorEvaluationContext, themis: ThemisConfig, checkpoint_watch: CheckpointWatchConfig
    ) -> SensorResult:
        return evaluate_checkpoints(context, themis, checkpoint_watch)

    return checkpoint_sensor


checkpoint_sensor = build_checkpoint_sensor()
