"""The model registry rejects bad declarations before any engine starts, naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from themis_dagster.errors import ConfigError
from themis_dagster.registry.model_id import InvalidModelIdError, slugify_model_id, validate_model_id
from themis_dagster.registry.models import DEFAULT_MODEL_ID, get_model, load_models, parse_models
from themis_dagster.settings import Settings


def test_shipped_registry_has_the_default_model() -> None:
    models = load_models(Settings().models_file)
    spec = models[DEFAULT_MODEL_ID]
    assert spec.source.kind == "packaged"
    assert spec.dtype == "auto"  # resolved per device when the engine starts (engines/precision.py)


@pytest.mark.parametrize("good", ["smollm2-135m-instruct", "a", "llama-3.1-8b_ckpt.500", "x" * 64])
def test_valid_model_ids(good: str) -> None:
    assert validate_model_id(good) == good


@pytest.mark.parametrize("bad", ["", "A", "a|b", "a b", "-a", "x" * 65, "a/b", "a;drop table", "ü"])
def test_invalid_model_ids(bad: str) -> None:
    with pytest.raises(InvalidModelIdError, match="invalid model id"):
        validate_model_id(bad)


def test_slugify_makes_valid_ids() -> None:
    assert slugify_model_id("Checkpoint 500/Final!") == "checkpoint-500-final"
    assert slugify_model_id("___") == "model"


def _one(**fields: object) -> dict[str, object]:
    base: dict[str, object] = {"id": "m", "source": {"kind": "local", "path": "/tmp/m"}}
    return {"models": [base | fields]}


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (_one(engine={"gpu_memory_utilization": 1.5}), "models.0.engine.gpu_memory_utilization"),
        (_one(engine={"tensor_parallel_size": 0}), "models.0.engine.tensor_parallel_size"),
        (_one(engine={"quantization": "magic"}), "models.0.engine.quantization"),
        (_one(engine={"unknown_arg": 1}), "models.0.engine.unknown_arg"),
        (_one(dtype="float8"), "models.0.dtype"),
        (_one(id="Bad|Id"), "models.0.id"),
        (_one(max_model_len=3), "models.0.max_model_len"),
        (_one(source={"kind": "hub", "repo_id": "no-slash"}), "models.0.source.hub.repo_id"),
        ({"models": [{"id": "m"}]}, "models.0.source"),
        ({"modles": []}, "modles"),
    ],
)
def test_invalid_declarations_name_the_field(data: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_models(data, origin="models.yaml")
    assert f"models.yaml: {field}" in str(raised.value)


def test_duplicate_ids_rejected() -> None:
    data = {"models": [_one()["models"][0], _one()["models"][0]]}  # type: ignore[index]
    with pytest.raises(ConfigError, match="duplicate model id 'm'"):
        parse_models(data)


def test_malformed_yaml_and_missing_file(tmp_path: Path) -> None:
    broken = tmp_path / "models.yaml"
    broken.write_text("models: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_models(broken)
    with pytest.raises(ConfigError, match="models file not found"):
        load_models(tmp_path / "absent.yaml")


def test_unknown_model_names_the_registered_ones() -> None:
    models = parse_models(_one())
    with pytest.raises(ConfigError, match=r"unknown model id 'other'; registered: m"):
        get_model(models, "other")


def test_api_models_resolve_without_weights_and_keep_no_key(tmp_path: Path) -> None:
    from themis_dagster.registry.weights import resolve_weights

    models = parse_models(
        {
            "models": [
                {
                    "id": "hosted",
                    "source": {
                        "kind": "api",
                        "base_url": "https://api.example/v1",
                        "model": "gpt-x",
                        "api_key_env": "EXAMPLE_KEY",
                    },
                }
            ]
        }
    )
    weights = resolve_weights(models["hosted"], tmp_path, tmp_path)
    assert weights.revision == "api" and weights.weights_sha256.startswith("api:")
    with pytest.raises(ConfigError, match="api_key_env"):
        parse_models({"models": [{"id": "h", "source": {"kind": "api", "base_url": "https://x/v1", "model": "m",
                                                         "api_key_env": "sk-live-123 secret"}}]})  # fmt: skip
