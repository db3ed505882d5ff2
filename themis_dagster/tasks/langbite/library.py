"""LangBiTe's prompt library: loading the TAB-separated files, choosing templates, filling communities.

Sources (github SOM-Research/LangBiTe, MIT):
- ``langbite/io_managers/prompt_io_manager.py``: ``pandas.read_csv(path, sep='\\t')``, one prompt per row
  (prompt_id, concern, input_type, reflection_type, task_prefix, prompt, output_formatting, oracle,
  oracle_prediction), tagged with the file's language.
- ``langbite/controllers/test_scenario.py::__select_prompts``: per requirement, language, input type and
  reflection type, the templates with that concern, input type, reflection type and language, of which
  ``random.sample(templates, nTemplates)`` when there are more than ``nTemplates``.
- ``langbite/model/prompt.py::__replace_markups``: the distinct markups ``{MARKUP[0-9]*}`` of a template
  are filled with every ordered combination (``itertools.permutations``) of the language's communities;
  a template with no communities is used as written.

One correction of the library: the Catalan file writes the religion markup in Catalan in templates
188-191 ("Un {RELIGION1} i un {RELIGION2} ... És el {RELIGIÓ1} el terrorista?"), where the Spanish and
English ones repeat ``{RELIGION1}``. ``{RELIGION[0-9]*}`` does not match it, so LangBiTe sends the
prompt with ``{RELIGIÓ1}`` in it; here it is read as the markup it translates (``TRANSLATED_MARKUPS``),
and any placeholder still left after filling, in whatever script, fails (``instantiate``).
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from dataclasses import dataclass
from itertools import permutations
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import Field, field_validator, model_validator

from themis_dagster.errors import StrictModel, validated
from themis_dagster.tasks.langbite.scenario import (
    Concern,
    EthicalRequirement,
    InputType,
    Language,
    ReflectionType,
    TestScenario,
)
from themis_dagster.tasks.placeholders import holes

Domain = Literal["workplace", "education", "healthcare"]
ExpectedOperation = Literal["equal", "different", "notIncludesAny", "allEqualExpected"]
SameOperation = Literal["allSameValue"]
SelectionScope = Literal["requirement", "cell"]

TRANSLATED_MARKUPS = {"RELIGIÓ": "RELIGION"}
"""Markups a library translated with its text, read as the markup they translate (module docstring)."""
_TRANSLATED = re.compile(r"\{(" + "|".join(map(re.escape, TRANSLATED_MARKUPS)) + r")([0-9]*)\}")


class LibraryError(ValueError):
    """A prompt-library row is invalid or a template cannot be instantiated; the message says where."""


def library_file(language: str, domain: str | None = None) -> str:
    """The dataset file name of a language's library (``prompts_en_us.csv``, ``prompts_en_us--workplace.csv``)."""
    return f"prompts_{language}.csv" if domain is None else f"prompts_{language}--{domain}.csv"


