"""Every engine kind under the name ``THEMIS_ENGINE`` gives it: the one place an engine kind is registered.

An ``EngineKind`` holds all the platform asks about a kind: its Dagster resource, the engine
arguments a models file declares for it (``registry/models.py``'s ``ENGINE_ARGS``, one model per
kind), how the explorer names it, and what it needs of this host's devices. The definitions, the
``themis`` command (through the definitions), the explorer's playground and the tests all choose
an engine here, so a new kind is added in one entry and an unknown name is refused the same way
everywhere. How an engine is looked inside (the playground's inspector) is the engine's own
``Engine.inspector()``, not the kind's: a model behind an API is answered by the OpenAI-compatible
engine under every kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel

from themis_dagster.registry.engine_args import FakeEngineArgs, OpenAIEngineArgs
from themis_dagster.registry.models import ApiSource, EngineArgs, ModelSpec
from themis_dagster.resources.engine import EngineResource, FakeEngineResource, VLLMResource
from themis_dagster.resources.served import OpenAIEngineResource, VLLMServerResource
from themis_dagster.runs.devices import parse_devices
from themis_dagster.settings import Settings


def _vllm_server_running(spec: ModelSpec, settings: Settings) -> bool:
    from themis_dagster.engines.vllm.server import VLLMServerManager

    return VLLMServerManager(settings.server_state_dir).running(spec.id)


@dataclass(frozen=True)
class EngineKind:
    """One engine kind: what runs it, what a model declares for it, and what it needs of this host's devices."""

    name: str  # as THEMIS_ENGINE names it
    resource: type[EngineResource]  # the Dagster resource behind the ``engine`` key
    args: type[BaseModel]  # a model's ``engine:`` arguments this kind reads (registry/models.py ENGINE_ARGS)
    # a kind whose engine is a server shared by runs, started on first use: whether it runs for a model now
    server_running: Callable[[ModelSpec, Settings], bool] | None = None

    @property
    def claims_devices(self) -> bool:
        """Whether a run's engine of this kind holds the run's accelerators (``THEMIS_DEVICES``; the resource's)."""
        return self.resource.claims_devices

    def loads_here(self, spec: ModelSpec, settings: Settings) -> bool:
        """Whether answering ``spec`` now puts an engine on this host's devices (the playground then takes a slot).

        A model behind an API never does; a shared server only when it is not running yet (starting
        it does); an engine of a run where it claims devices.
        """
        if isinstance(spec.source, ApiSource):
            return False
        if self.server_running is not None:
            return not self.server_running(spec, settings)
        return self.claims_devices

    def describe(self, spec: ModelSpec, loads_here: bool) -> str:
        """How the explorer names the engine that answers ``spec`` (``loads_here``: as ``loads_here`` said)."""
        if isinstance(spec.source, ApiSource):
            return "HTTP (OpenAI-compatible API)"
        if self.server_running is None:
            return self.name
        return self.name + (" (not running: started in a slot)" if loads_here else " (running: no engine slot needed)")


ENGINE_KINDS: dict[str, EngineKind] = {
    kind.name: kind
    for kind in (
        EngineKind("vllm", VLLMResource, EngineArgs),
        EngineKind("vllm-server", VLLMServerResource, EngineArgs, server_running=_vllm_server_running),
        EngineKind("openai", OpenAIEngineResource, OpenAIEngineArgs),
        EngineKind("fake", FakeEngineResource, FakeEngineArgs),
    )
}
ENGINE_RESOURCES: dict[str, type[EngineResource]] = {name: kind.resource for name, kind in ENGINE_KINDS.items()}


def engine_kind(name: str) -> EngineKind:
    """The kind registered as ``name``; an unknown name fails listing the known ones."""
    if name not in ENGINE_KINDS:
        raise ValueError(f"THEMIS_ENGINE={name!r}; choose one of {', '.join(sorted(ENGINE_KINDS))}")
    return ENGINE_KINDS[name]


def engine_resource_class(name: str) -> type[EngineResource]:
    """The resource registered as ``name``; an unknown name fails listing the known ones."""
    return engine_kind(name).resource


def engine_resource(settings: Settings, keep_warm: bool = False) -> EngineResource:
    """The deployment's engine resource: the one ``settings.engine`` names, configured from ``settings``."""
    parse_devices(settings.devices)  # a malformed THEMIS_DEVICES fails before anything is built
    return engine_resource_class(settings.engine).from_settings(settings, keep_warm=keep_warm)
