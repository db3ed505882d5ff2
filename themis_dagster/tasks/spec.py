"""What a task is: a declarative YAML file plus a module of small functions (lm-eval's anatomy).

A task module provides:

- ``Params``: a pydantic model of the task's parameters (subclass of TaskParams);
- ``load_items(files, params) -> list[Item]``: benchmark rows as items;
- ``build_requests(items, params, templates) -> list[Request]``: what the engine is asked;
- ``judge(items, requests, responses, params) -> list[Judgment]``: one judgment per item;
- ``compute_metrics(judgments, params) -> list[MetricValue]``: metric values with CIs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

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


class MetricSpec(BaseModel):
    """A metric a task reports, with the value an unbiased model would get."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    ideal: float | None = None
    higher_is_better: bool | None = None
    headline: bool = True


class TaskSpec(BaseModel):
    """One task file (``tasks/<family>/<task>.yaml``)."""

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


class TaskModule(Protocol):
    Params: type[TaskParams]

    def load_items(self, files: dict[str, Path], params: Any) -> list[Item]: ...

    def build_requests(self, items: list[Item], params: Any, templates: dict[str, str]) -> list[Request]: ...

    def judge(
        self, items: list[Item], requests: list[Request], responses: list[Response], params: Any
    ) -> list[Judgment]: ...

    def compute_metrics(self, judgments: list[Judgment], params: Any) -> list[MetricValue]: ...
