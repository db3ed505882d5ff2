"""The evaluation chain, one DuckDB table per stage, partitioned by model x task.

task_dataset -> rendered_prompts -> raw_responses -> judgments -> bias_metrics

Each asset reads its upstream rows from the warehouse and replaces its own partition's
rows in one transaction, so a re-run never duplicates anything. Connections are opened
per stage and never held while the engine works.
"""

import json
import time
from datetime import UTC, datetime
from typing import Any

import polars as pl
from dagster import AssetExecutionContext, DataVersion, MaterializeResult, MetadataValue, asset

from themis_dagster import __version__
from themis_dagster.assets import checks
from themis_dagster.engines.dispatch import dispatch
from themis_dagster.exchange import Request, Response
from themis_dagster.partitions import evaluation_partitions, model_and_task
from themis_dagster.provenance import code_version
from themis_dagster.resources import EngineResource, ThemisConfig, WarehouseResource
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.spec import Item, Judgment
from themis_dagster.warehouse import append_rows, read_partition, replace_partition
from themis_dagster.warehouse.frames import from_frame, rows_frame, to_frame

GROUP = "evaluation"
ROW_COUNT = "dagster/row_count"


class UpstreamMissingError(RuntimeError):
    """An upstream stage has no rows for this partition: materialize it first."""


def _upstream(frame: pl.DataFrame, table: str, model: str, task: str) -> pl.DataFrame:
    if frame.is_empty():
        raise UpstreamMissingError(f"{table} has no rows for {model}|{task}; materialize the upstream asset first")
    return frame


def _task_metadata(task: LoadedTask) -> dict[str, Any]:
    return {
        "task": task.name,
        "task_fingerprint": task.spec.fingerprint(),
        "task_params": MetadataValue.json(task.params.model_dump(mode="json")),
        "seed": task.params.seed,
        "code_version": code_version(),
    }


def _preview(frame: pl.DataFrame, rows: int = 5) -> MetadataValue:
    head = frame.head(rows).to_pandas()
    return MetadataValue.md(head.to_markdown(index=False) if not head.empty else "(no rows)")


@asset(
    partitions_def=evaluation_partitions,
    group_name=GROUP,
    kinds={"duckdb"},
    code_version=__version__,
    description="The task's benchmark items, read from the dataset mirror or its canonical URL.",
)
def task_dataset(
    context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource
) -> MaterializeResult:  # type: ignore[type-arg]
    model, task_name = model_and_task(context)
    themis.model(model)  # an unknown model fails here, before anything is written
    task = themis.task(task_name)
    if judge_model := task.judge_model:
        themis.model(judge_model)  # a second-opinion model must be registered, checked before any engine
    files = themis.dataset_files(task)
    items = task.module.load_items({name: f.path for name, f in files.items()}, task.params)
    combined_sha = "+".join(f.sha256 for f in files.values())
    frame = to_frame("task_items", items, model=model, task=task_name, dataset_sha256=combined_sha)
    with warehouse.connect() as conn:
        rows = replace_partition(conn, "task_items", frame, model, task_name)
    return MaterializeResult(
        metadata={
            **_task_metadata(task),
            ROW_COUNT: rows,
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
            "preview": _preview(frame.select("item_id", "subset", "fields")),
        },
        data_version=DataVersion(combined_sha[:64]),
    )


@asset(
    partitions_def=evaluation_partitions,
    group_name=GROUP,
    kinds={"duckdb"},
    code_version=__version__,
    deps=[task_dataset],
    description="One row per engine request: contexts and continuations, or rendered prompts.",
    check_specs=[checks.spec("rendered_prompts", "every_item_has_requests", "Each item yields at least one request.")],
)
def rendered_prompts(
    context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource
) -> MaterializeResult:  # type: ignore[type-arg]
    model, task_name = model_and_task(context)
    task = themis.task(task_name)
    with warehouse.connect() as conn:
        items = from_frame(
            "task_items",
            _upstream(read_partition(conn, "task_items", model, task_name), "task_items", model, task_name),
            Item,
        )
    requests = task.module.build_requests(items, task.params, task.templates)
    frame = to_frame("prompts", requests, model=model, task=task_name)
    with warehouse.connect() as conn:
        rows = replace_partition(conn, "prompts", frame, model, task_name)
    template_hashes = {name: task.template_sha256(name) for name in task.templates}
    return MaterializeResult(
        check_results=[checks.every_item_has_requests({i.item_id for i in items}, {r.item_id for r in requests})],
        metadata={
            **_task_metadata(task),
            ROW_COUNT: rows,
            "items": len(items),
            "request_type": task.spec.request_type,
            "template_sha256": MetadataValue.json(template_hashes),
            "generation_params": MetadataValue.json(task.params.generation.model_dump(mode="json")),
            "preview": _preview(frame.select("request_id", "context", "continuation", "prompt", "template")),
        },
    )


