"""The evaluation chain as Dagster assets, one DuckDB table per stage, partitioned by model x task.

task_dataset -> rendered_prompts -> raw_responses -> judgments -> bias_metrics

Each asset is wiring: it reads its partition's upstream rows, calls its stage function
(``themis_dagster/evaluation``), replaces its own rows in one transaction (a re-run never
duplicates anything) and reports checks and metadata (``assets/metadata.py``). Connections are
opened per read or write and never held while an engine works.
"""

from dataclasses import replace
from datetime import UTC, datetime

from dagster import (
    AssetExecutionContext,
    DataVersion,
    MaterializeResult,
)

from themis_dagster.assets import checks, metadata
from themis_dagster.assets.answerers import answerer_for, model_answerers
from themis_dagster.assets.factory import AssetResult, evaluation_asset
from themis_dagster.assets.families import dataset_input_deps, dataset_inputs
from themis_dagster.evaluation.items import dataset_sha256, load_items
from themis_dagster.evaluation.judging.calibrations import StoredCalibrations
from themis_dagster.evaluation.judging.pipeline import PartitionReplies, judge_partition
from themis_dagster.evaluation.judging.task_judge import reads_prompts
from themis_dagster.evaluation.metrics import judged_metrics_frame, metric_values
from themis_dagster.evaluation.partition import EvaluationPartition
from themis_dagster.evaluation.prompts import render_partition
from themis_dagster.evaluation.responses import answer_prompts, check_answer_budget, run_config
from themis_dagster.evaluation.stage_io import (
    read_generation,
    read_stage,
    read_upstream_frame,
    replace_stage,
    replace_stage_frame,
    settle_heap,
)
from themis_dagster.partitions import model_and_task
from themis_dagster.resources import EngineResource, ThemisConfig, WarehouseResource
from themis_dagster.runs.pools import ENGINE_POOL
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.spec import Item
from themis_dagster.warehouse.appends import append_rows
from themis_dagster.warehouse.frames import from_frame, rows_frame
from themis_dagster.warehouse.partitions import Write, partition_scope
from themis_dagster.warehouse.reads import carries_reasoning


def _partition_task(context: AssetExecutionContext, themis: ThemisConfig) -> tuple[EvaluationPartition, LoadedTask]:
    """An evaluation asset's start: the heap settled, the running (model, task) partition and its loaded task."""
    settle_heap()
    key = model_and_task(context)
    return key, themis.task(key.task)


@evaluation_asset(
    description="The task's benchmark items, read from the dataset mirror or its canonical URL "
    "(a langbite task with template_augmentation: with its generator's templates).",
    deps=dataset_input_deps(),  # the families' assets whose rows a task's items read (assets/families.py)
)
def task_dataset(context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource) -> AssetResult:
    settle_heap()
    key = model_and_task(context)
    themis.model(key.model)  # an unknown model fails here, before anything is written
    task = themis.task(key.task)
    for judge_model in (task.judge_model, task.params.refusal_judge_model):
        if judge_model:
            themis.model(judge_model)  # a judge model must be registered, checked before any engine
    if upstream := dataset_inputs(warehouse, task):
        task = task.with_inputs(replace(task.inputs, upstream=upstream))
    files = themis.dataset_files(task)
    frame = load_items(task, key, files)
    with warehouse.connect() as conn:
        _, written = replace_stage_frame(conn, "task_items", key, frame, run_id=context.run_id)
    return MaterializeResult(
        metadata=metadata.dataset_metadata(task, frame, files, written),
        data_version=DataVersion(dataset_sha256(files)[:64]),
    )


@evaluation_asset(
    description="One row per engine request: contexts and continuations, or rendered prompts.",
    deps=[task_dataset],
    checks={"every_item_has_requests": "Each item yields at least one request."},
)
def rendered_prompts(context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource) -> AssetResult:
    key, task = _partition_task(context, themis)
    with warehouse.connect() as conn:
        items = read_upstream_frame(conn, "task_items", key)
        upstream = read_generation(conn, "task_items", key)
    rendered = render_partition(task, key, items)  # a variant's: rewritten by its perturbation
    frame = rendered.frame
    with warehouse.connect() as conn:
        _, written = replace_stage_frame(conn, "prompts", key, frame, run_id=context.run_id, upstream=upstream)
    item_ids, requested = set(items.get_column("item_id").to_list()), set(frame.get_column("item_id").to_list())
    return MaterializeResult(
        check_results=[checks.every_item_has_requests(item_ids, requested)],
        metadata=metadata.prompts_metadata(task, items.height, frame, written, rendered.perturbed),
    )


