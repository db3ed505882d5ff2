"""Thinking on and thinking off as parent and child: a reasoning variant inherits all but its ``reasoning``."""

from __future__ import annotations

from pathlib import Path

import pytest

from themis_dagster.engines.fingerprint import model_fingerprint
from themis_dagster.errors import ConfigError
from themis_dagster.registry.models import is_reasoning_variant, parse_models
from themis_dagster.registry.weights import ResolvedWeights

THINKING = {
    "id": "qwen3-8b",
    "source": {"kind": "hub", "repo_id": "Qwen/Qwen3-8B", "revision": "b968826"},
    "dtype": "bfloat16",
    "max_model_len": 8192,
    "reasoning": {"parser": "qwen3", "budget_tokens": 4096},
}
NOT_THINKING = {
    "id": "qwen3-8b-no-think",
    "parent": "qwen3-8b",
    "reasoning": {"parser": "qwen3", "chat_template_kwargs": {"enable_thinking": False}, "budget_tokens": 0},
}


def test_thinking_off_inherits_everything_but_its_reasoning() -> None:
    models = parse_models({"models": [THINKING, NOT_THINKING]})
    on, off = models["qwen3-8b"], models["qwen3-8b-no-think"]
    assert off.source == on.source and off.max_model_len == 8192 and off.dtype == "bfloat16"
    assert off.parent == "qwen3-8b" and off.reasoning is not None
    assert off.reasoning.chat_template_kwargs == {"enable_thinking": False} and off.reasoning.budget_tokens == 0
    assert is_reasoning_variant(off, on) and not is_reasoning_variant(on, off)
    # the other way round: thinking off registered first, thinking on its child
    flipped = parse_models(
        {
            "models": [
                THINKING | {"reasoning": NOT_THINKING["reasoning"]},
                NOT_THINKING | {"reasoning": THINKING["reasoning"]},
            ]
        }
    )
    assert is_reasoning_variant(flipped["qwen3-8b-no-think"], flipped["qwen3-8b"])


def test_the_variants_answer_apart(tmp_path: Path) -> None:
    """Each variant has its own fingerprint: no reply of one is ever read from the other's cache."""
    models = parse_models({"models": [THINKING, NOT_THINKING]})
    weights = ResolvedWeights(str(tmp_path), "b968826", "ab" * 32)
    identity = {"engine": "fake"}
    assert model_fingerprint(models["qwen3-8b"], weights, identity) != model_fingerprint(
        models["qwen3-8b-no-think"], weights, identity
    )


def test_a_mitigation_of_the_thinking_off_variant_keeps_its_reasoning() -> None:
    fair = {"id": "qwen3-8b-no-think-fair", "parent": "qwen3-8b-no-think",
            "mitigation": {"kind": "system_prompt", "text": "Be fair."}}  # fmt: skip
    models = parse_models({"models": [THINKING, NOT_THINKING, fair]})
    assert models["qwen3-8b-no-think-fair"].reasoning == models["qwen3-8b-no-think"].reasoning
    assert models["qwen3-8b-no-think-fair"].source == models["qwen3-8b"].source


def test_a_checkpoint_child_is_no_reasoning_variant() -> None:
    child = THINKING | {"id": "qwen3-8b-step-2", "parent": "qwen3-8b", "source": {"kind": "local", "path": "/ckpt"}}
    models = parse_models({"models": [THINKING, child]})
    assert not is_reasoning_variant(models["qwen3-8b-step-2"], models["qwen3-8b"])


def test_a_bad_reasoning_variant_fails_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"models\.1\.reasoning\.parser") as raised:
        parse_models({"models": [THINKING, NOT_THINKING | {"reasoning": {"parser": "qwen99", "budget_tokens": 0}}]})
    assert "qwen3" in str(raised.value)  # vLLM's parsers are listed
    with pytest.raises(ConfigError, match="budget_tokens"):
        parse_models({"models": [THINKING, NOT_THINKING | {"reasoning": {"parser": "qwen3", "budget_tokens": 9000}}]})
