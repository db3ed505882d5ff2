"""``themis doctor`` says what this machine offers and which line is wrong; it never crashes on what is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from themis_dagster import cli
from themis_dagster.cli import doctor
from themis_dagster.engines import precision
from themis_dagster.engines.precision import CpuFeatures

AVX2_ONLY = CpuFeatures("AMD EPYC", "x86_64", frozenset({"avx2", "fma"}))
AVX512_BF16 = CpuFeatures("Intel Xeon", "x86_64", frozenset({"avx2", "avx512f", "avx512_bf16"}))


@pytest.fixture
def bare_machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No GPU, no Chromium, no PostgreSQL, no warehouse yet; an AVX2-only CPU."""
    monkeypatch.setattr(precision, "this_gpu", lambda: None)
    monkeypatch.setattr(precision, "this_cpu", lambda: AVX2_ONLY)
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None)
    monkeypatch.setattr(doctor, "postgres_binaries", lambda: None)
    monkeypatch.setenv("THEMIS_WAREHOUSE", str(tmp_path / "absent.duckdb"))
    monkeypatch.setenv("THEMIS_DISCOVERED_MODELS_FILE", str(tmp_path / "discovered.yaml"))
    return tmp_path


def test_a_bare_cpu_machine_is_described_not_failed(bare_machine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "AMD EPYC (x86_64): avx2 fma" in out
    assert "not native: the CPU has no avx512_bf16 or amx_bf16" in out
    assert "GPU" in out and "models run on the CPU" in out
    assert "Chromium" in out and "missing: the browser tests need Debian's chromium" in out
    assert "PostgreSQL" in out and "missing: the cluster tests and DuckLake need" in out
    assert "not created yet" in out
    # the default model declares dtype: auto: float32 on this CPU, and why
    assert "model smollm2-135m-instruct  float32 on cpu (auto on CPU: the CPU has no avx512_bf16" in out
    assert "problem" not in out


def test_a_pinned_bf16_on_a_cpu_that_emulates_it_is_the_line_that_is_wrong(
    bare_machine: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    models = bare_machine / "models.yaml"
    models.write_text("models:\n  - {id: pinned, source: {kind: local, path: /nowhere}, dtype: bfloat16}\n")
    monkeypatch.setenv("THEMIS_MODELS_FILE", str(models))
    assert cli.main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "1 problem(s):" in out
    assert "!! model pinned: bfloat16 on cpu (declared in the models file (dtype:)); this CPU emulates bf16" in out
    monkeypatch.setattr(precision, "this_cpu", lambda: AVX512_BF16)  # where bf16 is native the pin is fine
    assert cli.main(["doctor"]) == 0


def test_an_invalid_models_file_is_a_wrong_line_not_a_crash(
    bare_machine: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    models = bare_machine / "models.yaml"
    models.write_text("models:\n  - {id: m, source: {kind: local, path: /m}, dtype: int8}\n")
    monkeypatch.setenv("THEMIS_MODELS_FILE", str(models))
    assert cli.main(["doctor"]) == 1
    assert "models.0.dtype" in capsys.readouterr().out
