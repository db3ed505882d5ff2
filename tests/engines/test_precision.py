"""``dtype: auto`` resolved per device: bf16 only where the device computes it natively."""

from __future__ import annotations

from pathlib import Path

import pytest

from themis_dagster.engines.fingerprint import model_fingerprint
from themis_dagster.engines.precision import CpuFeatures, GpuInfo, config_dtype, resolve_dtype
from themis_dagster.errors import ConfigError
from themis_dagster.registry.models import parse_models
from themis_dagster.registry.weights import ResolvedWeights

AVX512_BF16 = "flags\t\t: fpu sse2 avx2 fma avx512f avx512bw avx512_vnni avx512_bf16\n"
AVX2_ONLY = "model name\t: AMD EPYC\nflags\t\t: fpu sse2 avx2 fma\n"
AMX = "flags\t\t: avx2 avx512f amx_tile amx_bf16\n"


def _cpu(tmp_path: Path, text: str, **environ: str) -> CpuFeatures:
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    return CpuFeatures.read(path, environ)


def _spec(**fields: object):  # type: ignore[no-untyped-def]
    entry = {"id": "m", "source": {"kind": "local", "path": "/m"}, **fields}
    return parse_models({"models": [entry]})["m"]


def test_auto_on_a_cpu_with_native_bf16_is_bf16(tmp_path: Path) -> None:
    choice = resolve_dtype(_spec(), None, None, _cpu(tmp_path, AVX512_BF16))
    assert (choice.dtype, choice.device) == ("bfloat16", "cpu")
    assert "avx512_bf16" in choice.reason
    assert resolve_dtype(_spec(), None, None, _cpu(tmp_path, AMX)).dtype == "bfloat16"


def test_auto_on_an_avx2_cpu_is_float32(tmp_path: Path) -> None:
    choice = resolve_dtype(_spec(), None, None, _cpu(tmp_path, AVX2_ONLY))
    assert choice.dtype == "float32"
    assert "no avx512_bf16 or amx_bf16" in choice.reason


@pytest.mark.parametrize(
    ("variable", "value", "native"),
    [
        ("ATEN_CPU_CAPABILITY", "avx2", False),
        ("ATEN_CPU_CAPABILITY", "default", False),
        ("ATEN_CPU_CAPABILITY", "avx512", True),
        ("ONEDNN_MAX_CPU_ISA", "AVX2", False),
        ("ONEDNN_MAX_CPU_ISA", "AVX512_CORE", False),
        ("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16", True),
        ("ONEDNN_MAX_CPU_ISA", "ALL", True),
    ],
)
def test_an_instruction_set_cap_below_bf16_counts_as_no_bf16(
    tmp_path: Path, variable: str, value: str, native: bool
) -> None:
    cpu = _cpu(tmp_path, AVX512_BF16, **{variable: value})
    assert cpu.native_bf16()[0] is native
    if not native:
        assert f"{variable}={value}" in cpu.native_bf16()[1]


def test_an_unreadable_cpuinfo_means_float32(tmp_path: Path) -> None:
    cpu = CpuFeatures.read(tmp_path / "absent", {})
    assert resolve_dtype(_spec(), None, None, cpu).dtype == "float32"


def test_an_explicit_dtype_always_wins(tmp_path: Path) -> None:
    for pinned in ("bfloat16", "float16", "float32"):
        choice = resolve_dtype(_spec(dtype=pinned), None, None, _cpu(tmp_path, AVX2_ONLY))
        assert choice.dtype == pinned and "declared" in choice.reason
    assert resolve_dtype(_spec(dtype="float32"), None, GpuInfo("H200", (9, 0))).dtype == "float32"


