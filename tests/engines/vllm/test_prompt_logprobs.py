"""The batched prompt-logprobs step gives every request exactly what vLLM's per-request loop gives."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from themis_dagster.engines.vllm import prompt_logprobs

VOCAB, HIDDEN = 97, 16
MAX_ULPS = 2


def _ulps(a: torch.Tensor, b: torch.Tensor) -> int:
    """The largest distance between two float32 tensors in units in the last place (0: bit for bit)."""
    if a.numel() == 0:
        return 0
    return int((a.contiguous().view(torch.int32).long() - b.contiguous().view(torch.int32).long()).abs().max())


def _runner(prompts: dict[str, list[int]], computed: dict[str, int], asked: dict[str, int]) -> Any:
    """The attributes of a vLLM 0.32 model runner that the prompt-logprobs step reads."""
    from vllm.v1.sample.sampler import Sampler

    generator = torch.Generator().manual_seed(0)
    head = torch.randn(HIDDEN, VOCAB, generator=generator)
    ids = list(prompts)
    starts = np.zeros(len(ids) + 1, dtype=np.int64)
    return SimpleNamespace(
        num_prompt_logprobs=dict(asked),
        requests={
            req: SimpleNamespace(
                prompt_token_ids=tokens, num_computed_tokens=computed[req], in_progress_prompt_logprobs_cpu=None
            )
            for req, tokens in prompts.items()
        },
        input_batch=SimpleNamespace(req_id_to_index={req: index for index, req in enumerate(ids)}),
        query_start_loc=SimpleNamespace(np=starts),
        model=SimpleNamespace(compute_logits=lambda hidden: hidden @ head),
        model_config=SimpleNamespace(logprobs_mode="raw_logprobs"),
        sampler=Sampler(),
        device=torch.device("cpu"),
        _sync_device=lambda: None,
    )


def _step(runner: Any, scheduled: dict[str, int], function: Any) -> tuple[dict[str, Any], Any]:
    """Lay the scheduled tokens out one request after another, as vLLM's input batch does."""
    offsets = np.cumsum([0] + [scheduled.get(req, 0) for req in runner.input_batch.req_id_to_index])
    runner.query_start_loc.np[:] = offsets
    hidden = torch.randn(int(offsets[-1]), HIDDEN, generator=torch.Generator().manual_seed(1))
    return function(runner, hidden, scheduled), runner


def _compare(
    prompts: dict[str, list[int]], computed: dict[str, int], asked: dict[str, int], scheduled: dict[str, int]
) -> None:
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    # vLLM's own loop, also when an engine of this test session has installed the batched step
    loop = GPUModelRunner.__dict__.get("_themis_vllm_loop", GPUModelRunner._get_prompt_logprobs_dict)
    runner = _runner(prompts, computed, asked)
    expected, looped = _step(copy.deepcopy(runner), scheduled, loop)
    actual, batched = _step(copy.deepcopy(runner), scheduled, prompt_logprobs.batched_prompt_logprobs)
    assert expected.keys() == actual.keys()
    assert looped.num_prompt_logprobs == batched.num_prompt_logprobs  # finished requests leave the dict
    for req in prompts:
        want = looped.requests[req].in_progress_prompt_logprobs_cpu or expected.get(req)
        got = batched.requests[req].in_progress_prompt_logprobs_cpu or actual.get(req)
        if want is None:
            assert got is None
            continue
        # the rows this step wrote (the rest of an in-progress prompt is still uninitialised memory)
        rows = slice(computed[req], computed[req] + min(scheduled[req], len(prompts[req]) - 1 - computed[req]))
        assert torch.equal(want.logprob_token_ids[rows], got.logprob_token_ids[rows]), req
        # bit for bit where the CPU's GEMM rounds a row the same whatever the batch's shape; some CPUs' kernels
        # round rows of a 5-row chunk and of a lone request differently: at most 2 float32 ulp (1.9e-6 nats here)
        assert _ulps(want.logprobs[rows], got.logprobs[rows]) <= MAX_ULPS, req
        assert torch.equal(want.selected_token_ranks[rows], got.selected_token_ranks[rows]), req


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prompt_logprobs, "CHUNK_ROWS", 5)  # several chunks, split across requests
    monkeypatch.setattr(prompt_logprobs, "SOFTMAX_ROWS", 2)


def test_whole_prompts_in_one_step() -> None:
    prompts = {"a": [1, 5, 9, 3], "b": [1, 7, 2, 8, 8, 4, 6], "c": [1, 2]}
    computed = dict.fromkeys(prompts, 0)
    _compare(prompts, computed, {"a": 0, "b": 0, "c": 0}, {req: len(tokens) for req, tokens in prompts.items()})


def test_mixed_numbers_of_logprobs_and_a_request_without_them() -> None:
    prompts = {"a": [1, 5, 9, 3, 11], "b": [1, 7, 2, 8], "c": [1, 4, 4, 4, 4, 4]}
    computed = dict.fromkeys(prompts, 0)
    # "b" asks for none (it is a generation request in the same step)
    _compare(prompts, computed, {"a": 3, "c": 0}, {req: len(tokens) for req, tokens in prompts.items()})


def test_chunked_prefill_and_a_preempted_request() -> None:
    prompts = {"a": list(range(1, 13)), "b": [1, 7, 2, 8, 9], "c": [1, 2, 3]}
    # "a" is half prefilled and gets its next 4 tokens; "b" gets its last tokens; "c" is not scheduled
    computed = {"a": 5, "b": 2, "c": 0}
    _compare(prompts, computed, {"a": 0, "b": 2, "c": 0}, {"a": 4, "b": 3})


def test_installed_only_on_the_tested_release(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    original = GPUModelRunner._get_prompt_logprobs_dict
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.99.0")
    assert prompt_logprobs.install() is False
    assert GPUModelRunner._get_prompt_logprobs_dict is original


def test_switched_on_by_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(prompt_logprobs.ENV_SWITCH, raising=False)
    assert not prompt_logprobs.enabled()
    monkeypatch.setenv(prompt_logprobs.ENV_SWITCH, "1")
    assert prompt_logprobs.enabled()
