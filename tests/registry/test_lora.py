"""LoRA adapters: a mismatched adapter is refused before any engine starts; a good one changes the model.

The unit tests read only config.json of a base folder and the adapter's header (fast).
The engine test loads the real default model once with a tiny random adapter and
compares vLLM's LoRA path with the base path and with transformers on merged weights.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests import lora_fixture as fx
from themis_dagster.registry.lora import (
    LoraMismatchError,
    ValidatedLora,
    adapter_fingerprint,
    base_names,
    validate_lora,
    vllm_lora_kwargs,
)
from themis_dagster.registry.models import LoraAdapter


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return fx.write_base_config(tmp_path / "base")


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fx.make_valid_adapter(tmp_path_factory.mktemp("lora") / "good")


def _validate(folder: Path, base: Path, max_rank: int = 16) -> ValidatedLora:
    return validate_lora(LoraAdapter(path=folder, max_lora_rank=max_rank), base, [fx.HUB_NAME, "smollm2-135m-instruct"])


def _rewrite_config(folder: Path, **changes: object) -> None:
    path = folder / "adapter_config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True)
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        (dst / name).write_bytes((src / name).read_bytes())
    return dst


def test_valid_adapter_passes_and_is_fingerprinted(good: Path, base: Path) -> None:
    result = _validate(good, base)
    assert result.rank == 4
    assert result.target_modules == ("q_proj", "v_proj")
    assert result.n_tensors == 30 * 2 * 2  # layers x targets x (A, B)
    assert result.warnings == ()
    assert len(result.sha256) == 64 and result.sha256 == adapter_fingerprint(good)
    assert result.metadata() == {
        "lora_adapter_path": str(good.resolve()),
        "lora_adapter_sha256": result.sha256,
        "lora_rank": 4,
        "lora_target_modules": ["q_proj", "v_proj"],
    }


def test_fingerprint_is_reproducible_and_content_sensitive(good: Path, tmp_path: Path) -> None:
    again = fx.write_adapter(tmp_path / "again")
    other = fx.write_adapter(tmp_path / "other", seed=fx.SEED + 1)
    assert adapter_fingerprint(again) == adapter_fingerprint(good)
    assert adapter_fingerprint(other) != adapter_fingerprint(good)


def test_adapter_for_another_base_names_tensor_and_shapes(tmp_path: Path, base: Path) -> None:
    folder = fx.make_mismatched_adapter(tmp_path / "360m")
    with pytest.raises(LoraMismatchError) as caught:
        _validate(folder, base)
    error = caught.value
    assert error.file == folder / "adapter_model.safetensors"
    assert error.tensor == "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
    assert (error.expected, error.actual) == ([4, 576], [4, 960])
    assert "shape does not fit the base model" in str(error) and "expected [4, 576], got [4, 960]" in str(error)


def test_kv_projection_uses_kv_heads(tmp_path: Path, base: Path) -> None:
    """v_proj's out_features is num_key_value_heads * head_dim = 3 * 64, not hidden_size."""
    wide = fx.SMOLLM2_135M_CONFIG | {"num_key_value_heads": 9}
    folder = fx.write_adapter(tmp_path / "mha", base=wide)
    with pytest.raises(LoraMismatchError, match=r"v_proj\.lora_B\.weight.*expected \[192, 4\], got \[576, 4\]"):
        _validate(folder, base)


def test_rank_above_max_lora_rank(tmp_path: Path, base: Path) -> None:
    folder = fx.write_adapter(tmp_path / "r32", rank=32)
    with pytest.raises(LoraMismatchError, match=r"exceeds the model spec's lora\.max_lora_rank") as caught:
        _validate(folder, base, max_rank=16)
    assert (caught.value.expected, caught.value.actual) == ("<= 16", 32)
    assert _validate(folder, base, max_rank=32).rank == 32


def test_max_lora_rank_must_be_one_vllm_accepts(good: Path, base: Path) -> None:
    adapter = LoraAdapter.model_construct(path=good, name="adapter", max_lora_rank=4)  # skips the spec's own check
    with pytest.raises(LoraMismatchError, match="max_lora_rank must be a value vLLM accepts"):
        validate_lora(adapter, base)


def test_config_rank_disagreeing_with_tensors(good: Path, tmp_path: Path, base: Path) -> None:
    folder = _copy(good, tmp_path / "r8")
    _rewrite_config(folder, r=8)
    with pytest.raises(LoraMismatchError, match=r"expected \[8, 576\], got \[4, 576\]"):
        _validate(folder, base)


