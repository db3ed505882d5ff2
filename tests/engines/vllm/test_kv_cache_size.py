"""The KV cache vLLM gets: sized in tokens on a CPU host unless the model entry says otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from themis_dagster.engines.vllm import engine as vllm_engine
from themis_dagster.engines.vllm.kv_cache import (
    CPU_DEFAULT_KV_CACHE_TOKENS,
    GIB,
    cpu_default_kv_cache_bytes,
    kv_bytes_per_token,
)
from themis_dagster.engines.vllm.server import serve_argv
from themis_dagster.registry.models import ModelSpec

# the default model's own config.json (SmolLM2-135M): 30 layers, 3 KV heads of 64, bf16
SMOLLM2 = {
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "hidden_size": 576,
    "dtype": "bfloat16",
}


def test_bytes_per_token_worked_by_hand() -> None:
    # keys and values (2) x 30 layers x 3 heads x 64 channels x 2 bytes
    assert kv_bytes_per_token(SMOLLM2, "bfloat16") == 2 * 30 * 3 * 64 * 2 == 23_040
    assert kv_bytes_per_token(SMOLLM2, "auto") == 23_040  # the config's dtype
    assert kv_bytes_per_token(SMOLLM2, "float32") == 46_080


def test_bytes_per_token_without_gqa_or_head_dim_and_nested_text_config() -> None:
    # Llama-2-7B: every head keeps its keys and values; head_dim = 4096 / 32
    llama2 = {"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096, "torch_dtype": "float16"}
    assert kv_bytes_per_token(llama2, "auto") == 2 * 32 * 32 * 128 * 2
    assert kv_bytes_per_token({"text_config": SMOLLM2}, "bfloat16") == 23_040  # multimodal configs nest it


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"num_hidden_layers": 2},  # no heads
        {"text_config": "x"},
        {"num_hidden_layers": 2, "num_attention_heads": "nine", "hidden_size": 576},
        {"num_hidden_layers": 2, "num_attention_heads": 0, "hidden_size": 576},
    ],
)
def test_unreadable_configs_leave_the_size_unknown(config: dict[str, object]) -> None:
    assert kv_bytes_per_token(config, "auto") is None


def _model_dir(tmp_path: Path, config: dict[str, object] | None) -> Path:
    if config is not None:
        (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return tmp_path


def test_cpu_default_holds_a_fixed_number_of_tokens_or_four_longest_sequences(tmp_path: Path) -> None:
    folder = _model_dir(tmp_path, SMOLLM2)
    assert cpu_default_kv_cache_bytes(folder, "bfloat16", 4096) == CPU_DEFAULT_KV_CACHE_TOKENS * 23_040
    assert CPU_DEFAULT_KV_CACHE_TOKENS * 23_040 == 1_132_462_080  # 1.05 GiB instead of 5.7 GiB by fraction
    assert cpu_default_kv_cache_bytes(folder, "bfloat16", 32_768) == 4 * 32_768 * 23_040
    assert cpu_default_kv_cache_bytes(folder, "bfloat16", None) == CPU_DEFAULT_KV_CACHE_TOKENS * 23_040


def test_cpu_default_falls_back_to_the_fraction_without_a_config(tmp_path: Path) -> None:
    assert cpu_default_kv_cache_bytes(_model_dir(tmp_path, None), "auto", 4096) is None
    (tmp_path / "config.json").write_text("{not json", encoding="utf-8")
    assert cpu_default_kv_cache_bytes(tmp_path, "auto", 4096) is None


def _spec(folder: Path, **engine: object) -> ModelSpec:
    return ModelSpec.model_validate(
        {
            "id": "m",
            "source": {"kind": "local", "path": str(folder)},
            "engine": engine,
            "max_model_len": 4096,
            "dtype": "bfloat16",
        }  # the sizes below are bf16's (dtype: auto would follow this machine's CPU)
    )


@pytest.mark.parametrize(
    ("engine", "on_gpu", "expected"),
    [
        ({}, False, 1_132_462_080),  # CPU: sized in tokens
        ({}, True, None),  # GPU: vLLM's fraction rule (0.9)
        ({"gpu_memory_utilization": 0.5}, False, None),  # an explicit fraction is kept on CPU too
        ({"kv_cache_gib": 2}, False, 2 * GIB),
        ({"kv_cache_gib": 0.5, "gpu_memory_utilization": 0.5}, True, GIB // 2),  # an explicit size wins
    ],
)
def test_engine_arguments_carry_the_kv_cache_size(
    tmp_path: Path, engine: dict[str, object], on_gpu: bool, expected: int | None
) -> None:
    folder = _model_dir(tmp_path, SMOLLM2)
    kwargs = vllm_engine.engine_kwargs(_spec(folder, **engine), str(folder), on_gpu)
    assert kwargs.get("kv_cache_memory_bytes") == expected
    argv = serve_argv(_spec(folder, **engine), str(folder), 8000, on_gpu)  # the server mode gets the same
    if expected is None:
        assert "--kv-cache-memory-bytes" not in argv
    else:
        assert argv[argv.index("--kv-cache-memory-bytes") + 1] == str(expected)


def test_kv_cache_size_is_validated_by_the_models_file() -> None:
    with pytest.raises(ValueError, match="kv_cache_gib"):
        ModelSpec.model_validate({"id": "m", "source": {"kind": "packaged"}, "engine": {"kv_cache_gib": 0}})
