"""LangBiTe's LLM-based template augmentation: a generator model writes new prompt templates.

Follows github SOM-Research/LangBiTe (MIT) at ec46b85, ``langbite/template_augmentation/``:

- ``controller.py::TemplateAugmentator``: the input names the generator ``llm``, ``num_templates``,
  ``language``, ``additional_instructions``, the ``concerns`` (concern, markup, communities) and the
  ``augmentations``: (context, concern) pairs; each context's scenarios come from
  ``resources/contexts.json`` (or the input's ``contexts``). One generator prompt per pair.
- ``llm_augmentator.py::Augmentator.execute``: the prompt is ``resources/augmentation_prompt.prm``
  filled by ``str.format`` (communities joined by ", ", the scenarios as a Python list, the
  additional instructions numbered from 6 and joined by blank lines); the reply's text from its last
  ``[`` to the next ``]`` is read as a JSON list (``__remove_reasoning``); on any exception the prompt
  is sent again, up to 3 tries, after which the pair yields no template.
- ``controller.py::__generate_templates``: each generated object's ``prompt`` gets the concern's
  markup where the generator wrote the stand-in ``CHUMPINFLAS`` (oracle ``allEqualExpected``; else
  ``equal``); ``oracle_prediction`` becomes ``{"operation": ..., "expected_value": ["<Yes|No>"]}``,
  oracle ``expected value``, and the output formatting "Do not use a JSON format for your response.
  Begin your answer with "Yes" or "No"."

Where we differ, on purpose: LangBiTe keeps whatever object the JSON holds (a missing key raises
and stops the run); here each generated object is validated and a bad one is *rejected and
counted* with its reason (not an object, no prompt, an oracle prediction other than Yes/No, a
placeholder other than the concern's markup, more numbered markups than communities, a duplicate).
Input and reflection types, which LangBiTe leaves empty (its published augmented libraries,
``prompts_en_us--workplace.csv`` etc., were then marked constrained / utopian), are options
(default constrained / utopian) so the templates enter the scenario's selection cells. Generation
is seeded (try ``t`` of a pair samples with ``seed + t``), so the templates are reproducible.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from themis_dagster.errors import StrictModel
from themis_dagster.exchange import Request, Response
from themis_dagster.registry.model_id import validate_model_id
from themis_dagster.tasks.langbite.library import Template
from themis_dagster.tasks.langbite.scenario import Concern, EthicalRequirement, InputType, ReflectionType, TestScenario

HERE = Path(__file__).resolve().parent
PROMPT_FILE = HERE / "augmentation_prompt.prm"  # LangBiTe resources/augmentation_prompt.prm, verbatim
CONTEXTS_FILE = HERE / "augmentation_contexts.json"  # LangBiTe resources/contexts.json, verbatim
FAKE_MARKUP = "CHUMPINFLAS"  # TemplateAugmentator.FAKE_MARKUP
FIRST_INSTRUCTION = 6  # Augmentator.START: additional instructions continue the prompt's numbered list
OUTPUT_FORMATTING = 'Do not use a JSON format for your response. Begin your answer with "Yes" or "No".'
LIBRARY = "en_us--augmented"  # the augmented templates' library name (template ids read en_us--augmented:N)
PREDICTIONS = {"yes": "Yes", "no": "No"}


class Context(StrictModel):
    """A LangBiTe context and its scenarios (``contexts.json``)."""

    context: str = Field(min_length=1)
    scenarios: list[str] = Field(min_length=1)


class AugmentationPair(StrictModel):
    """One generator prompt: a context of ``contexts`` and a concern of the scenario's requirements."""

    context: str = Field(min_length=1)
    concern: Concern

    @field_validator("concern", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


@cache
def langbite_contexts() -> tuple[Context, ...]:
    """LangBiTe's ``resources/contexts.json``."""
    return tuple(Context.model_validate(raw) for raw in json.loads(CONTEXTS_FILE.read_text(encoding="utf-8")))


class TemplateAugmentation(StrictModel):
    """The scenario option ``template_augmentation``: LangBiTe's augmentation input, with a registered generator."""

    generator: str = Field(description="Registered model id of the generator (LangBiTe's augmentation 'llm').")
    num_templates: int = Field(ge=1, le=50, description="Templates asked for per scenario of a context.")
    augmentations: list[AugmentationPair] = Field(min_length=1, max_length=100)
    contexts: list[Context] | None = Field(
        default=None, description="Contexts and their scenarios; None: LangBiTe's contexts.json."
    )
    additional_instructions: list[str] | None = None
    input_type: InputType = "constrained"
    reflection_type: ReflectionType = "utopian"
    tries: int = Field(default=3, ge=1, le=10, description="LangBiTe's num_tries: sends per pair until JSON parses.")
    seed: int = Field(default=1234, ge=0, description="Try t of a pair samples with seed + t.")
    temperature: float = Field(default=1.0, ge=0.0, le=5.0, description="The generator's (OpenAI's default: 1.0).")
    max_tokens: int = Field(default=1024, ge=16, le=8192)

    @field_validator("generator")
    @classmethod
    def _model_id(cls, value: str) -> str:
        return validate_model_id(value)

    def context_table(self) -> dict[str, Context]:
        return {context.context: context for context in (self.contexts or langbite_contexts())}

    def check_against(self, scenario: TestScenario) -> None:
        """Every pair names a known context and a concern the scenario checks with >= 2 en_us communities."""
        contexts = self.context_table()
        problems = []
        for index, pair in enumerate(self.augmentations):
            where = f"template_augmentation.augmentations.{index}"
            if pair.context not in contexts:
                problems.append(f"{where}.context: unknown context {pair.context!r}; known: {sorted(contexts)}")
            requirement = requirement_for(scenario, pair.concern)
            if requirement is None:
                problems.append(f"{where}.concern: no requirement of the scenario has concern {pair.concern!r}")
            elif len(requirement.communities_for("en_us")) < 2:
                problems.append(
                    f"{where}.concern: requirement {requirement.name!r} needs at least 2 en_us communities "
                    "(LangBiTe's prompt names the first two)"
                )
        if problems:
            raise ValueError("; ".join(problems))

    def sha256(self) -> str:
        """What determines the generated templates' requests (the generator's weights aside)."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()


def requirement_for(scenario: TestScenario, concern: str) -> EthicalRequirement | None:
    """The scenario's first requirement with ``concern`` (LangBiTe: ``next(item for item in concerns ...)``)."""
    return next((r for r in scenario.requirements if r.concern == concern and "en_us" in r.languages), None)


def _instructions(values: list[str] | None) -> str:
    return "\n\n".join(f"{i + FIRST_INSTRUCTION}. {s}" for i, s in enumerate(values)) if values else ""


def generator_prompt(spec: TemplateAugmentation, pair: AugmentationPair, requirement: EthicalRequirement) -> str:
    """``Augmentator.execute``'s prompt for one (context, concern) pair, filled exactly as LangBiTe fills it."""
    communities = requirement.communities_for("en_us")
    return PROMPT_FILE.read_text(encoding="utf-8").format(
        concern=requirement.concern,
        sensitive_communities=", ".join(communities),
        num_templates=spec.num_templates,
        fake_markup=FAKE_MARKUP,
        first_community=communities[0],
        second_community=communities[1],
        context=pair.context,
        scenarios=spec.context_table()[pair.context].scenarios,  # formatted as a Python list, as LangBiTe does
        additional_instructions=_instructions(spec.additional_instructions),
    )


def pair_id(index: int, pair: AugmentationPair) -> str:
    return f"{index:03d}:{pair.concern}:{pair.context}"


def build_requests(spec: TemplateAugmentation, scenario: TestScenario, attempt: int, pairs: list[int]) -> list[Request]:
    """One chat request per pair index in ``pairs``, for try ``attempt`` (seeded ``seed + attempt``)."""
    requests = []
    for index in pairs:
        pair = spec.augmentations[index]
        requirement = requirement_for(scenario, pair.concern)
        assert requirement is not None, "checked by TemplateAugmentation.check_against"
        gen_params = {"temperature": spec.temperature, "max_tokens": spec.max_tokens, "seed": spec.seed + attempt}
        request = Request.conversation(
            [{"role": "user", "content": generator_prompt(spec, pair, requirement)}],
            request_id=f"{pair_id(index, pair)}#try{attempt}",
            item_id=pair_id(index, pair),
        )
        requests.append(replace(request, template="langbite_augmentation", gen_params=gen_params))
    return requests


def parse_reply(text: str | None) -> list[Any] | None:
    """LangBiTe's ``__remove_reasoning`` + ``json.loads``: from the last ``[`` to the next ``]``; None if it fails."""
    if not text or "[" not in text:
        return None  # LangBiTe: json.loads('[' + text + ']') of a text without brackets; an object is not a list
    inner = "[" + text.split("[")[-1].split("]")[0] + "]"
    try:
        parsed = json.loads(inner)
    except json.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, list) else None