def test_missing_config(good: Path, tmp_path: Path, base: Path) -> None:
    folder = _copy(good, tmp_path / "noconfig")
    (folder / "adapter_config.json").unlink()
    with pytest.raises(LoraMismatchError, match=r"adapter_config\.json: file not found"):
        _validate(folder, base)


def test_missing_folder(tmp_path: Path, base: Path) -> None:
    with pytest.raises(LoraMismatchError, match="adapter folder not found"):
        _validate(tmp_path / "nowhere", base)


@pytest.mark.parametrize("text", ["", "{not json", "[1, 2]", "\udcff"])
def test_invalid_config_json(good: Path, tmp_path: Path, base: Path, text: str) -> None:
    folder = _copy(good, tmp_path / "badjson")
    (folder / "adapter_config.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(LoraMismatchError, match=r"adapter_config\.json: (not valid JSON|must hold a JSON object)"):
        _validate(folder, base)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"peft_type": "IA3"}, "peft_type must be LORA"),
        ({"r": 0}, "field 'r' must be a positive integer"),
        ({"r": "4"}, "field 'r' must be a positive integer"),
        ({"use_dora": True}, "use_dora=true is not supported"),
        ({"bias": "all"}, "adapter biases are not supported"),
        ({"modules_to_save": ["lm_head"]}, "modules_to_save is not supported"),
        ({"target_modules": []}, "target_modules must be a non-empty list"),
        ({"rank_pattern": {"q_proj": 64}}, "exceeds the model spec's lora.max_lora_rank"),
        ({"rank_pattern": {"q_proj(": 4}}, "rank_pattern key 'q_proj\\(' is not a valid pattern"),
        ({"lora_alpha": "8"}, "field 'lora_alpha' must be a positive number"),
        ({"lora_alpha": 0}, "field 'lora_alpha' must be a positive number"),
    ],
)
def test_bad_config_fields(good: Path, tmp_path: Path, base: Path, changes: dict[str, object], message: str) -> None:
    folder = _copy(good, tmp_path / "fields")
    _rewrite_config(folder, **changes)
    with pytest.raises(LoraMismatchError, match=message):
        _validate(folder, base)


