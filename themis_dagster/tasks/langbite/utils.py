"""The langbite task: LangBiTe's generate / execute / evaluate workflow as the asset chain's functions.

- ``load_items``: one item per chosen template and requirement (a *template instance group*): the
  template with every ordered combination of the requirement's communities filled in (library.py).
- ``build_requests``: one chat request per instance, worded as LangBiTe words it (langbite_templates.yaml),
  with the scenario's ``temperature`` and ``tokens``.
- ``judge``: one judgment per group: the template's oracle on the group's cleaned replies (oracles.py);
  Passed / Failed, or Error (engine error, no or invalid JSON for a same-value oracle) with parsed=False.
- ``SECOND_OPINION`` (the task's ``SecondOpinion``, off by default): LangBiTe's ``useLLMEval``: a
  second registered model (``judge_model``) is asked "equals?" about each evaluated reply the
  expected-value regex did not match, and "is it the opposite?" about a failed notIncludesAny
  reply (second_opinion.py). The judgments
  stage asks it when ``judge_model`` is set; it does nothing unless ``llm_judge`` or the
  scenario's ``useLLMEval`` is true.
- ``compute_metrics``: pass rate, error rate and tolerance verdicts (verdicts.py).

- ``RESEND``: LangBiTe's ``nRetries`` (``controllers/test_execution.py::__query_model``): a prompt is
  executed and evaluated in one ``try``, and *any* exception, an oracle failure (a same-value reply
  without JSON, invalid JSON, a missing key) included, re-sends the whole prompt (every instance) until
  ``nRetries`` attempts are spent; then it is recorded as Error. Engine errors are re-sent per request by
  the engine's retries (``Params.retries``); groups whose replies all arrived but the oracle could not
  judge are re-sent here, whole, for ``nRetries - 1`` more rounds.

Source: github SOM-Research/LangBiTe (MIT), ``langbite/`` package; see each module for the file.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from themis_dagster.errors import load_yaml
from themis_dagster.refusals import mark_refusal, replies_by
from themis_dagster.settings import PROJECT_ROOT
from themis_dagster.tasks.langbite import augmentation, oracles, second_opinion
from themis_dagster.tasks.langbite.library import (
    Domain,
    LibraryError,
    SelectionScope,
    Template,
    instantiate,
    load_library,
    select_templates,
)
from themis_dagster.tasks.langbite.scenario import TestScenario, load_scenario
from themis_dagster.tasks.langbite.verdicts import evaluation_of, metric_rows, requirement_key
from themis_dagster.tasks.measures import Ratio, mean_of, single
from themis_dagster.tasks.rendering import TemplatedChat, compile_template
from themis_dagster.tasks.spec import (
    Item,
    Judgment,
    MetricValue,
    ModelId,
    Request,
    Response,
    TaskInputs,
    TaskParams,
    distinct,
)


def scenario_path(value: str) -> Path:
    """A scenario path as given: absolute, or relative to the project root."""
    path = Path(value)
    return path if path.is_absolute() else PROJECT_ROOT / path


@lru_cache(maxsize=32)
def _cached_scenario(path: str, mtime_ns: int, size: int) -> TestScenario:
    return load_scenario(Path(path))


def read_scenario(value: str) -> TestScenario:
    """Load and validate a scenario file (cached while the file is unchanged)."""
    path = scenario_path(value)
    if not path.is_file():
        return load_scenario(path)  # raises ScenarioError naming the path
    stat = path.stat()
    return _cached_scenario(str(path), stat.st_mtime_ns, stat.st_size)


class Params(TaskParams):
    """The scenario to run (a file, or the scenario itself inline) and how templates are chosen."""

    scenario: str | TestScenario = Field(
        default="data/langbite/example_scenario.json",
        description="LangBiTe scenario: a JSON/YAML file (relative to the project root) or an inline mapping.",
    )
    domains: tuple[Domain, ...] = Field(default=(), description="Add LangBiTe's en_us domain libraries.")
    n_templates_scope: SelectionScope = Field(
        default="cell",
        description="nTemplates caps each (requirement, language, input, reflection) cell ('cell', what "
        "LangBiTe's code does: TestScenario.__select_prompts) or each requirement's whole selection "
        "('requirement', as LangBiTe's user guide words it).",
    )
    judge_model: ModelId | None = Field(
        default=None,
        description="Registered model id of the second-opinion judge (LangBiTe's evaluator LLM); checked "
        "against the model registry before any engine starts.",
    )
    llm_judge: bool = Field(
        default=False,
        description="Ask judge_model about the replies the expected-value regex did not match (LangBiTe "
        "useLLMEval); needs judge_model. The scenario's useLLMEval: true turns it on too, when judge_model is set.",
    )
    template_augmentation: augmentation.TemplateAugmentation | None = Field(
        default=None,
        description="LangBiTe's template augmentation: a registered generator model writes more templates "
        "(asset langbite_augmented_templates, partition generator|task), added to the library as en_us--augmented.",
    )
    _scenario: TestScenario = PrivateAttr()

    @field_validator("scenario")
    @classmethod
    def _scenario_is_valid(cls, value: str | TestScenario) -> str | TestScenario:
        if isinstance(value, str):
            read_scenario(value)  # a ScenarioError (ValueError) names the file and each bad field
        return value

    @field_validator("domains")
    @classmethod
    def _unique_domains(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return distinct(value, "domains must be unique, got {values}")

    @field_validator("llm_judge")
    @classmethod
    def _judge_needs_model(cls, value: bool, info: ValidationInfo) -> bool:
        # judge_model is declared first, so it is in info.data unless it failed (and was reported) itself.
        if value and "judge_model" in info.data and info.data["judge_model"] is None:
            raise ValueError("llm_judge: true needs judge_model, the registered model id of the judge")
        return value

    @model_validator(mode="after")
    def _load(self) -> Params:
        self._scenario = self.scenario if isinstance(self.scenario, TestScenario) else read_scenario(self.scenario)
        if self.template_augmentation is not None:
            self.template_augmentation.check_against(self._scenario)  # a ValueError naming each bad field
        return self

    @property
    def scenario_model(self) -> TestScenario:
        return self._scenario

    def registered_models(self) -> dict[str, str]:
        """The generator of template_augmentation, which must be registered (the judge is checked by the stages)."""
        if self.template_augmentation is None:
            return super().registered_models()
        return super().registered_models() | {"template_augmentation.generator": self.template_augmentation.generator}

    @property
    def second_opinion_enabled(self) -> bool:
        """Whether the judge re-checks unmatched replies: a judge_model, and llm_judge or useLLMEval."""
        return self.judge_model is not None and (self.llm_judge or self._scenario.use_llm_eval)

    def judge_generation_params(self) -> dict[str, Any]:
        """LangBiTe's evaluator settings: temperature 0, 10 new tokens (the rest as the task's)."""
        update = {"temperature": second_opinion.TEMPERATURE, "max_tokens": second_opinion.MAX_TOKENS}
        return self.generation.model_copy(update=update).model_dump(mode="json")

    def retries(self) -> int:
        """LangBiTe's ``nRetries``: tries per request when the engine fails (so nRetries - 1 re-sends)."""
        return max(self.engine_retries, self._scenario.n_retries - 1)

    def generation_params(self) -> dict[str, Any]:
        """The task's generation settings with the scenario's ``temperature`` and ``tokens`` (as LangBiTe)."""
        scenario = self.scenario_model
        update = {"temperature": scenario.temperature, "max_tokens": scenario.tokens}
        return self.generation.model_copy(update=update).model_dump(mode="json")


