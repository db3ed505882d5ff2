"""Prefix reuse for loglikelihoods: which cache hits are safe, and the block size vLLM gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from themis_dagster.engines.vllm import engine as vllm_engine
from themis_dagster.engines.vllm.prefix_reuse import CPU_DEFAULT_BLOCK_SIZE, covers_continuation, may_read_cache
from themis_dagster.engines.vllm.server import serve_argv
from themis_dagster.registry.models import ModelSpec


@pytest.mark.parametrize(
    ("cached", "context_len", "expected"),
    [
        (None, 40, True),  # vLLM reported nothing: nothing read from the cache
        (0, 1, True),  # an empty context (prefix token only), computed in full
        (32, 40, True),  # one 32-token block inside a 40-token context
        (32, 33, True),  # the last context token is position 32: its logprob is not needed
        (32, 32, False),  # position 32 is the first continuation token; its logprob comes from row 31
        (64, 40, False),  # the hit reached into the continuation
        (32, 0, False),  # an empty context: every position but the first is scored
    ],
)
def test_cache_hit_must_stay_inside_the_context(cached: int | None, context_len: int, expected: bool) -> None:
    assert covers_continuation(cached, context_len) is expected


def _spec(**engine: object) -> ModelSpec:
    return ModelSpec.model_validate({"id": "m", "source": {"kind": "packaged"}, "engine": engine})


@pytest.mark.parametrize(
    ("engine", "on_gpu", "expected"),
    [
        ({}, False, CPU_DEFAULT_BLOCK_SIZE),  # CPU: 32-token blocks
        ({}, True, None),  # GPU: vLLM's default
        ({"block_size": 128}, False, 128),
        ({"block_size": 16}, True, 16),
    ],
)
def test_engine_arguments_carry_the_block_size(
    tmp_path: Path, engine: dict[str, object], on_gpu: bool, expected: int | None
) -> None:
    kwargs = vllm_engine.engine_kwargs(_spec(**engine), str(tmp_path), on_gpu)
    assert kwargs.get("block_size") == expected
    argv = serve_argv(_spec(**engine), str(tmp_path), 8000, on_gpu)  # the server mode gets the same
    if expected is None:
        assert "--block-size" not in argv
    else:
        assert argv[argv.index("--block-size") + 1] == str(expected)


def test_block_size_is_validated_by_the_models_file() -> None:
    with pytest.raises(ValueError, match="block_size"):
        _spec(block_size=0)


def test_reads_the_cache_only_where_no_other_request_shares_a_block_past_the_context() -> None:
    # blocks of 4 tokens; contexts of 6 tokens (ids 1-6 shared by the first three requests)
    context = [1, 2, 3, 4, 5, 6]
    prompts = [
        [*context, 7, 8],  # shares 8 with the third, but never its last token: 7 -> one block (4) <= 5
        [*context, 9, 10],  # shares 6: one block (4) <= 5
        [*context, 7, 8, 11, 12],  # shares 8 with the first: two blocks (8) > 5, unsafe
        [20, 21, 22, 23, 24, 25, 26],  # shares nothing
    ]
    context_lens = [6, 6, 6, 2]
    assert may_read_cache(prompts, context_lens, block_size=4) == [True, True, False, True]
    # the same batch with 2-token blocks: the first two could be hit at 6 > 5
    assert may_read_cache(prompts, context_lens, block_size=2) == [False, False, False, True]
