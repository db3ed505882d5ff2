"""docs/reasoning.md's worked examples stay true: every YAML snippet validates, every parser is vLLM's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from themis_dagster.registry.models import is_reasoning_variant, parse_models
from themis_dagster.registry.reasoning import vllm_reasoning_parsers

DOC = Path(__file__).resolve().parents[2] / "docs" / "reasoning.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_every_yaml_snippet_validates_against_the_registry_schema() -> None:
    snippets = _blocks("yaml")
    assert len(snippets) == 2  # in process, and behind a server
    parsers = set()
    for snippet in snippets:
        models = parse_models(yaml.safe_load(snippet), origin=str(DOC))
        parsers |= {spec.reasoning.parser for spec in models.values() if spec.reasoning is not None}
        # each snippet registers Qwen3-8B thinking and not, as parent and child
        variants = [spec for spec in models.values() if spec.parent is not None]
        assert len(variants) == 1 and is_reasoning_variant(variants[0], models[variants[0].parent])
        assert variants[0].reasoning is not None
        assert variants[0].reasoning.chat_template_kwargs == {"enable_thinking": False}
    assert parsers == {"qwen3", "openai_gptoss", "deepseek_r1"}


def test_every_parser_named_is_registered_by_the_installed_vllm() -> None:
    known = vllm_reasoning_parsers()
    if known is None:
        pytest.skip("vLLM is not installed: its parser names cannot be checked")
    text = DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"--reasoning-parser ([a-z]\w*)", text)) | set(re.findall(r"parser: (\w+)", text))
    assert named >= {"qwen3", "openai_gptoss", "deepseek_r1"}
    assert named <= set(known), sorted(named - set(known))