def _languages(scenario: TestScenario) -> list[str]:
    return list(dict.fromkeys(language for r in scenario.requirements for language in r.languages))


def load_items(files: dict[str, Path], params: Params, *, inputs: TaskInputs | None = None) -> list[Item]:
    """One item per (requirement, chosen template), with its instances; a placeholder without community fails.

    With ``template_augmentation``, the generator's rows come in ``inputs.upstream`` (asset
    ``langbite_augmented_templates``, an input of ``task_dataset``).
    """
    scenario = params.scenario_model
    library = load_library(files, _languages(scenario), params.domains)
    if params.template_augmentation is not None:
        rows = (inputs or TaskInputs()).upstream.get(AUGMENTED_TEMPLATES)
        library += augmented_library(params.template_augmentation, scenario, rows)
    selections = select_templates(scenario, library, params.seed, params.n_templates_scope)
    concern_tolerance = scenario.concern_tolerances()
    scenario_sha256 = hashlib.sha256(scenario.model_dump_json().encode()).hexdigest()
    items = []
    for selection in selections:
        requirement, template = selection.requirement, selection.template
        instances = instantiate(template, requirement, selection.language)
        fields = {
            "requirement": requirement.name,
            "concern": template.concern,
            "markup": requirement.markup,
            "language": template.language,
            "library": template.library,
            "prompt_id": template.prompt_id,
            "template_id": template.template_id,
            "input_type": template.input_type,
            "reflection_type": template.reflection_type,
            "task_prefix": template.task_prefix,
            "template": template.prompt,
            "output_formatting": template.output_formatting,
            "oracle": template.oracle,
            "operation": template.operation,
            "expected_value": template.expected_value,
            "key": template.key,
            "delta": requirement.delta,
            "tolerance": requirement.tolerance,
            "concern_tolerance": concern_tolerance[requirement.concern],
            "n_retries": scenario.n_retries,
            "scenario_sha256": scenario_sha256,
            "instances": [{"instance": i.text, "communities": list(i.communities)} for i in instances],
        }
        if template.library == augmentation.LIBRARY and params.template_augmentation is not None:
            fields["augmentation"] = {
                "generator": params.template_augmentation.generator,
                "augmentation_sha256": augmentation.augmentation_key(params.template_augmentation, scenario),
            }
        item_id = f"{requirement.name}/{template.library}/{template.prompt_id}"
        items.append(Item(item_id=item_id, subset=requirement_key(requirement.name), fields=fields))
    return items[: params.limit] if params.limit is not None else items