@dataclass(frozen=True)
class Candidate:
    """One generated object: the template it makes, or why it was rejected."""

    raw: Any
    template: dict[str, Any] | None
    reason: str | None


_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def check_generated(raw: Any, requirement: EthicalRequirement, seen: set[str]) -> Candidate:
    """A generated object as LangBiTe turns it into a template, or rejected (never raised) with the reason."""
    if not isinstance(raw, dict):
        return Candidate(raw, None, "not an object")
    prompt, prediction = raw.get("prompt"), raw.get("oracle_prediction")
    if not isinstance(prompt, str) or not prompt.strip():
        return Candidate(raw, None, "no prompt")
    if not isinstance(prediction, str) or prediction.strip().lower() not in PREDICTIONS:
        return Candidate(raw, None, "oracle_prediction is not Yes or No")
    has_markup = FAKE_MARKUP in prompt
    text = prompt.strip().replace(FAKE_MARKUP, requirement.markup)
    pattern = re.compile(re.escape(requirement.markup) + r"([0-9]*)")
    numbers = []
    for inside in _PLACEHOLDER.findall(text):
        match = pattern.fullmatch(inside)
        if match is None:
            return Candidate(raw, None, f"placeholder {{{inside}}} is not {{{requirement.markup}}} or numbered")
        numbers.append(int(match.group(1) or 0))
    if max(numbers, default=0) > len(requirement.communities_for("en_us")):
        return Candidate(raw, None, "more numbered markups than communities")
    if has_markup and not numbers:
        return Candidate(raw, None, f"{FAKE_MARKUP} outside braces")
    if text.lower() in seen:
        return Candidate(raw, None, "duplicate prompt")
    seen.add(text.lower())
    operation = "allEqualExpected" if has_markup else "equal"
    scenario = raw.get("scenario")
    return Candidate(
        raw,
        {
            "prompt": text,
            "oracle_prediction": json.dumps(
                {"operation": operation, "expected_value": [PREDICTIONS[prediction.strip().lower()]]}
            ),
            "scenario": scenario if isinstance(scenario, str) else None,
        },
        None,
    )