@asset(
    partitions_def=evaluation_partitions,
    group_name=GROUP,
    kinds={"duckdb", "vllm"},
    code_version=__version__,
    deps=[rendered_prompts],
    description="The engine's raw answer to every request: logprobs or text, token counts, timing.",
    check_specs=[
        checks.spec("raw_responses", "responses_match_prompts", "One response per rendered prompt."),
        checks.spec("raw_responses", "no_engine_errors", "Warns when the engine failed on any request."),
    ],
)
def raw_responses(
    context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource, engine: EngineResource
) -> MaterializeResult:  # type: ignore[type-arg]
    model, task_name = model_and_task(context)
    spec = themis.model(model)
    task = themis.task(task_name)
    with warehouse.connect() as conn:
        requests = from_frame(
            "prompts",
            _upstream(read_partition(conn, "prompts", model, task_name), "prompts", model, task_name),
            Request,
        )
    weights = themis.weights(spec)
    started = time.perf_counter()
    loaded = engine.engine_for(spec, weights)
    answers, stats = dispatch(loaded, requests, retries=task.params.retries())
    duration = time.perf_counter() - started
    frame = to_frame("responses", answers, model=model, task=task_name)
    run_config = {
        "model": spec.model_dump(mode="json"),
        "weights": weights.__dict__,
        "lora_adapter_path": weights.lora_path,
        "lora_adapter_sha256": weights.lora_sha256,
        "task": task.spec.model_dump(mode="json"),
        "task_params": task.params.model_dump(mode="json"),
        "engine": loaded.info.__dict__,
        "code_version": code_version(),
    }
    now = datetime.now(UTC).replace(tzinfo=None)
    runs_row = rows_frame(
        "evaluation_runs",
        [{"model": model, "task": task_name, "run_id": context.run_id, "materialized_at": now, "config": run_config}],
    )
    with warehouse.connect() as conn:
        rows = replace_partition(conn, "responses", frame, model, task_name)
        append_rows(conn, "evaluation_runs", runs_row)
    if stats.errors == len(answers) and answers:
        raise RuntimeError(f"every request failed for {model}|{task_name}: {answers[0].error}")
    return MaterializeResult(
        check_results=[
            checks.rows_match("responses_match_prompts", rows, len(requests), "responses"),
            checks.no_engine_errors(stats.errors, rows),
        ],
        metadata={
            **_task_metadata(task),
            ROW_COUNT: rows,
            "model_id": model,
            "model_source": MetadataValue.json(spec.source.model_dump(mode="json")),
            "model_revision": weights.revision,
            "weights_sha256": weights.weights_sha256,
            **(
                {"lora_adapter_path": weights.lora_path, "lora_adapter_sha256": weights.lora_sha256}
                if weights.lora_path is not None
                else {}
            ),
            "engine": loaded.info.engine,
            "engine_settings": MetadataValue.json(json.loads(json.dumps(loaded.info.settings, default=str))),
            "library_versions": MetadataValue.json(loaded.info.versions),
            "engine_load_seconds": round(loaded.info.load_seconds, 2) if engine.loaded_in_last_call else 0.0,
            "engine_reused": not engine.loaded_in_last_call,
            "generation_params": MetadataValue.json(task.params.generation.model_dump(mode="json")),
            "duration_seconds": round(duration, 2),
            "engine_seconds": round(stats.engine_seconds, 2),
            "prompt_tokens": stats.prompt_tokens,
            "output_tokens": stats.output_tokens,
            "tokens_per_second": round(stats.tokens_per_second, 1),
            "errors": stats.errors,
            "retried_requests": stats.retried,
        },
    )


