"""LangBiTe's template augmentation as an asset: a generator model writes templates for a langbite task.

Partitioned like the evaluation chain, ``model|task``, but here ``model`` is the *generator*: the
registered model the task's ``template_augmentation.generator`` names. Its engine comes from the
same ``EngineResource`` (``engine_for``) as every evaluation's, and every reply becomes rows of
``langbite_augmented_templates`` (accepted and rejected templates, unparsed replies) with the
generator's prompt, its sampling settings and the run id. The langbite task's ``task_dataset``
reads the accepted rows when the option is set (``tasks/langbite/utils.py: augmented_library``).
Why a separate asset rather than generation inside the task's run: the generator is another
model than the evaluated one, and its templates are data for every model evaluated on the
scenario -- generated once, recorded, and reused, not regenerated per evaluated model.
"""

from collections import Counter
from datetime import UTC, datetime

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from themis_dagster import __version__
from themis_dagster.assets.factory import ROW_COUNT, AssetResult
from themis_dagster.engines.dispatch import dispatch
from themis_dagster.exchange import Request, Response
from themis_dagster.partitions import evaluation_partitions, model_and_task
from themis_dagster.resources import EngineResource, ThemisConfig, WarehouseResource
from themis_dagster.runs.pools import ENGINE_POOL
from themis_dagster.tasks.langbite import augmentation
from themis_dagster.warehouse.frames import rows_frame
from themis_dagster.warehouse.partitions import replace_partition
from themis_dagster.warehouse.schema import ensure_schema

TABLE = "langbite_augmented_templates"


@asset(
    partitions_def=evaluation_partitions,
    group_name="langbite",
    kinds={"duckdb", "vllm"},
    code_version=__version__,
    pool=ENGINE_POOL,
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
    weights = themis.weights(spec)

    def send(requests: list[Request]) -> list[Response]:
        return dispatch(engine.engine_for(spec, weights), requests, retries=task.params.retries())[0]

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
        }
    )
