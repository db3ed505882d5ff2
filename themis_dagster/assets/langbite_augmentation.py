"""LangBiTe's template augmentation as an asset: a generator model writes templates for a langbite task.

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
"""

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue

from themis_dagster.assets.answerers import answerer_for
from themis_dagster.assets.factory import ROW_COUNT, AssetResult, model_asset
from themis_dagster.evaluation.answering import AnswerStats, answering_metadata
from themis_dagster.exchange import Request, Response
from themis_dagster.partitions import evaluation_partitions, model_and_task
from themis_dagster.resources import EngineResource, ThemisConfig, WarehouseResource
from themis_dagster.tasks.langbite import augmentation
from themis_dagster.tasks.langbite.utils import AUGMENTED_TEMPLATES
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.warehouse.frames import rows_frame
from themis_dagster.warehouse.partitions import replace_partition
from themis_dagster.warehouse.reads import table_exists
from themis_dagster.warehouse.schema import ensure_schema

TABLE = "langbite_augmented_templates"


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
