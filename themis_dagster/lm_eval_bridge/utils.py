"""Any lm-eval task as a task partition: lm-eval builds the requests and scores the answers.

The division of labour (lm-eval 0.4.13, ``lm_eval/evaluator.py::evaluate``):

- ``load_items``: lm-eval's ``TaskManager`` builds the task (registry name, or a local task YAML
  with its ``utils.py``); every eval doc becomes an Item whose fields are the doc plus, under
  ``__lm_eval__``, the doc id and the doc's Instances (request type, idx, arguments) built as
  ``Task.build_all_requests`` builds them (few-shot context seeded by ``params.seed``, like
  lm-eval's ``fewshot_random_seed``, default 1234). Requests are thus fixed at load time.
- ``build_requests``: those Instances as our Requests (see ``conversions``), ids ``<doc_id>:<idx>``.
- ``judge``: per doc, the answers in the shape lm-eval's model returns, the task's filter
  ensemble (``take_first`` unless the YAML has a ``filter_list``) and ``task.process_results``;
  the per-doc metric dict is the judgment's ``detail["metrics"]``.
- ``compute_metrics``: ``task.aggregation()[metric]`` over the per-doc values (lm-eval's
  ``_compute_task_aggregations``; ``mean`` where a metric has none) gives each value, overall
  and per subset. Where the aggregation is lm-eval's ``mean`` (or ``nanmean``), the CI is our
  seeded percentile bootstrap of the mean over the per-doc values (``themis_dagster.stats``),
  n = docs; for other aggregations (f1, bleu, perplexity, ...) the CI is left empty.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field, field_validator, model_validator

from themis_dagster.lm_eval_bridge import conversions, loader
from themis_dagster.stats import bootstrap_estimate
from themis_dagster.tasks.spec import Item, Judgment, MetricValue, Request, Response, TaskInputs, TaskParams

if TYPE_CHECKING:
    from lm_eval.api.task import Task

RESERVED = "__lm_eval__"


class Params(TaskParams):
    """Which lm-eval task, and the evaluation settings lm-eval's CLI would take."""

    lm_eval_task: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:\-]+$", description="Registry name."
    )
    task_yaml: str | None = Field(
        default=None, min_length=1, description="A local lm-eval task YAML (project-relative or absolute)."
    )
    include_path: tuple[str, ...] = Field(default=(), description="Extra lm-eval task folders (--include_path).")
    include_defaults: bool | None = Field(
        default=None, description="Index lm-eval's own tasks (default: yes for lm_eval_task, no for task_yaml)."
    )
    num_fewshot: int | None = Field(default=None, ge=0, le=128, description="--num_fewshot (None: the task's).")
    gen_kwargs: dict[str, str | int | float | bool | list[str]] | None = Field(
        default=None, description="--gen_kwargs: updates a generate_until task's generation_kwargs."
    )
    metadata: dict[str, str | int | float | bool] = Field(default_factory=dict, description="TaskManager metadata.")
    subset_field: str | None = Field(default=None, min_length=1, description="Doc field whose value is the subset.")
    filter_name: str | None = Field(default=None, min_length=1, description="Filter ensemble to judge (first).")
    score_metric: str | None = Field(default=None, min_length=1, description="Per-doc metric used as the score.")

    @field_validator("task_yaml")
    @classmethod
    def _yaml_exists(cls, value: str | None) -> str | None:
        if value is not None and not loader.project_path(value).is_file():
            raise ValueError(f"no such file: {loader.project_path(value)}")
        return value

    @field_validator("include_path")
    @classmethod
    def _folders_exist(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for folder in value:
            if not loader.project_path(folder).is_dir():
                raise ValueError(f"no such folder: {loader.project_path(folder)}")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> Params:
        if (self.lm_eval_task is None) == (self.task_yaml is None):
            raise ValueError("give exactly one of lm_eval_task (a registry name) or task_yaml (a local task file)")
        return self


def build_task(params: Params, files: dict[str, Path], inputs: TaskInputs | None = None) -> Task:
    """The configured lm-eval task object (as ``simple_evaluate`` configures it)."""
    include = [loader.stage(loader.project_path(p), files, inputs) for p in params.include_path]
    if params.task_yaml is not None:
        source = loader.project_path(params.task_yaml)
        folder = loader.stage(source.parent, files, inputs)
        spec, include, defaults = str(folder / source.name), [folder, *include], bool(params.include_defaults)
    else:
        spec, defaults = str(params.lm_eval_task), params.include_defaults is not False
    task = loader.load_one_task(loader.task_manager(include, defaults, params.metadata), spec)
    if params.gen_kwargs and task.get_config("output_type") == "generate_until":
        task.set_config(key="generation_kwargs", value=dict(params.gen_kwargs), update=True)
    if params.num_fewshot is not None:
        if task.get_config("num_fewshot") != 0:  # lm-eval never overrides a task's explicit 0
            task.set_config(key="num_fewshot", value=params.num_fewshot)
    elif task.get_config("num_fewshot") is None:
        task.set_config(key="num_fewshot", value=0)
    task.set_fewshot_seed(seed=params.seed)
    return task


def _config_sha256(params: Params, task: Task) -> str | None:
    """sha256 of the task YAML as written (before placeholders are filled), for provenance."""
    if params.task_yaml is not None:
        return hashlib.sha256(loader.project_path(params.task_yaml).read_bytes()).hexdigest()
    source = (task.config.metadata or {}).get("config_source") if isinstance(task.config.metadata, dict) else None
    path = Path(str(source)) if source else None
    return hashlib.sha256(path.read_bytes()).hexdigest() if path is not None and path.is_file() else None


def _check_choices(task: Task, params: Params, first_doc: dict[str, Any] | None) -> None:
    """Fail at load time, naming the parameter, rather than after the engine has run."""
    filters = [ensemble.name for ensemble in getattr(task, "_filters", [])]
    if params.filter_name is not None and params.filter_name not in filters:
        raise ValueError(f"filter_name {params.filter_name!r} is not a filter of this task: {filters}")
    if params.score_metric is not None and params.score_metric not in task.aggregation():
        known = list(task.aggregation())
        raise ValueError(f"score_metric {params.score_metric!r} is not a metric of this task: {known}")
    if params.subset_field is not None and first_doc is not None and params.subset_field not in first_doc:
        raise ValueError(f"subset_field {params.subset_field!r} is not a doc field: {sorted(first_doc)}")


def _doc_instances(task: Task, limit: int | None) -> list[tuple[int, dict[str, Any], list[Any]]]:
    """Each doc with its Instances, exactly as ``Task.build_all_requests`` makes them (no chat template)."""
    shots = task.config.num_fewshot or 0
    out = []
    for doc_id, doc in task.doc_iterator(limit=limit):
        context = task.fewshot_context(
            doc,
            num_fewshot=shots,
            system_instruction=None,
            apply_chat_template=False,
            fewshot_as_multiturn=False,
            chat_template=None,
            gen_prefix=task.doc_to_prefix(doc),
        )
        made = task.construct_requests(
            doc=doc,
            ctx=context,
            metadata=(task.config.task, doc_id, task.config.repeats),
            apply_chat_template=False,
            chat_template=None,
        )
        out.append((doc_id, doc, made if isinstance(made, list) else [made]))
    return out


def load_items(files: dict[str, Path], params: Params, *, inputs: TaskInputs | None = None) -> list[Item]:
    """One item per lm-eval doc (the first ``limit``), in lm-eval's doc order; item id = doc id."""
    with loader.quiet():
        task = build_task(params, files, inputs)
        built = _doc_instances(task, params.limit)
    _check_choices(task, params, dict(built[0][1]) if built else None)
    record = {"task": task.config.task, "output_type": task.OUTPUT_TYPE, "repeats": int(task.config.repeats or 1)}
    record["config_sha256"] = _config_sha256(params, task)
    items = []
    for doc_id, doc, instances in built:
        fields = conversions.plain(dict(doc))
        if RESERVED in fields:
            raise ValueError(f"doc {doc_id} has a field named {RESERVED!r}, which the bridge reserves")
        requests = []
        for instance in instances:
            if instance.request_type not in conversions.SUPPORTED:
                raise ValueError(f"lm-eval request type {instance.request_type!r} is not supported")
            if any(isinstance(arg, dict) and ({"visual", "audio"} & set(arg)) for arg in instance.args):
                raise ValueError("multimodal lm-eval tasks are not supported")
            arguments = conversions.plain(instance.args)
            requests.append({"request_type": instance.request_type, "idx": instance.idx, "arguments": arguments})
        fields[RESERVED] = {**record, "doc_id": doc_id, "requests": requests}
        subset = fields.get(params.subset_field) if params.subset_field else None
        items.append(Item(str(doc_id), None if subset is None else str(subset), fields))
    return items


def _request_id(item_id: str, idx: int, repeat: int, repeats: int) -> str:
    return f"{item_id}:{idx}" if repeats == 1 else f"{item_id}:{idx}:{repeat}"


def _sends(request_type: str, repeats: int) -> int:
    """Generations are sent ``repeats`` times (seed + k); a loglikelihood is scored once and repeated."""
    return repeats if request_type == "generate_until" else 1


def _request(request_id: str, kind: str, args: list[Any], params: Params, repeat: int, **common: Any) -> Request:
    if kind == "loglikelihood":
        return Request(request_id, request_type="loglikelihood", context=args[0], continuation=args[1], **common)
    if kind == "loglikelihood_rolling":
        return Request(request_id, request_type="loglikelihood", context="", continuation=args[0], **common)
    gen = conversions.generation_params(args[1] if len(args) > 1 else None, params.generation, repeat)
    return Request(
        request_id, request_type="generate", prompt=args[0], gen_params=gen.model_dump(mode="json"), **common
    )


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """The stored Instances as Requests; ``template`` names the lm-eval task, with its YAML's sha256."""
    out = []
    for item in items:
        record = item.fields[RESERVED]
        repeats = int(record.get("repeats") or 1)
        common = {"item_id": item.item_id, "template": record["task"], "template_sha256": record.get("config_sha256")}
        for stored in record["requests"]:
            kind, idx = stored["request_type"], int(stored["idx"])
            sends = _sends(kind, repeats)
            for repeat in range(sends):
                request_id = _request_id(item.item_id, idx, repeat, sends)
                out.append(_request(request_id, kind, stored["arguments"], params, repeat, **common))
    return out


def _answers(item: Item, by_id: dict[str, Response]) -> tuple[list[Any], str | None, str | None]:
    """lm-eval Instances of one doc with their ``resps`` filled, or the outcome naming what is missing."""
    from lm_eval.api.instance import Instance

    record = item.fields[RESERVED]
    doc = {key: value for key, value in item.fields.items() if key != RESERVED}
    repeats = int(record.get("repeats") or 1)
    instances = []
    for stored in sorted(record["requests"], key=lambda r: int(r["idx"])):
        kind, args, idx = stored["request_type"], stored["arguments"], int(stored["idx"])
        sends = _sends(kind, repeats)
        resps = []
        for repeat in range(sends):
            response = by_id.get(_request_id(item.item_id, idx, repeat, sends))
            answer, why = conversions.lm_eval_answer(kind, args, response)
            if why is not None:
                return [], why, response.error if response is not None else None
            resps.append(answer)
        instance = Instance(kind, doc, tuple(args), idx, (record["task"], record["doc_id"], repeats))
        instance.resps = resps * (repeats // sends)
        instances.append(instance)
    return instances, None, None


def _score(metrics: dict[str, Any], wanted: str | None) -> float | None:
    names = [wanted] if wanted is not None else list(metrics)
    for name in names:
        value = metrics.get(name)
        if isinstance(value, bool | int | float | np.number) and np.isfinite(float(value)):
            return float(value)
    return None


def judge(
    items: list[Item],
    requests: list[Request],
    responses: list[Response],
    params: Params,
    *,
    inputs: TaskInputs | None = None,
) -> list[Judgment]:
    """Per doc: lm-eval's filters and ``process_results`` on the engine's answers; never raises on odd output."""
    by_id = {response.request_id: response for response in responses}
    with loader.quiet():  # once for the whole partition: each hush costs a pass over every logger
        return _judge_quietly(items, by_id, params, build_task(params, {}, inputs))


def _judge_quietly(items: list[Item], by_id: dict[str, Response], params: Params, task: Task) -> list[Judgment]:
    """``judge``'s loop, run inside one ``loader.quiet()``."""
    ensembles = {ensemble.name: ensemble for ensemble in getattr(task, "_filters", [])}
    name = params.filter_name or next(iter(ensembles), "none")
    ensemble = ensembles.get(name)
    score_metric = params.score_metric or next(iter(task.aggregation()), None)
    out = []
    for item in items:
        doc_id = item.fields[RESERVED]["doc_id"]
        instances, why, error = _answers(item, by_id)
        if why is not None:
            out.append(Judgment(item.item_id, item.subset, why, None, False, {"doc_id": doc_id, "error": error}))
            continue
        doc = instances[0].doc
        try:
            if ensemble is not None:
                ensemble.apply(instances)
            filtered = [inst.filtered_resps[name] if ensemble else inst.resps[0] for inst in instances]
        except Exception as failure:  # noqa: BLE001 - a task's filter must not sink the partition
            detail = {"doc_id": doc_id, "error": f"{type(failure).__name__}: {failure}"[:500]}
            out.append(Judgment(item.item_id, item.subset, "filter_error", None, False, detail))
            continue
        try:
            metrics = task.process_results(doc, filtered)
            if not isinstance(metrics, dict):
                raise TypeError(f"process_results returned {type(metrics).__name__}, not a dict")
        except Exception as failure:  # noqa: BLE001 - task code meeting an odd reply
            detail = {"doc_id": doc_id, "error": f"{type(failure).__name__}: {failure}"[:500]}
            out.append(Judgment(item.item_id, item.subset, "process_results_error", None, False, detail))
            continue
        detail = {"doc_id": doc_id, "filter": name, "metrics": conversions.plain(metrics)}
        detail["filtered_responses"] = conversions.plain(filtered)
        out.append(Judgment(item.item_id, item.subset, "scored", _score(metrics, score_metric), True, detail))
    return out


def _aggregate(aggregation: Any, values: list[Any]) -> float | None:
    try:
        with loader.quiet():
            value = aggregation(values)
        if not isinstance(value, bool | int | float | np.number) or not np.isfinite(float(value)):
            return None
        return float(value)
    except Exception:  # noqa: BLE001 - an aggregation that cannot take these values yields no value
        return None


def compute_metrics(
    judgments: list[Judgment], params: Params, *, inputs: TaskInputs | None = None
) -> list[MetricValue]:
    """Each per-doc metric aggregated by lm-eval's function, overall and per subset; bootstrap CIs for means."""
    from lm_eval.api.metrics import mean, nanmean

    with loader.quiet():
        aggregations = dict(build_task(params, {}, inputs).aggregation())
    groups: dict[str, dict[str | None, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for judgment in judgments:
        if not judgment.parsed:
            continue
        for metric, value in (judgment.detail.get("metrics") or {}).items():
            groups[metric][None].append(value)
            if judgment.subset is not None:
                groups[metric][judgment.subset].append(value)
    order = [m for m in aggregations if m in groups] + [m for m in groups if m not in aggregations]
    out = []
    for metric in order:
        aggregation = aggregations.get(metric, mean)
        for subset in sorted(groups[metric], key=lambda key: (key is not None, key or "")):
            values = groups[metric][subset]
            value = _aggregate(aggregation, values)
            low = high = None
            numeric = all(isinstance(v, bool | int | float) for v in values)
            if aggregation in (mean, nanmean) and numeric and value is not None:
                estimate = bootstrap_estimate(
                    [float(v) for v in values],
                    np.mean,
                    n_resamples=params.bootstrap_resamples,
                    confidence=params.confidence,
                    seed=params.seed,
                )
                if estimate.ci_low is not None and estimate.ci_high is not None:
                    low, high = min(estimate.ci_low, value), max(estimate.ci_high, value)
            out.append(MetricValue(subset, conversions.metric_name(metric), value, low, high, len(values)))
    return out
