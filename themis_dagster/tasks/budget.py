"""A time budget for a run: make run's task sizes scaled to what this host can evaluate in the time given.

``make run`` evaluates every task at its family's ``run`` size (``family.yaml``). On a slow CPU (an
AVX2-only host computes in float32, several times slower than an AVX-512 one in bfloat16) that whole
run can take longer than a user waits. ``themis run --budget-minutes N`` then keeps the run within N
minutes by evaluating fewer items per task: every task still runs, each on a share of its profile size.

How a size is chosen:
- ``data/run_profiles/costs.yaml`` gives each task's seconds on a reference host at the profile size,
  split into inference (what shrinks with the size) and the rest (dataset, metrics, the run itself).
- The speed of this host relative to the reference is measured as the run goes: the judge calibration
  at the start (a fixed workload), then every task that sent requests to the engine (answers reused
  from the request cache measure nothing). ``speed`` is the ratio of the seconds observed to the
  seconds the reference took for the same work.
- Before each task, the budget left is shared over the tasks left: ``scale = (left - speed * fixed)
  / (speed * inference)``, at most 1; the task's size knob (``limit``, ``sample_k`` or ``iterations``)
  becomes ``max(floor, int(scale * size))``, the floor being the size the family's engine test runs
  (a size known to give every metric), else 1.

What a smaller size costs: a mean's or a proportion's confidence interval narrows as 1/sqrt(n), so a
task at n' of its n items has intervals about sqrt(n / n') times as wide; the run prints that factor
per task and in its summary.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field

from themis_dagster.errors import ConfigError, StrictModel, load_yaml, validated
from themis_dagster.settings import PROJECT_ROOT
from themis_dagster.tasks.family import sizes
from themis_dagster.tasks.variants import split_variant

COSTS_FILE = PROJECT_ROOT / "data" / "run_profiles" / "costs.yaml"
KNOBS = ("limit", "sample_k", "iterations")
"""The parameters that set how many items a task evaluates, in the order a profile's entry is read for one."""
MIN_SPEED, MAX_SPEED = 0.05, 50.0
"""The speed estimate is kept within these bounds: one odd measurement never plans a run of zero items."""


class TaskCost(StrictModel):
    """What a task took on the reference host at make run's profile size."""

    inference_s: float = Field(ge=0, description="seconds of engine inference: what shrinks with the size")
    other_s: float = Field(ge=0, description="the rest: dataset, judgments, metrics, the Dagster run itself")
    items: int | None = Field(default=None, ge=1, description="items the profile evaluates where it names no size")


class ReferenceCosts(StrictModel):
    """``costs.yaml``: the reference host's seconds per task, per calibration set, for the reports."""

    host: str = Field(description="the host, dtype and commit the seconds were measured on")
    command: str = Field(default="", description="the command that measured them")
    tasks: dict[str, TaskCost]
    calibrations: dict[str, float] = Field(default_factory=dict)
    reports_s: float = Field(default=0.0, ge=0)

    def task(self, name: str) -> TaskCost:
        """A task's cost; a variant costs what its task does; an unknown task the mean of the known ones."""
        known = self.tasks.get(name) or self.tasks.get(split_variant(name)[0])
        if known is not None:
            return known
        count = max(len(self.tasks), 1)
        return TaskCost(
            inference_s=sum(cost.inference_s for cost in self.tasks.values()) / count,
            other_s=sum(cost.other_s for cost in self.tasks.values()) / count,
        )


def load_costs(path: Path | None = None) -> ReferenceCosts:
    """Read ``costs.yaml`` (default ``COSTS_FILE``); a malformed file fails naming the field."""
    path = path or COSTS_FILE
    try:
        raw = load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"{path}: cannot read the reference costs: {error}") from None
    return validated(ReferenceCosts, raw, str(path))


@dataclass(frozen=True)
class Knob:
    """The parameter that sets a task's number of items, its profile value and the least it may go to."""

    name: str
    size: int
    floor: int


def size_knob(task: str, run: Mapping[str, Any], test: Mapping[str, Any] | None, items: int | None) -> Knob | None:
    """The size parameter of a task's profile entry (``limit`` where the entry gives none but its item count
    is known); None: the task's size is not scaled (no such parameter, or its item count unknown)."""
    for name in KNOBS:
        if isinstance(run.get(name), int):
            return Knob(name, run[name], _floor(name, run[name], test))
    if items is None:
        return None
    return Knob("limit", items, _floor("limit", items, test))


def _floor(name: str, size: int, test: Mapping[str, Any] | None) -> int:
    tested = (test or {}).get(name)
    return min(size, tested) if isinstance(tested, int) and tested >= 1 else 1


