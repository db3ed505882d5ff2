"""dagster-ray's run launcher, asking Ray for the GPUs of each run's model.

``deploy/dagster.ray.yaml`` selects ``ThemisRayRunLauncher``: every run is a Ray job
(dagster-ray 0.4.8's ``RayRunLauncher``, unchanged), and before it is submitted, a run of one
model (the ``dagster/partition/model`` tag that backfills, sensors, schedules and the UI add)
gets the tag ``dagster-ray/config`` with its model's GPU count (``tensor_parallel_size x
pipeline_parallel_size``), which dagster-ray turns into the Ray job's entrypoint resources.
So Ray places each run on a node with that many free GPUs, whoever launched it. A run that
already carries ``dagster-ray/config`` keeps it (a hand-set request wins); a model served
elsewhere (``source: {kind: api}``) asks for no GPU.

``THEMIS_RAY_GPU_RESOURCE`` (the daemon's environment) names the Ray resource counted:
``GPU`` (the default: ``num_gpus``) or a custom resource that stands in for GPUs (the local
two-node cluster of the tests and ``make cluster-demo`` declares ``fake_gpu`` on both nodes).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from dagster._core.launcher import LaunchRunContext, ResumeRunContext
from dagster._core.storage.dagster_run import DagsterRun
from dagster_ray import RayRunLauncher

from themis_dagster.registry.model_id import validate_model_id
from themis_dagster.registry.models import ApiSource, ModelSpec, load_registry
from themis_dagster.settings import Settings

RAY_CONFIG_TAG = "dagster-ray/config"  # what dagster-ray reads (dagster_ray.configs.USER_DEFINED_RAY_KEY)
MODEL_TAG = "dagster/partition/model"
GPU_RESOURCE_ENV = "THEMIS_RAY_GPU_RESOURCE"
GPU = "GPU"


def ray_job_request(spec: ModelSpec, gpu_resource: str = GPU) -> dict[str, Any]:
    """The ``dagster-ray/config`` fields a run of ``spec`` needs: its GPUs, as ``num_gpus`` or a custom resource."""
    if isinstance(spec.source, ApiSource):
        return {}  # served elsewhere: the GPUs are the server's
    count = spec.engine.gpu_count
    return {"num_gpus": count} if gpu_resource == GPU else {"resources": {gpu_resource: count}}


def gpu_request_tags(tags: Mapping[str, str], settings: Settings, gpu_resource: str = GPU) -> dict[str, str]:
    """The tag to add to a run with these tags ({} when it has one already or is not a one-model run).

    The model id is validated before it is looked up; an unknown model is an error naming the
    tag (the run fails at launch, before any Ray job or engine starts).
    """
    if RAY_CONFIG_TAG in tags or MODEL_TAG not in tags:
        return {}
    model_id = validate_model_id(tags[MODEL_TAG])
    models = load_registry(settings.models_file, settings.discovered_models_file)
    if model_id not in models:
        raise ValueError(f"{MODEL_TAG}={model_id!r}: no such model in {settings.models_file}")
    request = ray_job_request(models[model_id], gpu_resource)
    return {RAY_CONFIG_TAG: json.dumps(request)} if request else {}


class ThemisRayRunLauncher(RayRunLauncher):
    """``RayRunLauncher`` that tags each one-model run with its model's GPU request first."""

    def _tagged(self, run: DagsterRun) -> DagsterRun:
        gpu_resource = os.environ.get(GPU_RESOURCE_ENV) or GPU
        extra = gpu_request_tags(run.tags, Settings.from_env(), gpu_resource)
        if not extra:
            return run
        self._instance.add_run_tags(run.run_id, extra)
        tagged = self._instance.get_run_by_id(run.run_id)
        assert tagged is not None
        return tagged

    def launch_run(self, context: LaunchRunContext) -> None:
        super().launch_run(context._replace(dagster_run=self._tagged(context.dagster_run)))

    def resume_run(self, context: ResumeRunContext) -> None:
        super().resume_run(context._replace(dagster_run=self._tagged(context.dagster_run)))
