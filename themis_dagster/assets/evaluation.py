"""The evaluation chain, one DuckDB table per stage, partitioned by model x task.

task_dataset -> rendered_prompts -> raw_responses -> judgments -> bias_metrics

Each asset reads its upstream rows from the warehouse and replaces its own partition's
rows in one transaction, so a re-run never duplicates anything. Connections are opened
per stage and never held while the engine works.
"""

import json
import time
from dataclasses import asdict, replace
from datetime import UTC, datetime

import polars as pl
from dagster import (
    AssetExecutionContext,
    DataVersion,
    MaterializeResult,
    MetadataValue,
)

from themis_dagster.assets import checks
from themis_dagster.assets.answering import AnswerStats, answer_again, answerer_for, answering_metadata
from themis_dagster.assets.factory import ROW_COUNT, AssetResult, evaluation_asset
from themis_dagster.assets.families import dataset_input_deps, dataset_inputs
from themis_dagster.assets.judge_calibration import calibrations_for, refusal_calibration
from themis_dagster.assets.stage import (
    RECORD_CHUNK,
    ByItem,
    chunked,
    generation_metadata,
    item_local,
    preview,
    read_generation,
    read_upstream,
    read_upstream_frame,
    replace_stage,
    replace_stage_frame,
    settle_heap,
    stage_frame,
    task_metadata,
)
from themis_dagster.columnar.columnar import (
    columnar_items,
    columnar_judge,
    columnar_metrics,
    columnar_requests,
    items_frame,
    judged_frame,
    requests_frame,
)
from themis_dagster.columnar.reply_guard import GUARD_OUTCOMES, GUARDED, guard_replies, relabel, withheld_rates
from themis_dagster.exchange import GenerationParams, Request, Response
from themis_dagster.judging.correction import JudgedValue
from themis_dagster.judging.questions import CalibratedJudge
from themis_dagster.partitions import EvaluationPartition, model_and_task
from themis_dagster.provenance import code_version
from themis_dagster.refusals.judge import RefusalJudge, read_refusal_class
from themis_dagster.refusals.judged import judge_refusals, refusal_judged_values, refusal_requests
from themis_dagster.refusals.outcome import marked as refusals_marked
from themis_dagster.refusals.outcome import refusal_metrics
from themis_dagster.registry.models import check_reasoning_budget
from themis_dagster.resources import EngineResource, ThemisConfig, WarehouseResource
from themis_dagster.runs.pools import ENGINE_POOL
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.spec import Item, JudgePanel, Judgment, MetricValue
from themis_dagster.warehouse.appends import append_rows
from themis_dagster.warehouse.frames import from_frame, iter_records, rows_frame, to_frame
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
    paths = {name: f.path for name, f in files.items()}
    combined_sha = "+".join(f.sha256 for f in files.values())
    if (columnar := columnar_items(task)) is not None:  # a column at a time (columnar/columnar.py)
        frame = items_frame(columnar, key, paths, task.params, combined_sha)
    else:
        items = task.module.load_items(paths, task.params)
        frame = stage_frame("task_items", key, chunked(items), dataset_sha256=combined_sha)
    with warehouse.connect() as conn:
        _, written = replace_stage_frame(conn, "task_items", key, frame, run_id=context.run_id)
    return MaterializeResult(
        metadata={
            **task_metadata(task),
            ROW_COUNT: frame.height,
            "dataset": task.spec.dataset,
            "dataset_files": MetadataValue.json(
                {
                    name: {
                        "sha256": f.sha256,
                        "url": f.url,
                        "origin": f.origin,
                        "path": str(f.path),
                        "matches_pinned_version": f.matches_pinned_version,
                    }
                    for name, f in files.items()
                }
            ),
            "dataset_sha256": combined_sha,
            "license": task.spec.license_note,
            **{f"upstream/{name}": len(rows) for name, rows in task.inputs.upstream.items()},
            **generation_metadata(written),
            "preview": preview(frame.select("item_id", "subset", "fields")),
        },
        data_version=DataVersion(combined_sha[:64]),
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
    if (columnar := columnar_requests(task)) is not None:  # a column at a time (columnar/columnar.py)
        frame = requests_frame(columnar, key, items, task.params, task.templates)
    else:
        if item_local(task):  # a chunk of items at a time
            batches = iter_records("task_items", items, Item, RECORD_CHUNK)
        else:
            batches = iter([from_frame("task_items", items, Item)])
        requests = (
            chunk
            for batch in batches
            for chunk in chunked(task.module.build_requests(batch, task.params, task.templates))
        )
        frame = stage_frame("prompts", key, requests)
    with warehouse.connect() as conn:
        _, written = replace_stage_frame(conn, "prompts", key, frame, run_id=context.run_id, upstream=upstream)
    template_hashes = {name: task.template_sha256(name) for name in task.templates}
    item_ids, requested = set(items.get_column("item_id").to_list()), set(frame.get_column("item_id").to_list())
    return MaterializeResult(
        check_results=[checks.every_item_has_requests(item_ids, requested)],
        metadata={
            **task_metadata(task),
            ROW_COUNT: frame.height,
            "items": items.height,
            "request_type": task.spec.request_type,
            "template_sha256": MetadataValue.json(template_hashes),
            "generation_params": MetadataValue.json(task.params.generation.model_dump(mode="json")),
            "preview": preview(frame.select("request_id", "context", "continuation", "prompt", "template")),
            **generation_metadata(written),
        },
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
    spec = themis.model(key.model)
    task = themis.task(key.task)
    with warehouse.connect() as conn:
        prompts = read_upstream_frame(conn, "prompts", key)
        upstream = read_generation(conn, "prompts", key)
    if spec.reasoning is not None:  # budget + the largest answer budget must fit, before any engine starts
        check_reasoning_budget(spec, _largest_answer_budget(prompts), f"task {key.task}")
    weights = themis.weights(spec)
    identity = engine.output_identity()
    answerer = answerer_for(spec, weights, themis=themis, engine=engine, warehouse=warehouse)
    started = time.perf_counter()
    answers, answering = answerer.answer_frame(prompts, retries=task.params.retries())
    resent = 0
    if task.resend is not None and task.resend.rounds(task.params) > 0:  # LangBiTe: a few hundred requests
        with warehouse.connect() as conn:
            items = read_upstream(conn, "task_items", key, Item)
        records, again, resent = answer_again(
            task.resend,
            task.params,
            items,
            from_frame("prompts", prompts, Request),
            from_frame("responses", answers, Response),
            answerer,
            retries=task.params.retries(),
        )
        answers = to_frame("responses", records, model=key.model, task=key.task).select(answers.columns)
        answering.add(again)
        answering.dispatch.errors = int(answers.get_column("error").is_not_null().sum())
    duration = time.perf_counter() - started
    prompt_rows = prompts.height
    del prompts  # the partition's prompts are not held while its answers are written
    stats = answering.dispatch
    info = engine.loaded_info() if answering.sent else None
    loaded_now = info is not None and engine.loaded_in_last_call
    run_config = {
        "model": spec.model_dump(mode="json"),
        "weights": weights.__dict__,
        "lora_adapter_path": weights.lora_path,
        "lora_adapter_sha256": weights.lora_sha256,
        "task": task.spec.model_dump(mode="json"),
        "task_params": task.params.model_dump(mode="json"),
        "engine": info.__dict__ if info is not None else identity | {"loaded": False},
        "precision": answerer.precision.__dict__ if answerer.precision is not None else None,
        "code_version": code_version(),
    }
    now = datetime.now(UTC).replace(tzinfo=None)
    run_row = {"model": key.model, "task": key.task, "run_id": context.run_id, "materialized_at": now}
    frame = answers.with_columns(pl.lit(key.model).alias("model"), pl.lit(key.task).alias("task"))
    with warehouse.connect() as conn:
        rows_written, written = replace_stage_frame(
            conn, "responses", key, frame, run_id=context.run_id, upstream=upstream
        )
        append_rows(conn, "evaluation_runs", rows_frame("evaluation_runs", [run_row | {"config": run_config}]))
    rows = rows_written.height
    if stats.errors == rows and rows:
        raise RuntimeError(f"every request failed for {key}: {answers.get_column('error')[0]}")
    return MaterializeResult(
        check_results=[
            checks.rows_match("responses_match_prompts", rows, prompt_rows, "responses"),
            checks.no_engine_errors(stats.errors, rows),
        ],
        metadata={
            **task_metadata(task),
            ROW_COUNT: rows,
            "model_id": key.model,
            "model_source": MetadataValue.json(spec.source.model_dump(mode="json")),
            "model_revision": weights.revision,
            "weights_sha256": weights.weights_sha256,
            **(
                {"lora_adapter_path": weights.lora_path, "lora_adapter_sha256": weights.lora_sha256}
                if weights.lora_path is not None
                else {}
            ),
            "engine": info.engine if info is not None else f"{identity['engine']} (not loaded: every answer reused)",
            **(
                {"dtype": answerer.precision.dtype, "dtype_reason": answerer.precision.reason}
                if answerer.precision is not None
                else {}
            ),
            "engine_settings": MetadataValue.json(json.loads(json.dumps(info.settings if info else {}, default=str))),
            "library_versions": MetadataValue.json(info.versions if info is not None else {}),
            "engine_load_seconds": round(info.load_seconds, 2) if info is not None and loaded_now else 0.0,
            "engine_reused": info is not None and not loaded_now,
            "generation_params": MetadataValue.json(task.params.generation.model_dump(mode="json")),
            "duration_seconds": round(duration, 2),
            "engine_seconds": round(stats.engine_seconds, 2),
            "handoff_seconds": round(stats.handoff_seconds, 3),
            "prompt_tokens": stats.prompt_tokens,
            "output_tokens": stats.output_tokens,
            "tokens_per_second": round(stats.tokens_per_second, 1),
            "errors": stats.errors,
            "retried_requests": stats.retried,
            "resent_unjudged": resent,
            **answering_metadata(answering, themis.request_cache),
            **generation_metadata(written),
        },
    )


def _largest_answer_budget(prompts: pl.DataFrame) -> int:
    """The largest ``max_tokens`` among a partition's chat requests (0: none; a request without one: the default)."""
    chats = prompts.filter(pl.col("request_type") == "chat").get_column("gen_params").unique().to_list()
    return max((GenerationParams.model_validate(json.loads(text or "{}")).max_tokens for text in chats), default=0)


def _second_opinion(
    themis: ThemisConfig, engine: EngineResource, warehouse: WarehouseResource, task: LoadedTask, judged: list[Judgment]
) -> tuple[list[Judgment], int, AnswerStats]:
    """Let a second registered model re-judge what the task's rules could not settle.

    Called only for a task that declares a ``SecondOpinion`` whose judge model its params
    name (LangBiTe's useLLMEval): only then may this stage load an engine, the judge
    model's (the evaluated model's is no longer needed), and only for questions the request
    cache has no answer to. A ``JudgePanel`` with more judges (BOLD's ``panel_judges``) has
    each of them asked the same questions in turn.
    """
    opinion, judge_model = task.second_opinion, task.judge_model
    assert opinion is not None and judge_model, "only for tasks that declare a second opinion"
    asks: list[Request] = opinion.requests(judged, task.params)
    if not asks:
        return judged, 0, AnswerStats()
    panel = opinion.judges(task.params) if isinstance(opinion, JudgePanel) else (judge_model,)
    answers: dict[str, list[Response]] = {}
    stats = AnswerStats()
    for judge in panel:  # one engine at a time; each judge's answers under its own fingerprint
        spec = themis.model(judge)
        answerer = answerer_for(spec, themis.weights(spec), themis=themis, engine=engine, warehouse=warehouse)
        answers[judge], judge_stats = answerer.answer(asks, retries=task.params.retries())
        stats.add(judge_stats)
    if isinstance(opinion, JudgePanel):
        return opinion.apply_panel(judged, asks, answers, task.params), len(asks) * len(panel), stats
    return opinion.apply(judged, asks, answers[judge_model], task.params), len(asks), stats


def _refusal_judge(
    themis: ThemisConfig,
    engine: EngineResource,
    warehouse: WarehouseResource,
    task: LoadedTask,
    frame: pl.DataFrame,
    prompts: pl.DataFrame,
    responses: pl.DataFrame,
) -> tuple[pl.DataFrame, int, AnswerStats]:
    """The judgments' ``refused`` decided by the task's ``refusal_judge_model`` (refusals/judged.py).

    The judge is asked XSTest's classifier question about every reply through the answering path
    (its own engine and request cache), as in its calibration on XSTest.
    """
    judge_model = task.params.refusal_judge_model
    assert judge_model, "only for a task that names a refusal judge"
    asks = refusal_requests(prompts, responses, RefusalJudge())
    if not asks:
        return frame, 0, AnswerStats()
    spec = themis.model(judge_model)
    answerer = answerer_for(spec, themis.weights(spec), themis=themis, engine=engine, warehouse=warehouse)
    answers, stats = answerer.answer(asks, retries=task.params.retries())
    labels = {
        ask.request_id.removesuffix(":refusal"): read_refusal_class(None if reply.error else reply.text)
        for ask, reply in zip(asks, answers, strict=True)
    }
    return judge_refusals(frame, responses, labels), len(asks), stats


def _judged_by_chunks(
    task: LoadedTask, key: EvaluationPartition, items: pl.DataFrame, prompts: pl.DataFrame, responses: pl.DataFrame
) -> pl.DataFrame:
    """An item-local task's judgments, ``RECORD_CHUNK`` items at a time (what lines rows up dies on return)."""
    requests, answers = ByItem(items, prompts), ByItem(items, responses)
    judged_chunks = (
        task.module.judge(
            batch,
            requests.lazy_records("prompts", Request, start, start + len(batch)),
            answers.records("responses", Response, start, start + len(batch)),
            task.params,
        )
        for start, batch in zip(
            range(0, items.height, RECORD_CHUNK), iter_records("task_items", items, Item, RECORD_CHUNK), strict=True
        )
    )
    return stage_frame("judgments", key, judged_chunks)


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
    columnar = columnar_judge(task)
    with warehouse.connect() as conn:
        items = read_upstream_frame(conn, "task_items", key)
        # the requests only where judge reads them (a columnar judge does not)
        prompts = read_upstream_frame(conn, "prompts", key, required=False) if columnar is None else None
        responses = read_upstream_frame(conn, "responses", key)
        upstream = read_generation(conn, "responses", key)
    # replies that are no answer (reasoning unfinished, truncated) never reach the task's parser
    guarded = guard_replies(responses, themis.model(key.model).reasoning is not None)
    responses = guarded.responses
    second_opinions, answering = 0, AnswerStats()
    if columnar is not None:  # the whole partition a column at a time (columnar/columnar.py)
        frame = judged_frame(columnar, key, items, responses, task.params)
    elif item_local(task) and task.second_opinion is None:  # a chunk of items at a time
        assert prompts is not None
        frame = _judged_by_chunks(task, key, items, prompts, responses)
    else:
        assert prompts is not None
        judged = task.module.judge(
            from_frame("task_items", items, Item),
            from_frame("prompts", prompts, Request),
            from_frame("responses", responses, Response),
            task.params,
        )
        if task.second_opinion is not None and task.judge_model:
            judged, second_opinions, answering = _second_opinion(themis, engine, warehouse, task, judged)
        frame = stage_frame("judgments", key, chunked(judged))
    frame = relabel(frame, guarded)
    refusal_questions = 0
    if task.params.refusal_judge_model and refusals_marked(frame):  # a model decides the refusals
        if prompts is None:
            with warehouse.connect() as conn:
                prompts = read_upstream_frame(conn, "prompts", key)
        frame, refusal_questions, refusal_stats = _refusal_judge(
            themis, engine, warehouse, task, frame, prompts, responses
        )
        answering.add(refusal_stats)
    del items, prompts, responses  # not held while the judgments are written (at 10^6 requests: hundreds of MB)
    with warehouse.connect() as conn:
        _, written = replace_stage_frame(conn, "judgments", key, frame, run_id=context.run_id, upstream=upstream)
    rows = frame.height
    parsed = int(frame.get_column("parsed").sum())
    outcomes = frame.group_by("outcome").len().sort("outcome")
    return MaterializeResult(
        check_results=[checks.parse_success(parsed, rows)],
        metadata={
            **task_metadata(task),
            ROW_COUNT: rows,
            "parsed": parsed,
            "second_opinions": second_opinions,
            **({"refusal_judge_questions": refusal_questions} if task.params.refusal_judge_model else {}),
            **(
                answering_metadata(answering, themis.request_cache)
                if task.judge_model or task.params.refusal_judge_model
                else {}
            ),  # the judges'
            "unparsed": rows - parsed,
            "parse_success_rate": round(parsed / rows, 4) if rows else 0.0,
            "outcomes": MetadataValue.json(
                dict(zip(outcomes["outcome"].to_list(), outcomes["len"].to_list(), strict=True))
            ),
            **({"withheld_replies": MetadataValue.json(guarded.counts())} if guarded.withheld else {}),
            **({"refused": int(frame.get_column("refused").sum())} if refusals_marked(frame) else {}),
            **generation_metadata(written),
        },
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
    columnar = columnar_metrics(task)
    with warehouse.connect() as conn:
        judged_rows = read_upstream_frame(conn, "judgments", key)
        upstream = read_generation(conn, "judgments", key)
        reasoned = carries_reasoning(conn, key.model, key.task)  # a server or an import split the replies

    def task_metrics(rows: pl.DataFrame) -> list[MetricValue]:
        if columnar is not None:  # the judgments a column at a time (columnar/columnar.py)
            return columnar(rows, task.params)
        return task.module.compute_metrics(from_frame("judgments", rows, Judgment), task.params)

    values = task_metrics(judged_rows)
    judge = task.second_opinion
    judged: list[JudgedValue] = []
    if task.judge_model and isinstance(judge, CalibratedJudge):  # each judged metric beside its judge's agreement
        records = from_frame("judgments", judged_rows, Judgment)
        judged = judge.judged_values(records, values, task.params, calibrations_for(warehouse, task))
        del records
    if (refusal_judge := task.params.refusal_judge_model) and refusals_marked(judged_rows):  # refusals by a model
        calibration = refusal_calibration(warehouse, refusal_judge)
        judged = [*judged, *refusal_judged_values(judged_rows, refusal_judge, calibration, task.params)]
    if refusals_marked(judged_rows):  # refusals beside the task's metrics, and its metrics over answers
        marks = {f"{scale.metric}_mark" for scale in task.hooks.marks}  # grades of the published metric only
        values = [*values, *refusal_metrics(judged_rows, values, task_metrics, task.params, marks)]
    if task.spec.request_type in GUARDED and (
        themis.model(key.model).reasoning is not None or reasoned or judged_rows["outcome"].is_in(GUARD_OUTCOMES).any()
    ):  # how many replies the guard withheld (columnar/reply_guard.py)
        values = [*values, *withheld_rates(judged_rows, task.params)]
    del judged_rows
    now = datetime.now(UTC).replace(tzinfo=None)
    judged_frame = rows_frame(
        "judged_metrics",
        [asdict(value) | {"model": key.model, "task": key.task, "run_id": context.run_id, "materialized_at": now}
         for value in judged],
    )  # fmt: skip
    with warehouse.connect() as conn:  # the judged values with the metrics they qualify: one transaction
        frame, written = replace_stage(
            conn, "metric_values", key, values, run_id=context.run_id, upstream=upstream, materialized_at=now,
            beside=[Write("judged_metrics", judged_frame, partition_scope(key.model, key.task))],
        )  # fmt: skip
        append_rows(conn, "metric_history", frame)
    headline = frame.filter(pl.col("subset").is_null()).select("metric", "value", "ci_low", "ci_high", "n")
    declared = [metric.name for metric in task.spec.metrics if metric.headline]
    return MaterializeResult(
        check_results=[checks.ci_contains_estimate(frame), checks.headline_present(frame, declared)],
        metadata={
            **task_metadata(task),
            ROW_COUNT: frame.height,
            "headline": preview(headline, rows=20),
            **generation_metadata(written),
            **(
                {"judged_metrics": preview(judged_frame.drop("model", "task", "run_id", "materialized_at"), rows=20)}
                if judged
                else {}
            ),
            **{
                f"metric/{row['metric']}": float(row["value"])
                for row in headline.iter_rows(named=True)
                if row["value"] is not None
            },
        },
    )
