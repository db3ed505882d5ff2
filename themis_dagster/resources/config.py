"""The platform's configuration as a Dagster resource: registries, dataset mirror and caches."""

from __future__ import annotations

from pathlib import Path

from dagster import ConfigurableResource
from pydantic import Field

from themis_dagster.datasets import ResolvedFile, resolve_file
from themis_dagster.registry.models import ModelSpec, get_model, load_registry
from themis_dagster.registry.weights import ResolvedWeights, resolve_weights
from themis_dagster.tasks.loader import LoadedTask, load_overrides, load_task
from themis_dagster.tasks.spec import TaskInputs


class ThemisConfig(ConfigurableResource):  # type: ignore[type-arg]
    """Where the model registry, task overrides, dataset mirror and caches are.

    Every lookup validates what it reads, so a bad file fails the run before any engine starts.
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

    def reports_path(self) -> Path:
        return Path(self.reports_dir)

    def models(self) -> dict[str, ModelSpec]:
        discovered = Path(self.discovered_models_file) if self.discovered_models_file else None
        return load_registry(Path(self.models_file), discovered)

    def model(self, model_id: str) -> ModelSpec:
        return get_model(self.models(), model_id)

    def task(self, name: str) -> LoadedTask:
        """The task with its overrides, the models it names checked against the registry, and its inputs."""
        overrides = load_overrides(Path(self.task_overrides_file) if self.task_overrides_file else None)
        return load_task(name, overrides.get(name), models=self.models()).with_inputs(self.task_inputs())

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
