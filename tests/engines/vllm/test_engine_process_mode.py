"""Where vLLM's engine core runs: in the calling process on a CPU host, spawned on GPUs."""

from __future__ import annotations

import pytest

from themis_dagster.engines.vllm import engine as vllm_engine
from themis_dagster.registry.models import ModelSpec


def _spec(**engine: object) -> ModelSpec:
    return ModelSpec.model_validate({"id": "m", "source": {"kind": "local", "path": "/models/m"}, "engine": engine})


@pytest.mark.parametrize(
    ("engine", "on_gpu", "expected"),
    [
        ({}, False, True),  # CPU, one worker: no engine-core or worker process to start
        ({}, True, False),  # GPU: the spawned core overlaps scheduling with the model
        ({"tensor_parallel_size": 2}, False, False),  # several workers need vLLM's processes
        ({"in_process": False}, False, False),  # the models file decides when it says so
        ({"in_process": True}, True, True),
    ],
)
def test_in_process_by_default_only_on_a_single_cpu_worker(
    engine: dict[str, object], on_gpu: bool, expected: bool
) -> None:
    assert vllm_engine.runs_in_process(_spec(**engine), on_gpu) is expected


def test_process_mode_goes_to_vllm_through_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    vllm_engine.configure_process_mode(True)
    assert vllm_engine.os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    vllm_engine.configure_process_mode(True)  # a value the user exported wins
    assert vllm_engine.os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"


def test_in_process_is_validated_by_the_models_file() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=r"engine\.in_process"):
        _spec(in_process="sometimes")
