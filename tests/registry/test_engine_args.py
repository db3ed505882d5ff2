"""A model's ``engine:`` arguments: one model per engine kind, vLLM's when no ``kind:`` is written.

Every models file written before the other kinds had arguments keeps loading unchanged (and
dumping without a ``kind``); errors name the field as it is written; an engine of one kind
refuses another kind's arguments, naming the model.
"""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from themis_dagster.errors import ConfigError
from themis_dagster.registry.engine_args import FakeEngineArgs, OpenAIEngineArgs
from themis_dagster.registry.model_engine import kind_args, parse_engine_args, vllm_args
from themis_dagster.registry.models import ENGINE_ARGS, EngineArgs, load_models, parse_models
from themis_dagster.settings import Settings


def _one(engine: object) -> dict[str, object]:
    return {"models": [{"id": "m", "source": {"kind": "local", "path": "/tmp/m"}, "engine": engine}]}


def test_the_shipped_models_file_is_vllms_and_dumps_as_before() -> None:
    models = load_models(Settings().models_file)
    declared = yaml.safe_load(Settings().models_file.read_text())["models"]
    for entry in declared:
        spec = models[entry["id"]]
        assert isinstance(spec.engine, EngineArgs) and "kind" not in spec.model_dump()["engine"]
        assert spec.engine == EngineArgs.model_validate(entry.get("engine", {}))


@pytest.mark.parametrize(
    ("engine", "expected"),
    [
        ({}, EngineArgs()),
        ({"seed": 7}, EngineArgs(seed=7)),
        ({"kind": "vllm", "seed": 7}, EngineArgs(seed=7)),
        ({"kind": "vllm-server", "enforce_eager": True}, EngineArgs(enforce_eager=True)),
        ({"kind": "openai", "model": "gpt-x", "timeout_s": 30}, OpenAIEngineArgs(model="gpt-x", timeout_s=30.0)),
        ({"kind": "fake", "reply": "no"}, FakeEngineArgs(reply="no")),
    ],
)
def test_each_kind_reads_its_own_arguments(engine: dict[str, object], expected: object) -> None:
    spec = parse_models(_one(engine))["m"]
    assert spec.engine == expected and type(spec.engine) is type(expected)
    assert parse_models({"models": [spec.model_dump(mode="json")]})["m"] == spec  # a dump loads back the same
    assert parse_engine_args(engine) == expected


@pytest.mark.parametrize(
    ("engine", "field"),
    [
        ({"gpu_memory_utilization": 1.5}, "models.0.engine.gpu_memory_utilization"),
        ({"kind": "vllm", "unknown_arg": 1}, "models.0.engine.unknown_arg"),
        ({"kind": "tpu"}, "models.0.engine.kind"),
        ({"kind": "openai", "seed": 1}, "models.0.engine.seed"),
        ({"kind": "openai", "max_concurrency": 0}, "models.0.engine.max_concurrency"),
        ({"kind": "fake", "step_size": 0}, "models.0.engine.step_size"),
        ("fast", "models.0.engine"),
    ],
)
def test_bad_arguments_name_the_field_as_written(engine: object, field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_models(_one(engine), origin="models.yaml")
    assert f"models.yaml: {field}: " in str(raised.value)


def test_arguments_on_their_own_name_their_field() -> None:
    """``THEMIS_CHECKPOINT_ENGINE`` is validated alone: the error names the key, not a union member."""
    with pytest.raises(ValidationError) as raised:
        parse_engine_args({"tensor_parallel_size": 0})
    assert [error["loc"] for error in raised.value.errors()] == [("tensor_parallel_size",)]


def test_every_kind_has_one_model_and_a_device_need() -> None:
    assert set(ENGINE_ARGS) == {"vllm", "vllm-server", "openai", "fake"}
    assert ENGINE_ARGS["vllm"] is ENGINE_ARGS["vllm-server"] is EngineArgs
    assert EngineArgs(tensor_parallel_size=2).gpu_count == 2
    assert OpenAIEngineArgs().gpu_count == 0 and FakeEngineArgs().gpu_count == 1


def test_an_engine_refuses_another_kinds_arguments_naming_the_model() -> None:
    openai = parse_models(_one({"kind": "openai"}))["m"]
    fake = parse_models(_one({"kind": "fake"}))["m"]
    vllm = parse_models(_one({}))["m"]
    assert vllm_args(vllm) == EngineArgs()
    with pytest.raises(ConfigError, match=r"model 'm': engine.kind is 'openai'.*THEMIS_ENGINE=openai"):
        vllm_args(openai)
    assert kind_args(openai, OpenAIEngineArgs, "openai") == OpenAIEngineArgs()
    assert kind_args(vllm, OpenAIEngineArgs, "openai") is None  # vLLM's, every model's default: left alone
    with pytest.raises(ConfigError, match=r"model 'm': engine.kind is 'fake'; the openai engine reads openai's"):
        kind_args(fake, OpenAIEngineArgs, "openai")