class Template(StrictModel):
    """One row of the prompt library, with its oracle validated (an unknown oracle fails here)."""

    library: str = Field(description="File stem without 'prompts_': en_us, en_us--workplace.")
    language: Language
    prompt_id: int = Field(ge=0)
    concern: Concern
    input_type: InputType
    reflection_type: ReflectionType
    task_prefix: str | None = None
    prompt: str = Field(min_length=1)
    output_formatting: str | None = None
    oracle: Literal["expected value", "same value"]
    operation: ExpectedOperation | SameOperation
    expected_value: list[str] | None = None
    key: str | None = None

    @field_validator("concern", "input_type", "reflection_type", "oracle", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _oracle_matches_prediction(self) -> Template:
        if self.oracle == "expected value":
            if self.operation == "allSameValue":
                raise ValueError("operation allSameValue needs oracle 'same value'")
            if not self.expected_value:
                raise ValueError("oracle 'expected value' needs a non-empty expected_value list")
        else:
            if self.operation != "allSameValue":
                raise ValueError(f"oracle 'same value' has no operation {self.operation!r} (only allSameValue)")
            if not self.key:
                raise ValueError("oracle 'same value' needs a key")
        return self

    @property
    def template_id(self) -> str:
        return f"{self.library}:{self.prompt_id}"


def _cell(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return None
    text = str(value)
    return text if text.strip() else None


def untranslated(text: str) -> str:
    """``text`` with each translated markup written as the markup it translates (``{RELIGIÓ1}`` -> ``{RELIGION1}``)."""
    return _TRANSLATED.sub(lambda found: "{" + TRANSLATED_MARKUPS[found.group(1)] + found.group(2) + "}", text)


def read_library(path: Path, language: str, library: str) -> list[Template]:
    """Parse one library file as LangBiTe does (TAB-separated, empty cells None), validating each row."""
    frame = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    columns = ["prompt_id", "concern", "input_type", "reflection_type", "task_prefix", "prompt",
               "output_formatting", "oracle", "oracle_prediction"]  # fmt: skip
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise LibraryError(f"{path.name}: missing column(s) {missing}")
    templates = []
    for number, row in enumerate(frame[columns].to_dict("records"), start=2):
        origin = f"{path.name} line {number} (prompt_id={row['prompt_id']})"
        try:
            prediction = json.loads(row["oracle_prediction"])
        except json.JSONDecodeError as error:
            raise LibraryError(f"{origin}: oracle_prediction is not JSON: {error}") from None
        if not isinstance(prediction, dict):
            raise LibraryError(f"{origin}: oracle_prediction must be a JSON object")
        raw = {
            "library": library, "language": language, "prompt_id": row["prompt_id"], "concern": row["concern"],
            "input_type": row["input_type"], "reflection_type": row["reflection_type"],
            "task_prefix": _cell(row["task_prefix"]), "prompt": untranslated(row["prompt"]),
            "output_formatting": _cell(row["output_formatting"]), "oracle": row["oracle"],
            "operation": prediction.get("operation"), "expected_value": prediction.get("expected_value"),
            "key": prediction.get("key"),
        }  # fmt: skip
        templates.append(validated(Template, raw, origin, error=LibraryError))
    duplicates = sorted(prompt_id for prompt_id, n in Counter(t.prompt_id for t in templates).items() if n > 1)
    if duplicates:
        raise LibraryError(f"{path.name}: prompt_id must be unique, repeated: {duplicates}")
    return templates


def load_library(files: dict[str, Path], languages: list[str], domains: tuple[str, ...] = ()) -> list[Template]:
    """The templates of the given languages; ``domains`` adds LangBiTe's en_us domain files."""
    templates: list[Template] = []
    for language in languages:
        names = [(library_file(language), language)]
        if language == "en_us":
            names += [(library_file(language, domain), f"{language}--{domain}") for domain in domains]
        for name, library in names:
            if name not in files:
                raise LibraryError(f"prompt library file {name} not provided (known: {sorted(files)})")
            templates.extend(read_library(files[name], language, library))
    return templates


@dataclass(frozen=True)
class Selection:
    """A template chosen for one requirement and language."""

    requirement: EthicalRequirement
    language: str
    template: Template


def _matches(
    template: Template, requirement: EthicalRequirement, language: str, input_type: str, reflection: str
) -> bool:
    return (
        template.concern == requirement.concern
        and template.language == language
        and template.input_type == input_type
        and template.reflection_type == reflection
    )


def _sample(candidates: list[Template], n: int, seed_key: str) -> list[Template]:
    """At most ``n`` templates, seeded by a string key so each requirement's draw is independent of the others."""
    if len(candidates) <= n:
        return candidates
    chosen = set(random.Random(seed_key).sample(range(len(candidates)), n))  # noqa: S311 - reproducible sampling
    return [template for index, template in enumerate(candidates) if index in chosen]


def select_templates(
    scenario: TestScenario, library: list[Template], seed: int, scope: SelectionScope = "cell"
) -> list[Selection]:
    """Choose templates per requirement (LangBiTe ``__select_prompts``), seeded by ``seed``.

    ``scope="cell"`` samples ``nTemplates`` per (requirement, language, input type, reflection type), as
    LangBiTe's code does; ``scope="requirement"`` caps the requirement's whole selection at ``nTemplates``,
    as LangBiTe's user guide describes ("the maximum number of prompt templates to collect from the
    library, for each ethical requirement").
    """
    ordered = sorted(library, key=lambda t: (t.library, t.prompt_id))
    selections: list[Selection] = []
    for requirement in scenario.requirements:
        cells: list[tuple[str, list[Template]]] = []
        for language in requirement.languages:
            for input_type in requirement.inputs:
                for reflection in requirement.reflections:
                    found = [t for t in ordered if _matches(t, requirement, language, input_type, reflection)]
                    cells.append((f"{seed}|{requirement.name}|{language}|{input_type}|{reflection}", found))
        if scope == "cell":
            chosen = [t for key, found in cells for t in _sample(found, scenario.n_templates, key)]
        else:
            pool = [t for _, found in cells for t in found]
            chosen = _sample(pool, scenario.n_templates, f"{seed}|{requirement.name}")
        selections.extend(Selection(requirement, t.language, t) for t in chosen)
    return selections


@dataclass(frozen=True)
class Instance:
    """A template with its placeholders filled: the text and the communities put in, in markup order."""

    text: str
    communities: tuple[str, ...]


def _markup_order(markup: str) -> tuple[int, str]:
    digits = re.sub(r"\D", "", markup)
    return (int(digits) if digits else 0, markup)


def instantiate(template: Template, requirement: EthicalRequirement, language: str) -> list[Instance]:
    """Every ordered combination of distinct communities in the template's markups (LangBiTe ``instantiate``).

    Markups are filled in numeric order ({X1}, {X2}, ...), so the instances are reproducible (LangBiTe
    iterates a ``set``). A placeholder left unfilled, because the language has no or too few communities
    or it names another markup, raises LibraryError naming the placeholder, the template and the requirement.
    """
    pattern = re.compile(r"\{" + re.escape(requirement.markup) + r"[0-9]*?\}")
    markups = sorted(set(pattern.findall(template.prompt)), key=_markup_order)
    communities = requirement.communities_for(language)
    if markups and len(communities) < len(markups):
        have = f"{len(communities)} communit{'y' if len(communities) == 1 else 'ies'}"
        raise LibraryError(
            f"placeholder {markups[len(communities)]} of template {template.template_id} has no community: "
            f"requirement {requirement.name!r} gives {have} for {language} and the template has "
            f"{len(markups)} markup(s) {markups}"
        )
    if markups:
        instances = []
        for combo in permutations(communities, len(markups)):
            text = template.prompt
            for markup, community in zip(markups, combo, strict=True):
                text = text.replace(markup, community)
            instances.append(Instance(text, tuple(combo)))
    else:
        instances = [Instance(template.prompt, ())]
    leftover = sorted({found for instance in instances for found in holes(instance.text, ("{X}",))})
    if leftover:
        raise LibraryError(
            f"placeholder {leftover[0]} of template {template.template_id} has no community: requirement "
            f"{requirement.name!r} fills only {{{requirement.markup}...}} markups (left: {leftover})"
        )
    return instances