@dataclass(frozen=True)
class Resize:
    """One task run smaller than its profile size, and what that costs its confidence intervals."""

    task: str
    knob: str
    size: int
    planned: int

    @property
    def ci_width_factor(self) -> float:
        """How many times wider a mean's confidence interval is at the planned size (1/sqrt(n))."""
        return math.sqrt(self.size / self.planned)

    def describe(self) -> str:
        return (
            f"{self.task}: {self.knob} {self.planned} of {self.size} "
            f"(confidence intervals about {self.ci_width_factor:.2f}x as wide)"
        )


@dataclass
class Budget:
    """A run's time budget, re-planned before every task from the speed observed so far."""

    seconds: float
    costs: ReferenceCosts
    profile: Mapping[str, Mapping[str, Any]]
    test_sizes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    observed_s: float = 0.0
    reference_s: float = 0.0
    resized: list[Resize] = field(default_factory=list)

    @property
    def speed(self) -> float:
        """Seconds this host takes per reference second, from the work observed (1.0 before any)."""
        if self.reference_s <= 0:
            return 1.0
        return min(MAX_SPEED, max(MIN_SPEED, self.observed_s / self.reference_s))

    def observe(self, seconds: float, reference_s: float, fresh: float = 1.0) -> None:
        """Count work that took ``seconds`` here and ``reference_s`` on the reference host, of which the
        share ``fresh`` was computed now (the rest reused from the request cache). Mostly-reused work
        measures the cache, not the engine: it is left out."""
        if fresh >= 0.5 and reference_s > 0:
            self.observed_s += seconds
            self.reference_s += reference_s

    def knob(self, task: str) -> Knob | None:
        base = split_variant(task)[0]
        run = self.profile.get(task) or self.profile.get(base)
        if run is None:
            return None
        return size_knob(task, run, self.test_sizes.get(base), self.costs.task(task).items)

    def scale(self, remaining: Sequence[str], elapsed_s: float) -> float:
        """The share of its profile size every remaining task runs at, to end within the budget (at most 1)."""
        speed = self.speed
        fixed = self.costs.reports_s
        scalable = 0.0
        for task in remaining:
            cost = self.costs.task(task)
            if self.knob(task) is None:
                fixed += cost.inference_s + cost.other_s
            else:
                fixed += cost.other_s
                scalable += cost.inference_s
        left = self.seconds - elapsed_s - speed * fixed
        if scalable <= 0:
            return 1.0
        return max(0.0, min(1.0, left / (speed * scalable)))

    def expected_s(self, task: str, params: Mapping[str, Any]) -> float:
        """The reference host's seconds for ``task`` at the sizes ``params`` give."""
        cost = self.costs.task(task)
        knob = self.knob(task)
        share = 1.0
        if knob is not None:
            share = int(params.get(knob.name, knob.size)) / knob.size
        return cost.other_s + cost.inference_s * share

    def params_for(self, task: str, scale: float) -> dict[str, Any]:
        """``task``'s profile entry at ``scale`` of its size (the entry unchanged at 1 or without a size)."""
        base = split_variant(task)[0]
        params = dict(self.profile.get(task) or self.profile.get(base) or {})
        knob = self.knob(task)
        if knob is None or scale >= 1.0:
            return params
        planned = max(knob.floor, min(knob.size, int(scale * knob.size)))
        if planned < knob.size:
            params[knob.name] = planned
            self.resized.append(Resize(task, knob.name, knob.size, planned))
        return params


def budget_for(minutes: float, profile: Mapping[str, Mapping[str, Any]], costs: ReferenceCosts | None = None) -> Budget:
    """A budget of ``minutes`` over ``profile`` (the run's overrides); the families' engine-test sizes are floors."""
    if not minutes > 0:
        raise ConfigError(f"--budget-minutes must be a positive number of minutes, not {minutes!r}")
    return Budget(minutes * 60.0, costs or load_costs(), profile, sizes("engine_test"))


def summary(budget: Budget, tasks: Iterable[str]) -> list[str]:
    """Lines that say which tasks ran smaller and what that cost their intervals (none: the whole profile ran)."""
    count = len(list(tasks))
    if not budget.resized:
        return [f"time budget {budget.seconds / 60:.0f} min: every task ran at make run's profile size"]
    factors = [resize.ci_width_factor for resize in budget.resized]
    return [
        f"time budget {budget.seconds / 60:.0f} min: {len(budget.resized)} of {count} tasks ran smaller than make "
        f"run's profile (this host at {budget.speed:.2f}x the reference host's seconds); their confidence intervals "
        f"are {min(factors):.2f}x to {max(factors):.2f}x as wide (1/sqrt(n)). THEMIS_RUN_BUDGET_MINUTES= (empty) "
        "runs the whole profile:",
        *(f"  {resize.describe()}" for resize in budget.resized),
    ]