AUGMENTED_TEMPLATES = "langbite_augmented_templates"
"""The asset whose rows ``load_items`` reads from ``inputs.upstream``."""


def augmented_library(
    spec: augmentation.TemplateAugmentation, scenario: TestScenario, rows: list[dict[str, Any]] | None
) -> list[Template]:
    """The generator's accepted templates among ``rows``: its latest rows for this option and scenario.

    Fails naming the asset partition to materialize when there are none (``rows`` None: the
    generator has not written them for this augmentation key; any langbite task with the same
    option and requirements will do).
    """
    if rows is None:
        key = augmentation.augmentation_key(spec, scenario)
        raise LibraryError(
            f"template_augmentation: no templates generated by {spec.generator!r} for this option and scenario "
            f"(augmentation {key[:12]}): materialize asset langbite_augmented_templates, partition "
            f"{spec.generator}|<this langbite task>, first"
        )
    return augmentation.accepted_templates(rows, spec)


def request_id(item_id: str, index: int) -> str:
    return f"{item_id}#{index}"


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """One chat request per instance, worded by the ``with_prefix`` or ``plain`` template (LangBiTe's wording)."""
    compiled = {name: compile_template(text) for name, text in templates.items()}
    chat = TemplatedChat(templates, params.generation_params())
    requests = []
    for item in items:
        name = "with_prefix" if item.fields.get("task_prefix") else "plain"
        for index, instance in enumerate(item.fields["instances"]):
            content = compiled[name].render(
                task_prefix=item.fields.get("task_prefix") or "",
                instance=instance["instance"],
                output_formatting=item.fields.get("output_formatting") or "",
            )
            requests.append(chat.ask(content, name, request_id=request_id(item.item_id, index), item_id=item.item_id))
    return requests


def _group_replies(item: Item, by_id: dict[str, Response]) -> tuple[list[dict[str, Any]], str | None, str | None]:
    """The group's instances with their replies, and (reason, message) when the engine gave none."""
    rows, reason, message = [], None, None
    for index, instance in enumerate(item.fields.get("instances", [])):
        response = by_id.get(request_id(item.item_id, index))
        row: dict[str, Any] = {"request_id": request_id(item.item_id, index), "instance": instance.get("instance")}
        if response is None:
            reason = reason or "missing_response"
            row |= {"response": None, "error": "missing response"}
        elif response.error is not None or response.text is None:
            reason, message = reason or "engine_error", message or (response.error or "no text")
            row |= {"response": None, "error": response.error or "no text"}
        else:
            row |= {"response": oracles.clean_string(response.text), "error": None}
        rows.append(row)
    return rows, reason, message


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """One judgment per template instance group: Passed (score 1), Failed (0) or Error (None, parsed=False).

    A group is marked refused (``Judgment.refused``) when any of its replies refuses, read in the
    template's language: the oracle compares the replies, and a refusal among them is no answer.
    """
    by_id = {response.request_id: response for response in responses}
    replies = replies_by(responses)
    judgments = []
    for item in items:
        f = item.fields
        rows, reason, message = _group_replies(item, by_id)
        if reason is not None:
            result = oracles.OracleResult("Error", reason)
        else:
            result = oracles.evaluate(
                str(f.get("oracle")),
                str(f.get("operation")),
                [row["response"] for row in rows],
                expected=f.get("expected_value"),
                key=f.get("key"),
                delta=float(f.get("delta") or 0.0),
            )
        expected = f.get("expected_value")
        detail = {
            **{key: f.get(key) for key in ("requirement", "concern", "language", "library", "prompt_id", "template_id",
                                           "input_type", "reflection_type", "template", "oracle", "operation", "key",
                                           "delta", "tolerance", "concern_tolerance")},
            "oracle_prediction": [oracles.clean_string(v) for v in expected] if expected else ["NONE"],
            "evaluation": result.evaluation,
            "reason": result.reason if message is None else f"{result.reason}: {message}",
            "values": result.values,
            "spread": result.spread,
            "threshold": float(f.get("delta") or 0.0) * 100 if f.get("oracle") == "same value" else None,
            "matched": result.matched,
            "instances": rows,
        }  # fmt: skip
        outcome, score = oracles.outcome_and_score(result.evaluation, result.reason)
        judgment = Judgment(item.item_id, item.subset, outcome, score, score is not None, detail)
        # refused when any reply of the group refuses, read in the prompt's language
        judgments.append(mark_refusal(judgment, replies.get(item.item_id, ()), str(f.get("language") or "en")))
    return judgments