def test_auto_on_cuda_is_the_models_own_dtype(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"torch_dtype": "float16"}')
    assert resolve_dtype(_spec(), folder, GpuInfo("A100", (8, 0))).dtype == "float16"
    (folder / "config.json").write_text('{"text_config": {"dtype": "bfloat16"}}')
    assert config_dtype(folder) == "bfloat16"
    assert resolve_dtype(_spec(), folder, GpuInfo("T4", (7, 5))).dtype == "bfloat16"
    # a float32 checkpoint: bf16 where the GPU computes it (vLLM's own auto), else float16
    (folder / "config.json").write_text('{"torch_dtype": "float32"}')
    assert resolve_dtype(_spec(), folder, GpuInfo("H200", (9, 0))).dtype == "bfloat16"
    assert resolve_dtype(_spec(), folder, GpuInfo("T4", (7, 5))).dtype == "float16"


def test_a_model_answered_elsewhere_keeps_its_declaration() -> None:
    api = parse_models({"models": [{"id": "a", "source": {"kind": "api", "base_url": "http://h/v1", "model": "x"}}]})[
        "a"
    ]
    choice = resolve_dtype(api, None, GpuInfo("H200", (9, 0)))
    assert (choice.dtype, choice.device) == ("auto", "remote")


def test_an_unknown_dtype_fails_naming_the_field_and_the_allowed_values() -> None:
    with pytest.raises(ConfigError) as failed:
        parse_models({"models": [{"id": "m", "source": {"kind": "local", "path": "/m"}, "dtype": "int8"}]})
    message = str(failed.value)
    assert "models.0.dtype" in message
    for allowed in ("auto", "bfloat16", "float16", "float32"):
        assert allowed in message


def test_answers_in_one_dtype_are_never_reused_for_another() -> None:
    weights = ResolvedWeights("/m", "r", "sha")
    identity = {"engine": "VLLMResource"}
    prints = {model_fingerprint(_spec(dtype=d), weights, identity) for d in ("bfloat16", "float16", "float32")}
    assert len(prints) == 3


def test_batch_invariance_on_a_cpu_fails_naming_the_field_and_the_device(tmp_path: Path) -> None:
    from themis_dagster.engines.precision import check_batch_invariant, engine_environment

    spec = _spec(engine={"batch_invariant": True})
    with pytest.raises(ConfigError) as on_cpu:
        check_batch_invariant(spec, None, _cpu(tmp_path, AVX2_ONLY))
    assert "engine.batch_invariant" in str(on_cpu.value) and "AMD EPYC" in str(on_cpu.value)
    with pytest.raises(ConfigError) as old_gpu:
        check_batch_invariant(spec, GpuInfo("Tesla T4", (7, 5)))
    assert "engine.batch_invariant" in str(old_gpu.value) and "Tesla T4 has 7.5" in str(old_gpu.value)
    check_batch_invariant(spec, GpuInfo("H200", (9, 0)))  # supported: no error
    assert engine_environment(spec) == {"VLLM_BATCH_INVARIANT": "1"}
    assert engine_environment(_spec()) == {}


def test_batch_invariance_off_leaves_every_fingerprint_as_it_was() -> None:
    weights = ResolvedWeights("/m", "r", "sha")
    identity = {"engine": "VLLMResource"}
    off = model_fingerprint(_spec(), weights, identity)
    assert model_fingerprint(_spec(engine={"batch_invariant": False}), weights, identity) == off
    assert model_fingerprint(_spec(engine={"batch_invariant": True}), weights, identity) != off


def test_a_run_plan_with_batch_invariance_on_a_cpu_fails_before_any_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from themis_dagster.engines import precision
    from themis_dagster.settings import Settings
    from themis_dagster.tasks.loader import validate_plan

    models = tmp_path / "models.yaml"
    models.write_text("models:\n  - {id: m, source: {kind: local, path: /m}, engine: {batch_invariant: true}}\n")
    monkeypatch.setattr(precision, "this_gpu", lambda: None)
    monkeypatch.setattr("themis_dagster.tasks.loader.this_gpu", lambda: None)
    settings = Settings.from_env().model_copy(update={"models_file": models, "task_overrides_file": None})
    with pytest.raises(ConfigError, match=r"model 'm': engine.batch_invariant: .*no CUDA device"):
        validate_plan(settings, "m", ["winobias"])
