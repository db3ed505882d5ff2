"""LangBiTe test scenarios: the ethical requirements a run checks, validated before anything runs.

Field names follow LangBiTe's input JSON (``langbite/resources/input_example.json``,
``documentation/USER_GUIDE.md``; classes ``controllers/test_scenario.py::TestScenario`` and
``model/ethical_requirement.py::EthicalRequirement``). As in LangBiTe, concern, languages,
inputs and reflections are compared lower-cased and the markup upper-cased; unlike LangBiTe,
an unknown value fails here, naming the field, instead of silently selecting no template.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from themis_dagster.errors import load_yaml, validated

Concern = Literal[
    "ageism", "lgtbiqphobia", "politics", "racism", "religion", "sexism", "xenophobia", "sexism_ambiguity"
]  # fmt: skip
"""LangBiTe's ``ConcernKind`` (``langbite/model/prompt.py``): the concerns of its prompt library."""

Language = Literal["en_us", "es_es", "ca_es"]
"""The languages LangBiTe ships a prompt library for (``prompts_<language>.csv``)."""

InputType = Literal["constrained", "verbose"]
ReflectionType = Literal["observational", "utopian"]

Markup = Literal[
    "AGE", "SEXUAL_ORIENTATION", "POLITICAL_VIEW", "SKIN_COLOR", "RELIGION", "GENDER", "COUNTRY", "PRONOUN"
]
"""Placeholder roots of LangBiTe's library (its ``MARKUPS`` table in ``model/prompt.py``): ``{GENDER1}`` etc."""


class ScenarioError(ValueError):
    """A scenario file is missing or invalid; the message names the file and each bad field."""


def _lower(value: Any) -> Any:
    if isinstance(value, str):
        return value.strip().lower()
    if isinstance(value, list):
        return [item.strip().lower() if isinstance(item, str) else item for item in value]
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class EthicalRequirement(_Strict):
    """One ethical requirement: a concern, its communities per language and the pass-rate tolerance."""

    name: str = Field(min_length=1, max_length=100)
    rationale: str = ""
    languages: list[Language] = Field(min_length=1)
    tolerance: float = Field(ge=0.0, le=1.0, description="Minimum share of passed templates (LangBiTe: tolerance).")
    delta: float = Field(ge=0.0, le=1.0, description="Max spread of same-value replies, as a fraction of 100.")
    concern: Concern
    markup: Markup
    communities: dict[Language, list[str]] = Field(default_factory=dict)
    inputs: list[InputType] = Field(min_length=1)
    reflections: list[ReflectionType] = Field(min_length=1)

    @field_validator("concern", "languages", "inputs", "reflections", mode="before")
    @classmethod
    def _lower_case(cls, value: Any) -> Any:
        return _lower(value)

    @field_validator("markup", mode="before")
    @classmethod
    def _upper_case(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("communities", mode="before")
    @classmethod
    def _lower_case_keys(cls, value: Any) -> Any:
        return {_lower(key): items for key, items in value.items()} if isinstance(value, dict) else value

    @field_validator("languages", "inputs", "reflections")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"values must be unique, got {value}")
        return value

    @field_validator("communities")
    @classmethod
    def _clean_communities(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for language, names in value.items():
            if any(not name.strip() for name in names):
                raise ValueError(f"{language}: a community is empty")
            if len(set(names)) != len(names):
                raise ValueError(f"{language}: communities must be unique, got {names}")
        return value

    @model_validator(mode="after")
    def _communities_cover_languages(self) -> EthicalRequirement:
        # LangBiTe reads communities[language] whenever the dict is non-empty (KeyError otherwise).
        missing = [language for language in self.languages if self.communities and language not in self.communities]
        if missing:
            raise ValueError(f"communities: no entry for language(s) {missing} (use [] for none)")
        return self

    def communities_for(self, language: str) -> list[str]:
        return list(self.communities.get(language, []))  # type: ignore[call-overload]


class TestScenario(_Strict):
    """A LangBiTe test scenario: run settings plus the ethical requirements to check."""

    __test__ = False  # not a pytest class

    timestamp: int | None = None
    n_templates: int = Field(validation_alias=AliasChoices("nTemplates", "n_templates"), ge=1, le=10_000)
    n_retries: int = Field(default=1, validation_alias=AliasChoices("nRetries", "n_retries"), ge=1, le=100)
    temperature: float = Field(default=0.0, ge=0.0, le=5.0)
    tokens: int = Field(default=64, ge=1, le=8192)
    use_llm_eval: bool = Field(default=False, validation_alias=AliasChoices("useLLMEval", "use_llm_eval"))
    llms: list[str] = Field(default_factory=list, validation_alias=AliasChoices("llms", "aiModels"))
    requirements: list[EthicalRequirement] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> TestScenario:
        names = [requirement.name for requirement in self.requirements]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"requirements: names must be unique, repeated: {duplicates}")
        return self

    def concern_tolerances(self) -> dict[str, float]:
        """LangBiTe's ``{req.concern: req.tolerance}`` (GlobalEvaluator): the last requirement of a concern wins."""
        return {requirement.concern: requirement.tolerance for requirement in self.requirements}


def parse_scenario(raw: Any, origin: str = "scenario") -> TestScenario:
    """Validate an already-parsed scenario (dict); raises ScenarioError naming each bad field."""
    return validated(TestScenario, raw, origin, error=ScenarioError)


def load_scenario(path: Path) -> TestScenario:
    """Read a scenario from JSON (``.json``) or YAML (anything else) and validate it."""
    if not path.is_file():
        raise ScenarioError(f"scenario file not found: {path}")
    text = path.read_text(encoding="utf-8")
    try:
        raw = json.loads(text) if path.suffix.lower() == ".json" else load_yaml(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise ScenarioError(
            f"{path}: not valid {'JSON' if path.suffix.lower() == '.json' else 'YAML'}: {error}"
        ) from None
    return parse_scenario(raw, str(path))
