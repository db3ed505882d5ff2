"""LangBiTe's own assets (its family's ``assets``): the template augmentation and the three reports.

``langbite_augmented_templates``: a generator model writes templates for a langbite task.

Partitioned like the evaluation chain, ``model|task``, but here ``model`` is the *generator*: the
registered model the task's ``template_augmentation.generator`` names. Its requests take the
evaluated model's path (``evaluation/answering.py``: the request cache, answers committed chunk by
chunk, the same ``EngineResource``), so a re-run sends only what is not cached (the generator's
requests are seeded); every reply becomes rows of
``langbite_augmented_templates`` (accepted and rejected templates, unparsed replies) with the
generator's prompt, its sampling settings and the run id. The asset is an input of ``task_dataset``:
for a langbite task with the option set, that stage reads the generator's latest rows for the
task's augmentation key (``augmentation_inputs``) and hands them to the task's ``load_items``.
Why a separate asset rather than generation inside the task's run: the generator is another
model than the evaluated one, and its templates are data for every model evaluated on the
scenario -- generated once, recorded, and reused, not regenerated per evaluated model.

``langbite_reports``: LangBiTe's three reports (responses, evaluations, global evaluation) as
warehouse tables (declared in the family's ``family.yaml``) and as CSV files with LangBiTe's column
names, rebuilt with the other reports after new metrics.
"""

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
from dagster import AssetDep, AssetExecutionContext, MaterializeResult, MetadataValue

from themis_dagster.assets.answerers import answerer_for
from themis_dagster.assets.factory import ROW_COUNT, AssetResult, model_asset, report_asset
from themis_dagster.assets.families import DatasetInputs
from themis_dagster.evaluation.answering import AnswerStats, answering_metadata
from themis_dagster.exchange import Request, Response
from themis_dagster.partitions import evaluation_partitions, model_and_task
from themis_dagster.resources import EngineResource, ThemisConfig, WarehouseResource
from themis_dagster.tasks.langbite import augmentation
from themis_dagster.tasks.langbite.reports import langbite_reports as build_langbite_reports
from themis_dagster.tasks.langbite.reports import write_reports
from themis_dagster.tasks.langbite.utils import AUGMENTED_TEMPLATES
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.spec import Judgment
from themis_dagster.warehouse.frames import from_frame, rows_frame
from themis_dagster.warehouse.partitions import replace_partition, replace_table
from themis_dagster.warehouse.reads import read_partition, table_exists
from themis_dagster.warehouse.schema import ensure_schema

TABLE = "langbite_augmented_templates"
REPORT_TABLES = {
    "responses": "langbite_responses",
    "evaluations": "langbite_evaluations",
    "global_evaluation": "langbite_global_evaluation",
}


@model_asset(
    partitions_def=evaluation_partitions,
    group="langbite",
    description="LangBiTe's template augmentation: templates a generator model (the partition's model) writes "
    "for a langbite task's scenario, accepted or rejected, with the generator's prompt.",
)
def langbite_augmented_templates(
    context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource, engine: EngineResource
) -> AssetResult:
    key = model_and_task(context)
    spec = themis.model(key.model)  # an unknown generator fails here, before any engine
    task = themis.task(key.task)
    option = getattr(task.params, "template_augmentation", None)
    if option is None:
        raise ValueError(f"task {key.task!r} has no template_augmentation option: nothing to generate")
    if option.generator != key.model:
        raise ValueError(
            f"template_augmentation.generator of task {key.task!r} is {option.generator!r}, "
            f"not this partition's model {key.model!r}"
        )
    scenario = task.params.scenario_model  # type: ignore[attr-defined] # a langbite task's Params
    answerer = answerer_for(spec, themis.weights(spec), themis=themis, engine=engine, warehouse=warehouse)
    answering = AnswerStats()

    def send(requests: list[Request]) -> list[Response]:
        """The generator's answers through the one answering path (request cache, per-chunk commits)."""
        replies, stats = answerer.answer(requests, retries=task.params.retries())
        answering.add(stats)
        return replies

    rows = augmentation.generate(option, scenario, send)
    now = datetime.now(UTC).replace(tzinfo=None)
    partition = {"model": key.model, "task": key.task, "run_id": context.run_id, "materialized_at": now}
    frame = rows_frame(TABLE, [row | partition for row in rows])
    with warehouse.connect() as conn:
        ensure_schema(conn)
        replace_partition(conn, TABLE, frame, key.model, key.task)  # a re-run replaces the partition's rows
    statuses = Counter(row["status"] for row in rows)
    reasons = Counter(row["reason"] for row in rows if row["status"] == "rejected")
    accepted = [row["prompt"] for row in rows if row["status"] == "accepted"]
    return MaterializeResult(
        metadata={
            ROW_COUNT: frame.height,
            "generator": key.model,
            "augmentation_sha256": augmentation.augmentation_key(option, scenario),
            "accepted": statuses["accepted"],
            "rejected": statuses["rejected"],
            "unparsed_replies": statuses["unparsed"],
            "engine_errors": statuses["engine_error"],
            "rejection_reasons": MetadataValue.json(dict(reasons)),
            "templates": MetadataValue.md("\n".join(f"- {prompt}" for prompt in accepted[:20]) or "(none)"),
            **answering_metadata(answering, themis.request_cache),
        }
    )


