"""Reasoning models without vLLM: the registry's checks, fingerprints, storage, the OpenAI field, the guard.

The split itself (vLLM's parsers) and the fake engine's replies in every format are in
tests/test_reasoning_split.py, which imports vLLM; the real engine in tests/test_reasoning_engine.py.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from themis_dagster.engines.fingerprint import model_fingerprint
from themis_dagster.errors import ConfigError
from themis_dagster.registry.models import ModelSpec, parse_models
from themis_dagster.registry.reasoning import check_reasoning_budget, vllm_reasoning_parsers
from themis_dagster.registry.weights import ResolvedWeights

LOCAL = {"kind": "local", "path": "/tmp/thinker"}


def _spec(**fields: Any) -> ModelSpec:
    return parse_models({"models": [{"id": "thinker", "source": LOCAL} | fields]}, origin="models.yaml")["thinker"]


# -- the registry -------------------------------------------------------------------------------


def test_vllm_parser_names_are_read_without_importing_vllm() -> None:
    names = vllm_reasoning_parsers()
    assert names is not None and {"qwen3", "deepseek_r1", "openai_gptoss"} <= set(names)
    assert list(names) == sorted(names)
    # equal to ReasoningParserManager.list_registered(): tests/test_reasoning_split.py, which imports vLLM


def test_a_reasoning_declaration_is_parsed() -> None:
    spec = _spec(reasoning={"parser": "qwen3", "chat_template_kwargs": {"enable_thinking": False}, "budget_tokens": 0})
    assert spec.reasoning is not None
    assert spec.reasoning.parser == "qwen3"
    assert spec.reasoning.chat_template_kwargs == {"enable_thinking": False}


def test_an_unknown_parser_names_the_field_and_lists_vllms_parsers() -> None:
    with pytest.raises(ConfigError) as raised:
        _spec(reasoning={"parser": "my_regex", "budget_tokens": 10})
    message = str(raised.value)
    assert "models.yaml: models.0.reasoning.parser" in message
    assert "'my_regex'" in message
    for name in ("deepseek_r1", "openai_gptoss", "qwen3"):
        assert name in message


@pytest.mark.parametrize(
    ("reasoning", "field"),
    [
        ({"parser": "qwen3"}, "models.0.reasoning.budget_tokens"),
        ({"parser": "qwen3", "budget_tokens": -1}, "models.0.reasoning.budget_tokens"),
        ({"parser": "qwen3", "budget_tokens": 1, "regex": "<think>"}, "models.0.reasoning.regex"),
        ({"parser": "", "budget_tokens": 1}, "models.0.reasoning.parser"),
    ],
)
def test_bad_reasoning_fields_are_named(reasoning: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=f"models.yaml: {field}"):
        _spec(reasoning=reasoning)


def test_a_budget_that_fills_the_context_window_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"budget_tokens \(2048\) leaves no room .* max_model_len \(2048\)"):
        _spec(max_model_len=2048, reasoning={"parser": "qwen3", "budget_tokens": 2048})


def test_budget_plus_largest_answer_budget_over_max_model_len_names_both_numbers() -> None:
    spec = _spec(max_model_len=1024, reasoning={"parser": "deepseek_r1", "budget_tokens": 1000})
    check_reasoning_budget(spec, 24, "iat")  # 1024: fits exactly
    with pytest.raises(ConfigError) as raised:
        check_reasoning_budget(spec, 64, "bbq_generate")
    message = str(raised.value)
    assert "(1000)" in message and "(64" in message and "max_model_len (1024)" in message
    assert "thinker" in message and "bbq_generate" in message
    check_reasoning_budget(_spec(max_model_len=1024), 5000, "no reasoning: not checked")


# -- fingerprints -------------------------------------------------------------------------------

WEIGHTS = ResolvedWeights(path="x", revision="x", weights_sha256="sha-w", lora_path=None, lora_sha256=None)
ENGINE = {"engine": "VLLMResource"}

# model_fingerprint of these declarations on main before reasoning existed (must never change)
BEFORE_REASONING = {
    "smollm2-135m-instruct": "14eebf3020ad175b0836b5c2b36bb7c34355650c620de54009779fbd88860023",
    "api": "2266a9925544b38adb701f8f5a971bbe31fbaa8e9767ab2ea46aec29ba070bb0",
    "var": "4bd9f51d086436cc758ef5fa42becb2c32dd6dbbc3034956b0954aa147cb7aa5",
}


def _registry() -> dict[str, ModelSpec]:
    return parse_models(
        {
            "models": [
                {
                    "id": "smollm2-135m-instruct",
                    "source": {"kind": "packaged"},
                    "dtype": "bfloat16",
                    "max_model_len": 4096,
                    "engine": {"seed": 1234},
                },
                {"id": "api", "source": {"kind": "api", "base_url": "http://x/v1", "model": "m"}},
                {"id": "var", "parent": "smollm2-135m-instruct",
                 "mitigation": {"kind": "system_prompt", "text": "be fair"}},
            ]
        }
    )  # fmt: skip


def test_fingerprints_without_reasoning_are_bit_identical_to_before() -> None:
    for model_id, spec in _registry().items():
        assert model_fingerprint(spec, WEIGHTS, ENGINE) == BEFORE_REASONING[model_id], model_id


def test_every_reasoning_setting_changes_the_fingerprint() -> None:
    base = _registry()["smollm2-135m-instruct"]
    plain = model_fingerprint(base, WEIGHTS, ENGINE)
    settings = [
        {"parser": "qwen3", "budget_tokens": 256},
        {"parser": "deepseek_r1", "budget_tokens": 256},
        {"parser": "qwen3", "budget_tokens": 512},
        {"parser": "qwen3", "budget_tokens": 256, "chat_template_kwargs": {"enable_thinking": False}},
    ]
    prints = {
        model_fingerprint(base.model_copy(update={"reasoning": _spec(reasoning=r).reasoning}), WEIGHTS, ENGINE)
        for r in settings
    }
    assert len(prints) == len(settings) and plain not in prints


def test_weights_fields_are_what_the_golden_values_assumed() -> None:
    assert [f.name for f in dataclasses.fields(ResolvedWeights)] == [
        "path", "revision", "weights_sha256", "lora_path", "lora_sha256"
    ]  # fmt: skip