@evaluation_asset(
    description="The engine's raw answer to every request: logprobs or text, token counts, timing.",
    deps=[rendered_prompts],
    kinds=("duckdb", "vllm"),
    pool=ENGINE_POOL,
    checks={
        "responses_match_prompts": "One response per rendered prompt.",
        "no_engine_errors": "Warns when the engine failed on any request.",
    },
)
def raw_responses(
    context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource, engine: EngineResource
) -> AssetResult:
    settle_heap()
    key = model_and_task(context)
    spec, task = themis.model(key.model), themis.task(key.task)
    with warehouse.connect() as conn:
        prompts = read_upstream_frame(conn, "prompts", key)
        upstream = read_generation(conn, "prompts", key)
    check_answer_budget(spec, key, prompts)  # budget + the largest answer budget must fit, before any engine
    weights = themis.weights(spec)
    answerer = answerer_for(spec, weights, themis=themis, engine=engine, warehouse=warehouse)
    answered = answer_prompts(
        task, key, prompts, answerer, lambda: from_frame("task_items", read_stage(warehouse, "task_items", key), Item)
    )
    prompt_rows = prompts.height
    del prompts  # the partition's prompts are not held while its answers are written
    info = engine.loaded_info() if answered.stats.sent else None
    config = run_config(spec, weights, task, info, engine.output_identity(), answered.precision)
    now = datetime.now(UTC).replace(tzinfo=None)
    run_row = {"model": key.model, "task": key.task, "run_id": context.run_id, "materialized_at": now, "config": config}
    with warehouse.connect() as conn:
        stored, written = replace_stage_frame(
            conn, "responses", key, answered.frame, run_id=context.run_id, upstream=upstream
        )
        append_rows(conn, "evaluation_runs", rows_frame("evaluation_runs", [run_row]))
    rows, errors = stored.height, answered.stats.dispatch.errors
    if errors == rows and rows:
        raise RuntimeError(f"every request failed for {key}: {answered.frame.get_column('error')[0]}")
    return MaterializeResult(
        check_results=[
            checks.rows_match("responses_match_prompts", rows, prompt_rows, "responses"),
            checks.no_engine_errors(errors, rows),
        ],
        metadata=metadata.responses_metadata(
            task, rows, spec, weights, engine, answered, themis.request_cache, written
        ),
    )


@evaluation_asset(
    description="One judgment per item: what the responses mean, and whether they could be parsed.",
    deps=[raw_responses],
    pool=ENGINE_POOL,  # LangBiTe's second opinion loads a judge model's engine here
    checks={"parse_success_rate": "Warns when under 90% of replies parse."},
)
def judgments(
    context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource, engine: EngineResource
) -> AssetResult:
    key, task = _partition_task(context, themis)
    with warehouse.connect() as conn:
        items = read_upstream_frame(conn, "task_items", key)
        prompts = read_upstream_frame(conn, "prompts", key, required=False) if reads_prompts(task) else None
        responses = read_upstream_frame(conn, "responses", key)
        upstream = read_generation(conn, "responses", key)
    replies = PartitionReplies(items, responses, lambda: read_stage(warehouse, "prompts", key), prompts)
    del items, prompts, responses
    declares_reasoning = themis.model(key.model).reasoning is not None
    answerers = model_answerers(themis, engine, warehouse)
    judged = judge_partition(task, key, replies, declares_reasoning=declares_reasoning, answerers=answerers)
    del replies  # not held while the judgments are written (at 10^6 requests: hundreds of MB)
    with warehouse.connect() as conn:
        _, written = replace_stage_frame(conn, "judgments", key, judged.frame, run_id=context.run_id, upstream=upstream)
    parsed = int(judged.frame.get_column("parsed").sum())
    return MaterializeResult(
        check_results=[checks.parse_success(parsed, judged.frame.height)],
        metadata=metadata.judgments_metadata(task, judged, themis.request_cache, written),
    )


@evaluation_asset(
    description="Bias metrics with bootstrap CIs, headline and per subset; also appended to metric_history. "
    "A metric a judge model counted is also written to judged_metrics with its judge, the judge's kappa on "
    "its calibration set and its value corrected for the judge's measured errors (or why there is none).",
    deps=[judgments],
    checks={
        "ci_contains_estimate": "CIs are ordered and contain their estimate.",
        "headline_metrics_present": "Every declared headline metric has a value.",
    },
)
def bias_metrics(context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource) -> AssetResult:
    key, task = _partition_task(context, themis)
    with warehouse.connect() as conn:
        judged_rows = read_upstream_frame(conn, "judgments", key)
        upstream = read_generation(conn, "judgments", key)
        reasoned = carries_reasoning(conn, key.model, key.task)  # a server or an import split the replies
    metrics = metric_values(
        task,
        judged_rows,
        reasoning=lambda: themis.model(key.model).reasoning is not None or reasoned,
        calibrations=StoredCalibrations(warehouse),
    )
    del judged_rows
    now = datetime.now(UTC).replace(tzinfo=None)
    judged = judged_metrics_frame(metrics.judged, key, context.run_id, now)
    with warehouse.connect() as conn:  # the judged values with the metrics they qualify: one transaction
        frame, written = replace_stage(
            conn, "metric_values", key, metrics.values, run_id=context.run_id, upstream=upstream, materialized_at=now,
            beside=[Write("judged_metrics", judged, partition_scope(key.model, key.task))],
        )  # fmt: skip
        append_rows(conn, "metric_history", frame)
    declared = [metric.name for metric in task.spec.metrics if metric.headline]
    return MaterializeResult(
        check_results=[checks.ci_contains_estimate(frame), checks.headline_present(frame, declared)],
        metadata=metadata.metrics_metadata(task, frame, judged, written),
    )
