"""Every engine kind registers in one place: its name, resource, engine arguments and device needs.

The explorer asks the registry whether an engine would load on this host's devices and how to
name it; the resources read a model's own arguments of their kind and refuse another kind's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from themis_dagster.engines.vllm.engine import engine_kwargs
from themis_dagster.errors import ConfigError
from themis_dagster.exchange import GenerationParams, Request
from themis_dagster.registry.models import ENGINE_ARGS, ModelSpec, parse_models
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources import ENGINE_KINDS, ENGINE_RESOURCES, FakeEngineResource, engine_kind
from themis_dagster.resources.openai_config import openai_config_for
from themis_dagster.resources.served import OpenAIEngineResource, VLLMServerResource
from themis_dagster.settings import Settings

WEIGHTS = ResolvedWeights(path="/weights", revision=None, weights_sha256="a" * 64, lora_path=None, lora_sha256=None)
API = {"kind": "api", "base_url": "https://api.example.com/v1", "model": "gpt-x"}


def _spec(engine: dict[str, object] | None = None, source: dict[str, object] | None = None) -> ModelSpec:
    entry = {"id": "m", "source": source or {"kind": "local", "path": "/tmp/m"}, "engine": engine or {}}
    return parse_models({"models": [entry]})["m"]


def test_each_kind_registers_its_resource_and_arguments() -> None:
    assert set(ENGINE_KINDS) == set(ENGINE_ARGS) == set(ENGINE_RESOURCES) == {"vllm", "vllm-server", "openai", "fake"}
    for name, kind in ENGINE_KINDS.items():
        assert kind.name == name and kind.args is ENGINE_ARGS[name] and ENGINE_RESOURCES[name] is kind.resource
    assert {name for name, kind in ENGINE_KINDS.items() if kind.claims_devices} == {"vllm", "fake"}
    with pytest.raises(ValueError, match="THEMIS_ENGINE='gpt'; choose one of fake, openai, vllm, vllm-server"):
        engine_kind("gpt")


def test_device_needs_and_names_come_from_the_registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    settings = Settings(server_state_dir=tmp_path)
    local, api = _spec(), _spec(source=API)
    assert [engine_kind(name).loads_here(local, settings) for name in ("vllm", "fake", "openai")] == [True, True, False]
    assert not any(kind.loads_here(api, settings) for kind in ENGINE_KINDS.values())
    assert engine_kind("vllm").describe(api, False) == "HTTP (OpenAI-compatible API)"
    assert engine_kind("fake").describe(local, True) == "fake"
    server = engine_kind("vllm-server")
    assert server.loads_here(local, settings)  # no server runs for it: starting one loads it here
    assert server.describe(local, True) == "vllm-server (not running: started in a slot)"
    from themis_dagster.engines.vllm.server import VLLMServerManager

    monkeypatch.setattr(VLLMServerManager, "running", lambda self, model_id: True)
    assert not server.loads_here(local, settings)
    assert server.describe(local, False) == "vllm-server (running: no engine slot needed)"


def test_the_fake_engine_reads_a_models_own_arguments() -> None:
    chat = [Request.conversation([{"role": "user", "content": "hi"}], "r", "i")]
    own = FakeEngineResource(reply="1").engine_for(_spec({"kind": "fake", "reply": "no", "step_size": 1}), WEIGHTS)
    assert own.chat(chat, GenerationParams())[0].text == "no"
    default = FakeEngineResource(reply="1").engine_for(_spec(), WEIGHTS)  # vLLM's arguments: the resource's reply
    assert default.chat(chat, GenerationParams())[0].text == "1"
    with pytest.raises(ConfigError, match=r"model 'm': engine.kind is 'openai'; the fake engine"):
        FakeEngineResource().engine_for(_spec({"kind": "openai"}), WEIGHTS)


def test_the_openai_kind_reads_a_models_own_arguments() -> None:
    declared = _spec({"kind": "openai", "model": "served-m", "timeout_s": 5, "loglikelihood": "echo"}, source=API)
    config = openai_config_for(declared, base_url="https://api.example.com/v1", model="gpt-x", max_concurrency=8)
    read = (config.model, config.timeout_s, config.loglikelihood, config.max_concurrency)
    assert read == ("served-m", 5.0, "echo", 8)
    plain = openai_config_for(_spec(), base_url="http://h/v1", model="m", timeout_s=9.0)
    assert (plain.model, plain.timeout_s, plain.loglikelihood) == ("m", 9.0, "auto")
    assert OpenAIEngineResource.claims_devices is VLLMServerResource.claims_devices is False


def test_vllms_engines_refuse_another_kinds_arguments_before_loading() -> None:
    with pytest.raises(ConfigError, match=r"model 'm': engine.kind is 'fake'; vLLM's engines"):
        engine_kwargs(_spec({"kind": "fake"}), "/tmp/m", on_gpu=True)


def test_an_engine_is_built_from_the_declared_spec_so_it_says_why_auto_chose_its_dtype(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The engine resolves ``dtype: auto`` itself and prints the reason; handed the resolved spec it would
    read the dtype as pinned in the models file. The warm-engine key still uses the resolved dtype."""
    built: list[str] = []
    resource = FakeEngineResource()
    original = FakeEngineResource._build

    def spy(self: FakeEngineResource, spec: ModelSpec, weights: ResolvedWeights) -> object:
        built.append(spec.dtype)
        return original(self, spec, weights)

    monkeypatch.setattr(FakeEngineResource, "_build", spy)
    resource.engine_for(_spec(), WEIGHTS)
    assert built == ["auto"]
    assert '"dtype":"auto"' not in str(resource._key)  # the key names the dtype the engine computes in