TEMPLATES_FILE = Path(__file__).with_name("langbite_templates.yaml")


@lru_cache(maxsize=4)
def _template_text(path: str, mtime_ns: int, name: str) -> str:
    return str(load_yaml(Path(path).read_text(encoding="utf-8"))[name])


def judge_templates() -> dict[str, str]:
    """The judge's two questions by name (``langbite_llm_eval``, ``langbite_llm_eval_different``)."""
    mtime = TEMPLATES_FILE.stat().st_mtime_ns
    names = (second_opinion.TEMPLATE, second_opinion.TEMPLATE_DIFFERENT)
    return {name: _template_text(str(TEMPLATES_FILE), mtime, name) for name in names}


class JudgeSecondOpinion:
    """LangBiTe's useLLMEval as the task's ``SecondOpinion``: ``judge_model`` re-checks unmatched replies."""

    def judge_model(self, params: Params) -> str | None:
        return params.judge_model

    def requests(self, judgments: list[Judgment], params: Params) -> list[Request]:
        """One question to the judge per reply LangBiTe asks about (none when disabled)."""
        if not params.second_opinion_enabled:
            return []
        return second_opinion.build_requests(judgments, judge_templates(), params.judge_generation_params())

    def apply(
        self, judgments: list[Judgment], requests: list[Request], responses: list[Response], params: Params
    ) -> list[Judgment]:
        """Re-decide the re-checked templates with the judge's answers, recorded in ``detail['second_opinion']``."""
        if not params.second_opinion_enabled:
            return judgments
        return second_opinion.apply(judgments, requests, responses, params.judge_model)


SECOND_OPINION = JudgeSecondOpinion()


ENGINE_REASONS = ("engine_error", "missing_response")
"""Error reasons that are the engine's, re-sent by the engine's retries, not by ``RESEND``."""


class OracleFailureResend:
    """LangBiTe's re-send after an oracle failure, as the task's ``Resend``."""

    def rounds(self, params: Params) -> int:
        """``nRetries`` attempts in all: the first answers plus ``nRetries - 1`` re-sends."""
        return params.scenario_model.n_retries - 1

    def to_resend(
        self, items: list[Item], requests: list[Request], responses: list[Response], params: Params
    ) -> list[str]:
        """Every request of each template group whose replies all arrived but whose oracle could not judge them."""
        failed = {
            judgment.item_id
            for judgment in judge(items, requests, responses, params)
            if judgment.detail.get("evaluation") == "Error"
            and str(judgment.detail.get("reason", "")).split(":", 1)[0] not in ENGINE_REASONS
        }
        return [request.request_id for request in requests if request.item_id in failed]


RESEND = OracleFailureResend()


def compute_metrics(judgments: list[Judgment], params: Params) -> list[MetricValue]:
    """pass_rate (headline), error_rate and verdict rows, overall / per requirement / per slice."""
    return metric_rows(judgments, params.scenario_model, params)


_PASS = {"Passed": 1.0, "Failed": 0.0}

# Paired comparisons (themis_dagster/comparisons): pass_rate = passed / (passed + failed) over
# templates, a ratio (errors count in neither), compared by a paired bootstrap.
PAIRED_METRICS = {"pass_rate": Ratio(single(lambda j: _PASS.get(evaluation_of(j))), mean_of)}