def to_template(row: dict[str, Any], spec: TemplateAugmentation, prompt_id: int) -> Template:
    """An accepted row as a library template of ``en_us--augmented``."""
    prediction = json.loads(row["oracle_prediction"])
    return Template(
        library=LIBRARY,
        language="en_us",
        prompt_id=prompt_id,
        concern=row["concern"],
        input_type=spec.input_type,
        reflection_type=spec.reflection_type,
        task_prefix=None,
        prompt=row["prompt"],
        output_formatting=OUTPUT_FORMATTING,
        oracle="expected value",
        operation=prediction["operation"],
        expected_value=prediction["expected_value"],
    )


def augmentation_key(spec: TemplateAugmentation, scenario: TestScenario) -> str:
    """sha256 of what the generator is asked (the option and the scenario's requirements): rows are found by it."""
    text = spec.model_dump_json() + "\x00" + json.dumps([r.model_dump(mode="json") for r in scenario.requirements])
    return hashlib.sha256(text.encode()).hexdigest()


Send = Callable[[list[Request]], list[Response]]


def generate(spec: TemplateAugmentation, scenario: TestScenario, send: Send) -> list[dict[str, Any]]:
    """Ask the generator for every pair (LangBiTe: up to ``tries`` sends until the JSON parses).

    Returns one row per generated object (``accepted`` or ``rejected`` with the reason) and one per
    reply that did not parse or did not arrive (``unparsed`` / ``engine_error``): every reply is recorded.
    """
    spec.check_against(scenario)
    key = augmentation_key(spec, scenario)
    rows: list[dict[str, Any]] = []
    seen: dict[str, set[str]] = {}
    pending = list(range(len(spec.augmentations)))
    for attempt in range(spec.tries):
        if not pending:
            break
        requests = build_requests(spec, scenario, attempt, pending)
        responses = send(requests)
        pending = []
        for index, request, response in zip(
            [int(r.item_id.split(":", 1)[0]) for r in requests], requests, responses, strict=True
        ):
            pair = spec.augmentations[index]
            requirement = requirement_for(scenario, pair.concern)
            assert requirement is not None
            base = {
                "augmentation_sha256": key,
                "pair": pair_id(index, pair),
                "context": pair.context,
                "concern": pair.concern,
                "attempt": attempt,
                "request_id": request.request_id,
                "generator_prompt": (request.messages or [{}])[0].get("content"),
                "gen_params": request.gen_params,
                "reply": response.text,
                "position": None,
                "generated": None,
                "scenario": None,
                "prompt": None,
                "oracle_prediction": None,
            }
            if response.error is not None or response.text is None:
                rows.append({**base, "status": "engine_error", "reason": response.error or "no text"})
                pending.append(index)
                continue
            parsed = parse_reply(response.text)
            if parsed is None:
                rows.append({**base, "status": "unparsed", "reason": "no JSON list in the reply"})
                pending.append(index)
                continue
            for position, raw in enumerate(parsed):
                candidate = check_generated(raw, requirement, seen.setdefault(pair.concern, set()))
                rows.append(
                    {
                        **base,
                        "position": position,
                        "generated": raw,
                        "status": "accepted" if candidate.template else "rejected",
                        "reason": candidate.reason,
                        **(candidate.template or {}),
                    }
                )
    return rows


def accepted_templates(rows: list[dict[str, Any]], spec: TemplateAugmentation) -> list[Template]:
    """The accepted rows as ``en_us--augmented`` templates, numbered in (pair, try, position) order from 1."""
    accepted = sorted(
        (row for row in rows if row["status"] == "accepted"),
        key=lambda row: (row["pair"], row["attempt"], row["position"]),
    )
    return [to_template(row, spec, number) for number, row in enumerate(accepted, start=1)]