def read_augmented_rows(conn: Any, generator: str, key: str) -> list[dict[str, Any]] | None:
    """The rows of the latest materialization with this augmentation key (None: there is none)."""
    if not table_exists(conn, "langbite_augmented_templates"):
        return None
    latest = conn.execute(
        "SELECT task, run_id FROM langbite_augmented_templates WHERE model = ? AND augmentation_sha256 = ? "
        "ORDER BY materialized_at DESC LIMIT 1",
        [generator, key],
    ).fetchone()
    if latest is None:
        return None
    cursor = conn.execute(
        "SELECT pair, attempt, position, status, concern, prompt, oracle_prediction FROM langbite_augmented_templates "
        "WHERE model = ? AND task = ? AND run_id = ? AND augmentation_sha256 = ?",
        [generator, latest[0], latest[1], key],
    )
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def augmentation_inputs(warehouse: WarehouseResource, task: LoadedTask) -> dict[str, list[dict[str, Any]]]:
    """What ``task_dataset`` hands the task from this asset (``TaskInputs.upstream``).

    Nothing for a task without ``template_augmentation`` (no connection opened); for one with it,
    the generator's latest rows for the task's augmentation key, when it has written any.
    """
    option = getattr(task.params, "template_augmentation", None)
    if option is None:
        return {}
    key = augmentation.augmentation_key(option, task.params.scenario_model)  # type: ignore[attr-defined]
    with warehouse.connect() as conn:
        rows = read_augmented_rows(conn, option.generator, key)
    return {} if rows is None else {AUGMENTED_TEMPLATES: rows}


def _provider(config_json: str | None) -> str:
    """The engine that produced the replies (LangBiTe's 'Provider'), from the run's stored config."""
    try:
        return str(json.loads(config_json or "{}")["engine"]["engine"])
    except (ValueError, KeyError, TypeError):
        return "imported"


@report_asset(
    description="LangBiTe's responses / evaluations / global evaluation reports, as tables and CSV files.",
    deps=[AssetDep("bias_metrics")],
    kinds=["duckdb", "csv"],
)
def langbite_reports(context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource) -> AssetResult:
    collected: dict[str, list[pl.DataFrame]] = {name: [] for name in REPORT_TABLES}
    files: list[str] = []
    with warehouse.connect() as conn:
        partitions = conn.execute(
            "SELECT DISTINCT j.model, j.task, (SELECT config FROM evaluation_runs r WHERE r.model = j.model "
            "AND r.task = j.task ORDER BY materialized_at DESC LIMIT 1) FROM judgments j "
            "WHERE j.task LIKE 'langbite%' ORDER BY 1, 2"
        ).fetchall()
        for model, task, config in partitions:
            judged = from_frame("judgments", read_partition(conn, "judgments", model, task), Judgment)
            reports = build_langbite_reports(judged, model, provider=_provider(config))
            folder = Path(themis.exports_dir) / "langbite" / model / task
            files += [str(path) for path in write_reports(reports, folder).values()]
            for name, frame in reports.items():
                collected[name].append(pl.from_pandas(frame).with_columns(pl.lit(task).alias("task")))
    counts = {}
    with warehouse.connect() as conn:
        for name, table in REPORT_TABLES.items():
            frames = collected[name]
            if frames:
                counts[table] = replace_table(conn, table, pl.concat(frames, how="diagonal_relaxed"))
            else:
                counts[table] = replace_table(conn, table, rows_frame(table, []))
    return MaterializeResult(
        metadata={
            ROW_COUNT: counts.get("langbite_global_evaluation", 0),
            "partitions": len(partitions),
            "rows": MetadataValue.json(counts),
            "csv_files": MetadataValue.json(files),
        }
    )


ASSETS = [langbite_augmented_templates, langbite_reports]
"""The family's assets: the generator's templates on demand (group langbite), the reports with the others."""
DATASET_INPUTS = DatasetInputs(TABLE, augmentation_inputs)
"""``task_dataset`` of a langbite task with ``template_augmentation`` reads its generator's templates."""
