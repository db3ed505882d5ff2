"""Dagster resources: configuration, the warehouse and the inference engines."""

from themis_dagster.resources.config import ThemisConfig
from themis_dagster.resources.engine import EngineResource, FakeEngineResource, VLLMResource
from themis_dagster.resources.engine_registry import (
    ENGINE_KINDS,
    ENGINE_RESOURCES,
    EngineKind,
    engine_kind,
    engine_resource,
    engine_resource_class,
)
from themis_dagster.resources.warehouse import WarehouseResource

__all__ = [
    "ENGINE_KINDS",
    "ENGINE_RESOURCES",
    "EngineKind",
    "EngineResource",
    "FakeEngineResource",
    "ThemisConfig",
    "VLLMResource",
    "WarehouseResource",
    "engine_kind",
    "engine_resource",
    "engine_resource_class",
]