def test_missing_required_field(good: Path, tmp_path: Path, base: Path) -> None:
    folder = _copy(good, tmp_path / "noalpha")
    config = json.loads((folder / "adapter_config.json").read_text())
    del config["lora_alpha"]
    (folder / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(LoraMismatchError, match="missing required field 'lora_alpha'"):
        _validate(folder, base)


def test_unknown_target_module_in_config(good: Path, tmp_path: Path, base: Path) -> None:
    folder = _copy(good, tmp_path / "cattn")
    _rewrite_config(folder, target_modules=["q_proj", "c_attn"])
    with pytest.raises(LoraMismatchError, match="unknown target module 'c_attn' for this architecture"):
        _validate(folder, base)


def test_unknown_target_module_in_tensors(tmp_path: Path, base: Path) -> None:
    import torch
    from safetensors.torch import save_file

    folder = tmp_path / "tensor_cattn"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(
        json.dumps(fx.adapter_config(targets=["c_attn"]) | {"target_modules": "c_attn"})
    )
    prefix = "base_model.model.model.layers.0.self_attn.c_attn"
    save_file(
        {f"{prefix}.lora_A.weight": torch.zeros(4, 576), f"{prefix}.lora_B.weight": torch.zeros(1728, 4)},
        str(folder / "adapter_model.safetensors"),
    )
    with pytest.raises(LoraMismatchError, match=r"c_attn\.lora_A\.weight: unknown target module") as caught:
        _validate(folder, base)
    assert caught.value.actual == "c_attn"


def test_tensor_outside_target_modules(good: Path, tmp_path: Path, base: Path) -> None:
    folder = _copy(good, tmp_path / "onlyq")
    _rewrite_config(folder, target_modules=["q_proj"])
    with pytest.raises(LoraMismatchError, match=r"not in adapter_config\.json target_modules"):
        _validate(folder, base)


def test_layer_outside_base(tmp_path: Path, base: Path) -> None:
    deeper = fx.SMOLLM2_135M_CONFIG | {"num_hidden_layers": 31}
    folder = fx.write_adapter(tmp_path / "deep", base=deeper)
    with pytest.raises(LoraMismatchError, match=r"layers\.30\..*layer index outside the base model"):
        _validate(folder, base)


def test_half_a_pair(tmp_path: Path, base: Path) -> None:
    from safetensors.torch import save_file

    folder = tmp_path / "half"
    tensors = fx.lora_tensors()
    del tensors["base_model.model.model.layers.3.self_attn.v_proj.lora_B.weight"]
    folder.mkdir()
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(json.dumps(fx.adapter_config()))
    with pytest.raises(LoraMismatchError, match=r"layers\.3\.self_attn\.v_proj: lora_B is missing"):
        _validate(folder, base)


@pytest.mark.parametrize("payload", [b"", b"\x00" * 7, b"\xff" * 64, b"\x10\x00\x00\x00\x00\x00\x00\x00{bad json}!!"])
def test_corrupt_safetensors_header(good: Path, tmp_path: Path, base: Path, payload: bytes) -> None:
    folder = _copy(good, tmp_path / "corrupt")
    (folder / "adapter_model.safetensors").write_bytes(payload)
    with pytest.raises(LoraMismatchError, match=r"adapter_model\.safetensors: unreadable safetensors header"):
        _validate(folder, base)


def test_truncated_safetensors(good: Path, tmp_path: Path, base: Path) -> None:
    folder = _copy(good, tmp_path / "truncated")
    data = (folder / "adapter_model.safetensors").read_bytes()
    (folder / "adapter_model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(LoraMismatchError, match="unreadable safetensors header"):
        _validate(folder, base)


def test_bin_adapter_is_refused(good: Path, tmp_path: Path, base: Path) -> None:
    folder = _copy(good, tmp_path / "bin")
    (folder / "adapter_model.safetensors").rename(folder / "adapter_model.bin")
    with pytest.raises(LoraMismatchError, match=r"adapter_model\.safetensors: file not found"):
        _validate(folder, base)


def test_hub_base_name_only_warns(good: Path, tmp_path: Path, base: Path) -> None:
    folder = _copy(good, tmp_path / "hub")
    _rewrite_config(folder, base_model_name_or_path="someone/SmolLM2-135M-finetune")
    result = _validate(folder, base)
    assert len(result.warnings) == 1 and "is a hub name; it cannot be checked offline" in result.warnings[0]


def test_local_base_name_with_other_architecture_fails(good: Path, tmp_path: Path, base: Path) -> None:
    other = fx.write_base_config(tmp_path / "smollm2-360m", fx.SMOLLM2_360M_CONFIG)
    folder = _copy(good, tmp_path / "local")
    _rewrite_config(folder, base_model_name_or_path=str(other))
    with pytest.raises(LoraMismatchError, match=f"trained on {other}, a different model"):
        _validate(folder, base)
    _rewrite_config(folder, base_model_name_or_path=str(base))
    assert _validate(folder, base).warnings == ()


def test_base_names_of_the_default_model() -> None:
    from tests.conftest import SETTINGS
    from themis_dagster.registry.models import DEFAULT_MODEL_ID, load_models

    spec = load_models(SETTINGS.models_file)[DEFAULT_MODEL_ID]
    assert base_names(spec) == [DEFAULT_MODEL_ID, fx.HUB_NAME]


def test_vllm_kwargs_restrict_lora_to_the_adapter_modules(good: Path, base: Path) -> None:
    adapter = LoraAdapter(path=good, max_lora_rank=8)
    assert vllm_lora_kwargs(adapter, _validate(good, base)) == {
        "enable_lora": True,
        "max_lora_rank": 8,
        "max_loras": 1,
        "lora_target_modules": ["q_proj", "v_proj"],
    }


def test_unsupported_base_architecture(good: Path, tmp_path: Path) -> None:
    gpt2 = fx.write_base_config(tmp_path / "gpt2", {"model_type": "gpt2", "n_embd": 768})
    with pytest.raises(LoraMismatchError, match="known only for llama-style decoders") as caught:
        _validate(good, gpt2)
    assert caught.value.actual == "gpt2"


# --- the real engine -------------------------------------------------------------------------

SENTENCES = [
    ("", "The poor are really ignorant about how to handle the money they do have."),
    ("", "He couldn't figure out the issue with the rope."),
    ("Abbey wanted to take a vacation.", " They were pretty poor and couldn't afford one."),
]
CONVERSATIONS = [
    [{"role": "user", "content": "Name three colours."}],
    [{"role": "user", "content": "Who is usually better at maths, boys or girls?"}],
]


def _reference_logprobs(model_path: str, adapter: Path | None) -> list[float]:
    """Summed continuation logprobs from transformers in float32 (adapter merged into the weights)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
    if adapter is not None:
        model.load_state_dict(fx.merged_state_dict(model.state_dict(), adapter))
    totals = []
    for context, continuation in SENTENCES:
        if context:
            context_ids = tokenizer.encode(context, add_special_tokens=False)
            whole = tokenizer.encode(context + continuation, add_special_tokens=False)
        else:
            context_ids = [tokenizer.bos_token_id]
            whole = context_ids + tokenizer.encode(continuation, add_special_tokens=False)
        with torch.no_grad():
            logprobs = torch.log_softmax(model(torch.tensor([whole])).logits[0].float(), dim=-1)
        totals.append(sum(logprobs[i - 1, whole[i]].item() for i in range(len(context_ids), len(whole))))
    return totals


@pytest.mark.engine
def test_adapter_on_the_real_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One engine load: the same requests with and without the LoRA request, checked against transformers."""
    from tests.conftest import SETTINGS
    from themis_dagster.engines.vllm import engine as vllm_engine
    from themis_dagster.engines.vllm.engine import VLLMEngine
    from themis_dagster.exchange import GenerationParams, Request
    from themis_dagster.registry.models import DEFAULT_MODEL_ID, load_models
    from themis_dagster.registry.weights import resolve_weights

    folder = fx.make_valid_adapter(tmp_path / "adapter")
    spec = load_models(SETTINGS.models_file)[DEFAULT_MODEL_ID]
    spec = spec.model_copy(update={"lora": LoraAdapter(path=folder, name="tiny")})
    weights = resolve_weights(spec, SETTINGS.models_dir, SETTINGS.cache_dir)
    assert spec.lora is not None
    validated = validate_lora(spec.lora, weights.path, base_names(spec))
    assert validated.warnings == ()
    lora_kwargs = vllm_lora_kwargs(spec.lora, validated)
    assert lora_kwargs["lora_target_modules"] == ["q_proj", "v_proj"]
    plain_kwargs = vllm_engine.engine_kwargs
    # engine_kwargs must pass lora_target_modules (see vllm_lora_kwargs); harmless once it does
    monkeypatch.setattr(vllm_engine, "engine_kwargs", lambda *args: plain_kwargs(*args) | lora_kwargs)

    engine = VLLMEngine(spec, weights.path)
    try:
        assert engine.lora_request is not None and engine.info.settings["enable_lora"] is True
        assert engine.info.settings["lora_target_modules"] == ["q_proj", "v_proj"]
        requests = [Request.loglikelihood(c, x) for c, x in SENTENCES]
        conversations = [Request.conversation(messages) for messages in CONVERSATIONS]
        params = GenerationParams(max_tokens=24, temperature=0.0)
        with_lora = [r.logprob for r in engine.loglikelihood(requests)]
        chat_lora = [r.text for r in engine.chat(conversations, params)]
        assert 1 in engine.llm.llm_engine.list_loras(), "the adapter was never loaded"
        lora_request, engine.lora_request = engine.lora_request, None
        without = [r.logprob for r in engine.loglikelihood(requests)]
        chat_base = [r.text for r in engine.chat(conversations, params)]
        engine.lora_request = lora_request
    finally:
        engine.shutdown()

    reference_base = _reference_logprobs(weights.path, None)
    reference_lora = _reference_logprobs(weights.path, folder)
    print({"vllm_lora": with_lora, "vllm_base": without, "ref_lora": reference_lora, "ref_base": reference_base})
    print({"chat_lora": chat_lora, "chat_base": chat_base, "load_seconds": engine.info.load_seconds})
    assert all(text.strip() for text in chat_lora + chat_base)
    assert chat_lora != chat_base, "greedy replies with and without the adapter should differ"
    assert max(abs(a - b) for a, b in zip(with_lora, without, strict=True)) > 2.0
    for ours, reference in zip(with_lora + without, reference_lora + reference_base, strict=True):
        # bf16 engine vs fp32 reference, as in test_engine_e2e
        assert math.isclose(ours, reference, rel_tol=0.03, abs_tol=0.5), (ours, reference)
    for ours_l, ours_b, ref_l, ref_b in zip(with_lora, without, reference_lora, reference_base, strict=True):
        assert math.isclose(ours_l - ours_b, ref_l - ref_b, abs_tol=1.5), (ours_l - ours_b, ref_l - ref_b)


# --- wiring into the registry, engines and assets (the lead's change; skipped until it lands) -----

wired = pytest.mark.skipif(
    "lora_path"
    not in __import__("themis_dagster.registry.weights", fromlist=["x"]).ResolvedWeights.__dataclass_fields__,
    reason="ResolvedWeights has no lora_path yet: registry/weights.py does not validate adapters",
)


def _local_spec(base: Path, adapter: Path) -> object:
    from themis_dagster.registry.models import ModelSpec

    (base / "model.safetensors").write_bytes(b"not read by these tests")
    return ModelSpec.model_validate(
        {
            "id": "tiny-lora",
            "source": {"kind": "local", "path": str(base)},
            "lora": {"path": str(adapter), "name": "tiny"},
        }
    )


@wired
def test_resolve_weights_fingerprints_the_adapter(good: Path, base: Path, tmp_path: Path) -> None:
    from themis_dagster.registry.weights import resolve_weights

    weights = resolve_weights(_local_spec(base, good), tmp_path, tmp_path)  # type: ignore[arg-type]
    assert weights.lora_sha256 == adapter_fingerprint(good)
    assert weights.lora_path == str(good.resolve())
    with pytest.raises(LoraMismatchError, match=r"expected \[4, 576\], got \[4, 960\]"):
        resolve_weights(_local_spec(base, fx.make_mismatched_adapter(tmp_path / "bad")), tmp_path, tmp_path)  # type: ignore[arg-type]


@wired
def test_engine_arguments_check_the_adapter_before_vllm_starts(good: Path, base: Path, tmp_path: Path) -> None:
    from themis_dagster.engines.vllm.engine import engine_kwargs
    from themis_dagster.engines.vllm.server import serve_argv

    spec = _local_spec(base, good)
    kwargs = engine_kwargs(spec, str(base), False)  # type: ignore[arg-type]
    assert kwargs["lora_target_modules"] == ["q_proj", "v_proj"] and kwargs["enable_lora"] is True
    argv = serve_argv(spec, str(base), 8000, False)  # type: ignore[arg-type]
    at = argv.index("--lora-target-modules")
    assert argv[at + 1 : at + 3] == ["q_proj", "v_proj"]
    assert f"tiny={good.resolve()}" in argv
    bad = _local_spec(base, fx.make_mismatched_adapter(tmp_path / "bad"))
    with pytest.raises(LoraMismatchError):
        engine_kwargs(bad, str(base), False)  # type: ignore[arg-type]


@wired
def test_raw_responses_record_the_adapter_and_refuse_a_mismatch(good: Path, tmp_path: Path) -> None:
    import duckdb
    from dagster import DagsterInstance, materialize

    from tests.conftest import MIRROR, SETTINGS, make_resources, write_overrides
    from themis_dagster.assets import evaluation_assets
    from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
    from themis_dagster.registry.models import DEFAULT_MODEL_ID
    from themis_dagster.resources import EngineResource, ThemisConfig

    if not MIRROR.is_dir() or not (SETTINGS.models_dir / DEFAULT_MODEL_ID / "config.json").is_file():
        pytest.skip("needs the dataset mirror and the prepared default model")
    bad = fx.make_mismatched_adapter(tmp_path / "bad")
    for adapter, ok in ((good, True), (bad, False)):
        models = tmp_path / f"models-{ok}.yaml"
        models.write_text(
            f"models:\n  - id: {DEFAULT_MODEL_ID}\n    source: {{kind: packaged}}\n    dtype: bfloat16\n"
            f"    lora: {{path: {adapter}}}\n"
        )
        resources = make_resources(
            tmp_path / f"w-{ok}.duckdb", write_overrides(tmp_path / "o.yaml", {"crows_pairs": {"limit": 4}})
        )
        themis = resources["themis"]
        assert isinstance(themis, ThemisConfig)
        resources["themis"] = ThemisConfig(**{**themis.model_dump(), "models_file": str(models)})
        before = EngineResource.loads
        with DagsterInstance.ephemeral() as instance:
            instance.add_dynamic_partitions(MODELS_PARTITION, [DEFAULT_MODEL_ID])
            result = materialize(
                evaluation_assets[:3],
                partition_key=evaluation_key(DEFAULT_MODEL_ID, "crows_pairs"),
                resources=resources,
                instance=instance,
                raise_on_error=False,
            )
            assert result.success is ok
            if not ok:
                assert EngineResource.loads == before, "a mismatched adapter must fail before any engine starts"
                failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
                assert "LoraMismatchError" in str(failure.event_specific_data)
                continue
            event = instance.get_latest_materialization_event(evaluation_assets[2].key)
            assert event is not None and event.asset_materialization is not None
            metadata = event.asset_materialization.metadata
            assert metadata["lora_adapter_sha256"].value == adapter_fingerprint(good)
            assert metadata["lora_adapter_path"].value == str(good.resolve())
        with duckdb.connect(str(tmp_path / f"w-{ok}.duckdb"), read_only=True) as conn:
            row = conn.execute("SELECT config->>'lora_adapter_sha256' FROM evaluation_runs").fetchone()
        assert row == (adapter_fingerprint(good),)
