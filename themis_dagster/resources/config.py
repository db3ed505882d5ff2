"""The platform's configuration as a Dagster resource: registries, dataset mirror and caches."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr

from themis_dagster.datasets import ResolvedFile, resolve_file
from themis_dagster.registry.models import ModelSpec, get_model, load_registry
from themis_dagster.registry.weights import ResolvedWeights, resolve_weights
from themis_dagster.tasks.loader import LoadedTask, load_overrides, load_task
from themis_dagster.tasks.spec import TaskInputs

T = TypeVar("T")


class ThemisConfig(ConfigurableResource):  # type: ignore[type-arg]
    """Where the model registry, task overrides, dataset mirror and caches are.

    Every lookup validates what it reads, so a bad file fails the run before any engine starts.
    Within a run (Dagster builds this resource afresh for each, ``setup_for_execution``) the model
    registry and each task are read once and kept for the run's assets; outside a run every lookup
    reads the files again, so a long-lived caller (a sensor, the command line) sees their edits.
    """

    models_file: str
    datasets_dir: str
    cache_dir: str
    models_dir: str
    task_overrides_file: str = ""
    discovered_models_file: str = ""
    exports_dir: str = "data/exports"
    reports_dir: str = "data/reports"
    allow_downloads: bool = True
    request_cache: bool = True
    request_chunk_size: int = Field(default=4096, ge=1)
    commit_interval_s: float = Field(default=10.0, gt=0)

    _run_cache: dict[str, Any] | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        """Keep what is read for the run (a fresh copy of this resource serves each run)."""
        self._run_cache = {}

    def _per_run(self, key: str, read: Callable[[], T]) -> T:
        """``read()``, once per run where this resource serves one; every call otherwise."""
        if self._run_cache is None:
            return read()
        if key not in self._run_cache:
            self._run_cache[key] = read()
        return cast(T, self._run_cache[key])

    def reports_path(self) -> Path:
        return Path(self.reports_dir)

    def models(self) -> dict[str, ModelSpec]:
        discovered = Path(self.discovered_models_file) if self.discovered_models_file else None
        return self._per_run("models", lambda: load_registry(Path(self.models_file), discovered))

    def model(self, model_id: str) -> ModelSpec:
        return get_model(self.models(), model_id)

    def task(self, name: str) -> LoadedTask:
        """The task with its overrides, the models it names checked against the registry, and its inputs."""

        def read() -> LoadedTask:
            overrides = load_overrides(Path(self.task_overrides_file) if self.task_overrides_file else None)
            return load_task(name, overrides.get(name), models=self.models()).with_inputs(self.task_inputs())

        return self._per_run(f"task:{name}", read)

    def task_inputs(self) -> TaskInputs:
        """What task functions may need from outside: where datasets and downloads are (``tasks/spec.py``)."""
        return TaskInputs(
            datasets_dir=Path(self.datasets_dir), cache_dir=Path(self.cache_dir), allow_downloads=self.allow_downloads
        )

    def dataset_files(self, task: LoadedTask) -> dict[str, ResolvedFile]:
        return {
            name: resolve_file(
                task.spec.dataset,
                name,
                datasets_dir=Path(self.datasets_dir),
                cache_dir=Path(self.cache_dir),
                allow_download=self.allow_downloads,
            )
            for name in task.spec.files
        }

    def weights(self, spec: ModelSpec) -> ResolvedWeights:
        return resolve_weights(spec, Path(self.models_dir), Path(self.cache_dir))
