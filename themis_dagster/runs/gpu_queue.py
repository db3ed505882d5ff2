"""Runs that need more GPUs than any node has wait in Dagster's run queue, saying why.

Dagster's ``QueuedRunCoordinator`` is kept whole; ``ThemisQueuedRunCoordinator`` adds two steps:

- at submission (every queued run passes here: backfills, sensors, schedules, the UI) a run of
  one model (the ``dagster/partition/model`` tag) is tagged ``themis/gpus`` with its model's
  GPU count, ``tensor_parallel_size x pipeline_parallel_size`` (0 for a model served elsewhere);
  the model id is validated before it is looked up. A run needing more than the largest node
  offers gets an engine event on it, which the UI shows on the run's page: which model needs
  how many GPUs and how many the largest node offers;
- its run queue configuration adds ``tag_concurrency_limits`` of 0 for every ``themis/gpus``
  value above that capacity, so the daemon's queue keeps such runs QUEUED (the UI names the tag
  limit as the reason) while the runs that fit go ahead. Nothing fails and the daemon is not
  involved beyond its usual dequeue; when the capacity grows (a restart with more
  ``THEMIS_DEVICES``, or a bigger Ray node) the held runs are admitted.

The capacity is configuration, never code: the coordinator's config in ``dagster.yaml`` names
it as ``gpus_per_node`` (a number), ``devices`` (tier 2: ``THEMIS_DEVICES``, counted) or
``ray_address`` (tier 3: the largest of the Ray nodes' ``THEMIS_RAY_GPU_RESOURCE`` totals, asked
of the cluster and kept a minute). With none of them no run is held.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import Any, Self

from dagster import Field, IntSource, StringSource
from dagster._config.config_schema import UserConfigSchema
from dagster._core.events import EngineEventData
from dagster._core.run_coordinator.base import SubmitRunContext
from dagster._core.run_coordinator.queued_run_coordinator import QueuedRunCoordinator, RunQueueConfig
from dagster._core.storage.dagster_run import DagsterRun, DagsterRunStatus
from dagster._serdes import ConfigurableClassData

from themis_dagster.registry.model_id import InvalidModelIdError, validate_model_id
from themis_dagster.registry.models import ApiSource, ModelSpec, load_registry
from themis_dagster.runs.devices import parse_devices
from themis_dagster.settings import Settings

GPUS_TAG = "themis/gpus"
MODEL_TAG = "dagster/partition/model"
GPU_RESOURCE_ENV = "THEMIS_RAY_GPU_RESOURCE"  # the Ray resource counted as GPUs (ray_launcher.py)
LARGEST_COUNTED = 64  # tag values name counts up to this; a larger need is tagged OVER_COUNTED
OVER_COUNTED = f"more than {LARGEST_COUNTED}"
RAY_CAPACITY_TTL_S = 60.0
OWN_CONFIG = ("gpus_per_node", "devices", "ray_address")  # the coordinator's fields beyond Dagster's

_log = logging.getLogger(__name__)


def gpu_need(spec: ModelSpec) -> int:
    """GPUs one run of ``spec`` occupies on its node: tp x pp, none for a model served elsewhere."""
    return 0 if isinstance(spec.source, ApiSource) else spec.engine.gpu_count


def gpus_tag_value(need: int) -> str:
    """The ``themis/gpus`` value of a need (exact up to 64, then one value for all larger ones)."""
    return str(need) if need <= LARGEST_COUNTED else OVER_COUNTED


def hold_limits(capacity: int | None) -> list[dict[str, Any]]:
    """``tag_concurrency_limits`` of 0 for every ``themis/gpus`` value above ``capacity`` (None: none)."""
    if capacity is None:
        return []
    values = [str(n) for n in range(max(capacity, 0) + 1, LARGEST_COUNTED + 1)] + [OVER_COUNTED]
    return [{"key": GPUS_TAG, "value": value, "limit": 0} for value in values]


def run_need(tags: Mapping[str, str], settings: Settings) -> tuple[str, int] | None:
    """(model id, GPUs) of a one-model run; None for other runs. The id is validated first.

    Raises ``InvalidModelIdError`` or ``KeyError`` (unknown model), both naming the tag.
    """
    if MODEL_TAG not in tags:
        return None
    try:
        model_id = validate_model_id(tags[MODEL_TAG])
    except InvalidModelIdError as error:
        raise InvalidModelIdError(f"{MODEL_TAG}: {error}") from None
    models = load_registry(settings.models_file, settings.discovered_models_file)
    if model_id not in models:
        raise KeyError(f"{MODEL_TAG}={model_id!r}: no such model in {settings.models_file}")
    return model_id, gpu_need(models[model_id])


def too_big_message(model_id: str, need: int, capacity: int, source: str) -> str:
    """What a held run says: who needs how many GPUs, what the largest node offers, what frees it."""
    return (
        f"model {model_id} needs {need} GPUs (engine.tensor_parallel_size x engine.pipeline_parallel_size) "
        f"but the largest node offers {capacity} ({source}): the run stays queued (tag limit "
        f"{GPUS_TAG}={gpus_tag_value(need)}: 0) until a node with {need} GPUs is configured; "
        "cancel it or lower the model's parallel sizes otherwise"
    )


def ray_largest_node(address: str, resource: str) -> int:
    """The largest total of ``resource`` on one alive node of the Ray cluster at ``address`` (its dashboard)."""
    from ray.util.state import list_nodes

    alive: list[tuple[str, Any, Any]] = [("state", "=", "ALIVE")]
    nodes = list_nodes(address=address, filters=alive, detail=True, timeout=10, raise_on_missing_output=False)
    totals = [int((node.resources_total or {}).get(resource, 0)) for node in nodes]
    return max(totals, default=0)


class ThemisQueuedRunCoordinator(QueuedRunCoordinator):
    """``QueuedRunCoordinator`` that tags runs with their GPUs and holds those no node can take."""

    def __init__(
        self,
        gpus_per_node: int | None = None,
        devices: str | None = None,
        ray_address: str | None = None,
        **queued: Any,
    ) -> None:
        super().__init__(**queued)
        if gpus_per_node is not None and gpus_per_node < 0:
            raise ValueError(f"run_coordinator.config.gpus_per_node: {gpus_per_node} is negative")
        self._gpus_per_node = gpus_per_node
        self._devices = parse_devices(devices) if devices is not None else None  # names THEMIS_DEVICES
        self._ray_address = ray_address or None
        self._ray_capacity: tuple[float, int | None] = (-RAY_CAPACITY_TTL_S, None)

    @classmethod
    def config_type(cls) -> UserConfigSchema:
        schema = super().config_type()
        assert isinstance(schema, Mapping)  # Dagster's: a dict of fields
        return {
            **schema,
            "gpus_per_node": Field(IntSource, is_required=False, description="GPUs of the largest node"),
            "devices": Field(StringSource, is_required=False, description="THEMIS_DEVICES of the one host"),
            "ray_address": Field(StringSource, is_required=False, description="Ray dashboard to ask for nodes"),
        }

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]) -> Self:
        queued = {key: value for key, value in config_value.items() if key not in OWN_CONFIG}
        return cls(
            inst_data=inst_data,
            gpus_per_node=config_value.get("gpus_per_node"),
            devices=config_value.get("devices"),
            ray_address=config_value.get("ray_address"),
            **queued,
        )

    def capacity(self) -> tuple[int, str] | None:
        """(GPUs of the largest node, where that number comes from), or None when unknown."""
        if self._gpus_per_node is not None:
            return self._gpus_per_node, "run_coordinator.config.gpus_per_node"
        if self._devices is not None:
            return len(self._devices), f"THEMIS_DEVICES={','.join(self._devices) or '(none)'}"
        if self._ray_address is not None:
            resource = os.environ.get(GPU_RESOURCE_ENV) or "GPU"
            checked_at, count = self._ray_capacity
            if time.monotonic() - checked_at >= RAY_CAPACITY_TTL_S:
                try:
                    count = ray_largest_node(self._ray_address, resource)
                except Exception as error:  # noqa: BLE001 - any failure to ask: hold nothing (Ray decides, as before)
                    _log.warning("cannot ask the Ray cluster at %s for its nodes: %s", self._ray_address, error)
                    count = None
                self._ray_capacity = (time.monotonic(), count)
            return None if count is None else (count, f"Ray resource {resource!r} of the largest node")
        return None

    def get_run_queue_config(self) -> RunQueueConfig:
        config = super().get_run_queue_config()
        found = self.capacity()
        limits = list(config.tag_concurrency_limits or []) + hold_limits(None if found is None else found[0])
        return config._replace(tag_concurrency_limits=limits)

    def submit_run(self, context: SubmitRunContext) -> DagsterRun:
        run = context.dagster_run
        if run.status != DagsterRunStatus.NOT_STARTED or GPUS_TAG in run.tags:
            return super().submit_run(context)  # submitted before (Dagster skips it), or a tag set by hand
        try:
            found = run_need(run.tags, Settings.from_env())
        except (InvalidModelIdError, KeyError, ValueError) as error:  # the run fails at launch, naming the tag
            message = error.args[0] if isinstance(error, KeyError) else str(error)
            self._instance.report_engine_event(f"no GPU count for this run: {message}", run)
            found = None
        if found is not None:
            model_id, need = found
            self._instance.add_run_tags(run.run_id, {GPUS_TAG: gpus_tag_value(need)})
            capacity = self.capacity()
            if capacity is not None and need > capacity[0]:
                message = too_big_message(model_id, need, *capacity)
                self._instance.report_engine_event(
                    message,
                    run,
                    EngineEventData(metadata={"model": model_id, "gpus needed": need, "largest node": capacity[0]}),
                )
            reloaded = self._instance.get_run_by_id(run.run_id)
            assert reloaded is not None
            context = SubmitRunContext(reloaded, context.workspace)
        return super().submit_run(context)
