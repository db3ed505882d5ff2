"""Every engine resource under the name ``THEMIS_ENGINE`` gives it: the one place an engine is registered.

The definitions, the ``themis`` command (through the definitions) and the tests all choose
an engine here, so a new engine is added in one line and an unknown name is refused the
same way everywhere.
"""

from __future__ import annotations

from themis_dagster.resources.engine import EngineResource, FakeEngineResource, VLLMResource
from themis_dagster.resources.served import OpenAIEngineResource, VLLMServerResource
from themis_dagster.runs.devices import parse_devices
from themis_dagster.settings import Settings

ENGINE_RESOURCES: dict[str, type[EngineResource]] = {
    "vllm": VLLMResource,
    "vllm-server": VLLMServerResource,
    "openai": OpenAIEngineResource,
    "fake": FakeEngineResource,
}


def engine_resource_class(name: str) -> type[EngineResource]:
    """The resource registered as ``name``; an unknown name fails listing the known ones."""
    if name not in ENGINE_RESOURCES:
        raise ValueError(f"THEMIS_ENGINE={name!r}; choose one of {', '.join(sorted(ENGINE_RESOURCES))}")
    return ENGINE_RESOURCES[name]


def engine_resource(settings: Settings, keep_warm: bool = False) -> EngineResource:
    """The deployment's engine resource: the one ``settings.engine`` names, configured from ``settings``."""
    parse_devices(settings.devices)  # a malformed THEMIS_DEVICES fails before anything is built
    return engine_resource_class(settings.engine).from_settings(settings, keep_warm=keep_warm)
