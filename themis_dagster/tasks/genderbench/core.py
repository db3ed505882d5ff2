"""The GenderBench probe life cycle mapped onto a task's four functions.

GenderBench (``probing/probe.py``): 1. create ProbeItems (each with Prompts, each prompt asked
``num_repetitions`` times as Attempts); 2. generate; 3. evaluate each attempt; 4. compute metrics
and marks. Here: ``load_items`` builds the probe items (``ProbeItemSpec`` per item), ``build_requests``
makes one chat request per prompt x repetition (``<item>:<prompt>:<rep>``), ``judge`` runs the
probe's evaluator once per attempt (one Judgment per attempt, same id) and ``compute_metrics``
regroups the attempts by probe item and runs the probe's metric calculator. A probe module
declares only its own parts; ``probe.Probe`` joins them to these phases.

Undetected attempts (the evaluator found no answer, the engine errored or no response came)
are kept as Judgments with ``parsed=False`` and counted: GenderBench's
``MetricCalculator.filter_undetected`` drops the probe items whose attempts are *all*
undetected and reports ``undetected_rate_items`` (share of items dropped) and
``undetected_rate_attempts`` (share of attempts undetected); the calculators then skip
undetected attempts inside the remaining items.

Confidence intervals (``Probe.calculate_metrics``): ``random.seed(seed)``, then
``bootstrap_resamples`` times ``random.choices(probe_items, k=len(probe_items))`` and the metrics
recomputed on each resample -- here ``random.Random(seed).choices``, the same draws. The interval
is ``scipy.stats.norm.interval(confidence, *norm.fit(values))`` over the non-NaN resampled values
(a normal fit, as GenderBench does); all-NaN values give no interval, all-equal values a zero-width
one. GenderBench checks "all equal" before dropping NaNs, so a mix of NaNs and one repeated value
fits a zero-variance normal and yields a NaN interval (no mark); so it does here, matching its
published numbers. The point value is the metric on all items (GenderBench with
``calculate_cis=True`` reports only the interval, and marks it, even where the point value is NaN;
so do we: the marks of these bootstrapped metrics come from the interval only).

Defaults follow ``Probe.__init__``: ``random_seed=123`` (``seed``), ``bootstrap_cycles=1000``,
``bootstrap_alpha=0.95`` (``confidence``), ``num_repetitions=1``, ``sample_k=None``.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jinja2
import numpy as np
from pydantic import Field
from scipy import stats

from themis_dagster.refusals import mark_refusals, replies_by
from themis_dagster.tasks.genderbench.marks import MarkDefinition, mark_rows
from themis_dagster.tasks.rendering import compile_template, template_sha256
from themis_dagster.tasks.spec import Item, Judgment, MetricValue, Request, Response, TaskParams

UNDETECTED_OUTCOME = "undetected"


# GenderBench's generator settings (``generators/async_api.py``: ``max_tokens=300``, ``temperature=1.0``).
GENDERBENCH_GENERATION: dict[str, Any] = {"temperature": 1.0, "top_p": 1.0, "max_tokens": 300, "stop": []}
DEPARTURE_METRIC = "genderbench_settings_departures"
# Parameters that change how a run is carried out, not what it measures.
NOT_SETTINGS = frozenset({"engine_retries"})


class GenderBenchParams(TaskParams):
    """Parameters every GenderBench probe has (``Probe.__init__``: random_seed, num_repetitions, sample_k)."""

    seed: int = Field(default=123, ge=0, description="GenderBench random_seed: item creation, sampling, bootstrap.")
    num_repetitions: int = Field(
        default=1, ge=1, le=100, description="Attempts per prompt (GenderBench num_repetitions)."
    )
    sample_k: int | None = Field(default=None, ge=1, description="Probe items sampled from the full set (None: all).")


@dataclass(frozen=True)
class ProbeItem:
    """One probe item at metric time: its metadata and its attempts (evaluation, prompt metadata)."""

    item_id: str
    meta: dict[str, Any]
    attempts: tuple[tuple[Any, dict[str, Any]], ...]
    counts: Counter[Any] = field(default_factory=Counter, compare=False)
    n_detected: int = 0

    @property
    def evaluations(self) -> list[Any]:
        return [evaluation for evaluation, _ in self.attempts]


Calculator = Callable[[list[ProbeItem]], dict[str, float]]
Evaluate = Callable[[str | None, dict[str, Any], dict[str, Any]], Any]


# ---------------------------------------------------------------- phase 1: items
def make_item(item_id: str, prompts: Sequence[dict[str, Any]], meta: dict[str, Any], subset: str | None = None) -> Item:
    """An item whose ``prompts`` are ``{"vars": template variables, "meta": prompt metadata}``."""
    return Item(item_id, subset, {"prompts": [dict(prompt) for prompt in prompts], "meta": dict(meta)})


def sample_and_limit(items: list[Item], params: GenderBenchParams) -> list[Item]:
    """GenderBench ``Probe.sample``: ``random.seed(seed); random.sample(items, k)``; then the first ``limit``."""
    if params.sample_k is not None:
        if params.sample_k > len(items):
            raise ValueError(f"sample_k={params.sample_k} exceeds the {len(items)} probe items of this probe")
        items = random.Random(params.seed).sample(items, k=params.sample_k)  # noqa: S311 - reproducible sampling
    if params.limit is not None:
        items = items[: params.limit]
    return items


# ---------------------------------------------------------------- phase 2: requests
@dataclass(frozen=True)
class RenderedTemplate:
    name: str
    text: str
    sha256: str
    template: jinja2.Template


def load_template(templates: dict[str, str], name: str) -> RenderedTemplate:
    if name not in templates:
        raise KeyError(f"template {name!r} not found; known: {', '.join(sorted(templates))}")
    text = templates[name]
    return RenderedTemplate(name, text, template_sha256(text), compile_template(text))


def build_chat_requests(
    items: Iterable[Item], params: GenderBenchParams, templates: dict[str, str], name: str
) -> list[Request]:
    """One chat request per prompt x repetition from the Jinja2 template ``name`` (see ``chat_requests``)."""
    template = load_template(templates, name)
    return chat_requests(
        items, params, lambda item, prompt: template.template.render(**prompt["vars"]), template.name, template.sha256
    )


def chat_requests(
    items: Iterable[Item],
    params: GenderBenchParams,
    render: Callable[[Item, dict[str, Any]], str],
    template: str,
    template_sha256: str,
) -> list[Request]:
    """One chat request per prompt x repetition, id ``<item>:<prompt>:<rep>``, text ``render(item, prompt)``.

    Repetitions only differ when sampling, so repetition ``r`` gets generation seed ``seed + r``
    (identical seeds would make a seeded sampler repeat itself).
    """
    base = params.generation.model_dump(mode="json")
    requests = []
    for item in items:
        for p, prompt in enumerate(item.fields["prompts"]):
            text = render(item, prompt)
            for r in range(params.num_repetitions):
                gen_params = dict(base)
                if base.get("seed") is not None:
                    gen_params["seed"] = int(base["seed"]) + r
                requests.append(
                    Request.user_message(
                        text,
                        request_id=f"{item.item_id}:{p}:{r}",
                        item_id=item.item_id,
                        template=template,
                        template_sha256=template_sha256,
                        gen_params=gen_params,
                    )
                )
    return requests


# ---------------------------------------------------------------- phase 3: evaluation
def judge_attempts(
    items: list[Item], requests: list[Request], responses: list[Response], evaluate: Evaluate
) -> list[Judgment]:
    """One Judgment per attempt (request): the evaluator's result in ``outcome``; never raises.

    The refusal detector marks each attempt (``Judgment.refused``, English). GenderBench's evaluators
    count a refusal as undetected and its metrics keep doing so; the refusals are counted beside them.
    """
    by_item = {item.item_id: item for item in items}
    by_request = {response.request_id: response for response in responses}
    judgments = []
    for request in requests:
        item = by_item.get(request.item_id)
        if item is None:
            continue
        _, p_text, r_text = request.request_id.rsplit(":", 2)
        p = int(p_text)
        prompt_meta = dict(item.fields["prompts"][p].get("meta", {}))
        detail: dict[str, Any] = {
            "item": item.item_id,
            "prompt": p,
            "rep": int(r_text),
            "item_meta": item.fields["meta"],
            "prompt_meta": prompt_meta,
        }
        response = by_request.get(request.request_id)
        if response is None:
            outcome, evaluation = "missing_response", None
        elif response.error:
            outcome, evaluation = "engine_error", None
            detail["error"] = str(response.error)[:500]
        else:
            try:
                evaluation = evaluate(response.text, prompt_meta, item.fields["meta"])
            except Exception as error:  # noqa: BLE001 - an evaluator bug must not stop the run
                evaluation = None
                detail["error"] = f"evaluator failed: {error!r}"[:500]
            outcome = (
                UNDETECTED_OUTCOME
                if evaluation is None
                else "counted"
                if isinstance(evaluation, dict)
                else str(evaluation)
            )
        detail["evaluation"] = evaluation
        judgments.append(Judgment(request.request_id, item.subset, outcome, None, evaluation is not None, detail))
    # one judgment per attempt: its own reply; a refusal stays what the evaluator made of it (undetected)
    return mark_refusals(judgments, replies_by(responses, "request_id"))


# ---------------------------------------------------------------- phase 4: metrics
def probe_items(judgments: Iterable[Judgment]) -> list[ProbeItem]:
    """Regroup attempt judgments by probe item (first-seen order)."""
    grouped: dict[str, list[Judgment]] = defaultdict(list)
    for judgment in judgments:
        grouped[str(judgment.detail.get("item", judgment.item_id))].append(judgment)
    items = []
    for item_id, group in grouped.items():
        attempts = tuple((j.detail.get("evaluation"), dict(j.detail.get("prompt_meta") or {})) for j in group)
        meta = dict(group[0].detail.get("item_meta") or {})
        detected = [evaluation for evaluation, _ in attempts if evaluation is not None]
        counts = Counter(evaluation for evaluation in detected if not isinstance(evaluation, dict | list))
        items.append(ProbeItem(item_id, meta, attempts, counts, len(detected)))
    return items


def filter_undetected(calculate: Calculator) -> Calculator:
    """GenderBench ``MetricCalculator.filter_undetected``: drop all-undetected items, add the two rates."""

    def wrapped(items: list[ProbeItem]) -> dict[str, float]:
        kept = [item for item in items if item.n_detected]
        n_attempts = sum(len(item.attempts) for item in items)
        metrics = calculate(kept)
        metrics["undetected_rate_items"] = 1 - len(kept) / len(items) if items else math.nan
        detected = sum(item.n_detected for item in items)
        metrics["undetected_rate_attempts"] = 1 - detected / n_attempts if n_attempts else math.nan
        return metrics

    return wrapped


def _finite(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def normal_interval(values: Sequence[float], confidence: float) -> tuple[float | None, float | None]:
    """GenderBench's CI of bootstrap values (``Probe.calculate_metrics``), step for step.

    All NaN: no interval. All equal *before* dropping NaNs: that value. Otherwise the NaNs are
    dropped and ``norm.interval(alpha, *norm.fit(values))`` -- which is NaN (no interval, so no
    mark) when the remaining values are all equal: a zero-scale normal, as in GenderBench.
    """
    if all(math.isnan(value) for value in values):
        return None, None
    if len(set(values)) == 1:
        return values[0], values[0]
    finite = [value for value in values if not math.isnan(value)]
    if len(set(finite)) == 1:
        return None, None  # GenderBench: norm.interval with scale 0 gives (nan, nan)
    low, high = stats.norm.interval(confidence, *stats.norm.fit(finite))
    return float(low), float(high)


def compute_probe_metrics(
    judgments: list[Judgment],
    params: GenderBenchParams,
    calculate: Calculator,
    definitions: Sequence[MarkDefinition],
) -> list[MetricValue]:
    """Metrics on all probe items, their bootstrap CIs over probe items, and the marks."""
    items = probe_items(judgments)
    wrapped = filter_undetected(calculate)
    point = wrapped(items)
    n_items_detected = sum(1 for item in items if item.n_detected)
    buffer: dict[str, list[float]] = defaultdict(list)
    if items:
        rng = random.Random(params.seed)  # noqa: S311 - GenderBench's seeded bootstrap draws
        for _ in range(params.bootstrap_resamples):
            sample = rng.choices(items, k=len(items))
            for name, value in wrapped(sample).items():
                buffer[name].append(float(value))
    rows = []
    for name, value in point.items():
        low, high = normal_interval(buffer.get(name, []), params.confidence)
        finite = _finite(value)
        n = len(items) if name.startswith("undetected_rate") else n_items_detected
        if n == 0:  # no detected item: even a count (0 true positives) estimates nothing -- no value,
            finite = low = high = None  # interval or mark (GenderBench would mark a count of 0 here)
        rows.append(MetricValue(None, name, finite, _finite(low), _finite(high), n))
    return rows + mark_rows(definitions, rows, intervals_only=True) + departure_rows(params)


def settings_departures(params: GenderBenchParams) -> dict[str, tuple[Any, Any]]:
    """Each setting where this run departs from GenderBench's default harness: ``{name: (used, genderbench)}``.

    GenderBench's settings are the probe's ``Params`` defaults (each equal to the ``DefaultHarness``
    argument of that probe) with GenderBench's generator settings; a seed of None (unseeded
    sampling) departs too, as GenderBench's runs are then not reproducible here.
    """
    used = params.model_dump(mode="json")
    expected = type(params)().model_dump(mode="json")
    departures: dict[str, tuple[Any, Any]] = {}
    for name, value in used.items():
        if name in NOT_SETTINGS or name == "generation":
            continue
        if value != expected.get(name):
            departures[name] = (value, expected.get(name))
    generation = used["generation"]
    for name, value in GENDERBENCH_GENERATION.items():
        if generation.get(name) != value:
            departures[f"generation.{name}"] = (generation.get(name), value)
    if generation.get("seed") is None:
        departures["generation.seed"] = (None, "a fixed seed")
    return departures


def departure_rows(params: GenderBenchParams) -> list[MetricValue]:
    """The departures as metric rows: a count (subset None) and one row per setting (value 1)."""
    departures = settings_departures(params)
    rows = [MetricValue(None, DEPARTURE_METRIC, float(len(departures)), None, None, len(departures))]
    for name, (value, expected) in sorted(departures.items()):
        subset = f"{name}={json.dumps(value)} (genderbench: {json.dumps(expected)})"
        rows.append(MetricValue(subset, DEPARTURE_METRIC, 1.0, None, None, 1))
    return rows


# ---------------------------------------------------------------- helpers for calculators
def nanmean(values: Iterable[float]) -> float:
    """Mean of the non-NaN values; NaN when there are none (GenderBench ``utils.math.nanmean``)."""
    finite = [value for value in values if not math.isnan(value)]
    return float(np.mean(finite)) if finite else math.nan


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, NaN when the denominator is 0 (GenderBench ``zero_div``)."""
    return numerator / denominator if denominator else math.nan


def share(item: ProbeItem, option: Any, against: Any) -> float:
    """Share of ``option`` among the item's attempts that are ``option`` or ``against``."""
    return ratio(item.counts[option], item.counts[option] + item.counts[against])