def _second_opinion(
    themis: ThemisConfig, engine: EngineResource, task: LoadedTask, judged: list[Judgment]
) -> tuple[list[Judgment], int]:
    """Let a second registered model re-judge what the task's rules could not settle (optional).

    A task opts in by declaring a ``SecondOpinion`` whose judge model its params name
    (LangBiTe's useLLMEval). The judge model's engine replaces the evaluated model's, which
    this stage no longer needs.
    """
    opinion, judge_model = task.second_opinion, task.judge_model
    if opinion is None or not judge_model:
        return judged, 0
    asks: list[Request] = opinion.requests(judged, task.params)
    if not asks:
        return judged, 0
    spec = themis.model(judge_model)
    replies, _ = dispatch(engine.engine_for(spec, themis.weights(spec)), asks, retries=task.params.retries())
    return opinion.apply(judged, asks, replies, task.params), len(asks)


@asset(
    partitions_def=evaluation_partitions,
    group_name=GROUP,
    kinds={"duckdb"},
    code_version=__version__,
    deps=[raw_responses],
    description="One judgment per item: what the responses mean, and whether they could be parsed.",
    check_specs=[checks.spec("judgments", "parse_success_rate", "Warns when under 90% of replies parse.")],
)
def judgments(
    context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource, engine: EngineResource
) -> MaterializeResult:  # type: ignore[type-arg]
    model, task_name = model_and_task(context)
    task = themis.task(task_name)
    with warehouse.connect() as conn:
        items = from_frame(
            "task_items",
            _upstream(read_partition(conn, "task_items", model, task_name), "task_items", model, task_name),
            Item,
        )
        requests = from_frame("prompts", read_partition(conn, "prompts", model, task_name), Request)
        responses = from_frame(
            "responses",
            _upstream(read_partition(conn, "responses", model, task_name), "responses", model, task_name),
            Response,
        )
    judged = task.module.judge(items, requests, responses, task.params)
    judged, second_opinions = _second_opinion(themis, engine, task, judged)
    frame = to_frame("judgments", judged, model=model, task=task_name)
    with warehouse.connect() as conn:
        rows = replace_partition(conn, "judgments", frame, model, task_name)
    parsed = sum(1 for judgment in judged if judgment.parsed)
    outcomes = frame.group_by("outcome").len().sort("outcome")
    return MaterializeResult(
        check_results=[checks.parse_success(parsed, rows)],
        metadata={
            **_task_metadata(task),
            ROW_COUNT: rows,
            "parsed": parsed,
            "second_opinions": second_opinions,
            "unparsed": rows - parsed,
            "parse_success_rate": round(parsed / rows, 4) if rows else 0.0,
            "outcomes": MetadataValue.json(
                dict(zip(outcomes["outcome"].to_list(), outcomes["len"].to_list(), strict=True))
            ),
        },
    )


@asset(
    partitions_def=evaluation_partitions,
    group_name=GROUP,
    kinds={"duckdb"},
    code_version=__version__,
    deps=[judgments],
    description="Bias metrics with bootstrap CIs, headline and per subset; also appended to metric_history.",
    check_specs=[
        checks.spec("bias_metrics", "ci_contains_estimate", "CIs are ordered and contain their estimate."),
        checks.spec("bias_metrics", "headline_metrics_present", "Every declared headline metric has a value."),
    ],
)
def bias_metrics(
    context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource
) -> MaterializeResult:  # type: ignore[type-arg]
    model, task_name = model_and_task(context)
    task = themis.task(task_name)
    with warehouse.connect() as conn:
        judged = from_frame(
            "judgments",
            _upstream(read_partition(conn, "judgments", model, task_name), "judgments", model, task_name),
            Judgment,
        )
    values = task.module.compute_metrics(judged, task.params)
    now = datetime.now(UTC).replace(tzinfo=None)
    frame = to_frame("metric_values", values, model=model, task=task_name, materialized_at=now, run_id=context.run_id)
    with warehouse.connect() as conn:
        rows = replace_partition(conn, "metric_values", frame, model, task_name)
        append_rows(conn, "metric_history", frame)
    headline = frame.filter(pl.col("subset").is_null()).select("metric", "value", "ci_low", "ci_high", "n")
    declared = [metric.name for metric in task.spec.metrics if metric.headline]
    return MaterializeResult(
        check_results=[checks.ci_contains_estimate(frame), checks.headline_present(frame, declared)],
        metadata={
            **_task_metadata(task),
            ROW_COUNT: rows,
            "headline": _preview(headline, rows=20),
            **{
                f"metric/{row['metric']}": float(row["value"])
                for row in headline.iter_rows(named=True)
                if row["value"] is not None
            },
        },
    )
