"""Store imported replies as a model's raw responses, then score them through the asset graph."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from dagster import AssetKey, AssetMaterialization, DagsterInstance

from themis_dagster.errors import load_yaml
from themis_dagster.exchange import Response
from themis_dagster.importers import ImportedReplies
from themis_dagster.partitions import evaluation_key
from themis_dagster.registry.model_id import validate_model_id
from themis_dagster.registry.models import ImportedSource, ModelSpec, load_registry
from themis_dagster.settings import Settings
from themis_dagster.warehouse import generations
from themis_dagster.warehouse.frames import to_frame
from themis_dagster.warehouse.partitions import Write, replace_rows


def ensure_model_registered(settings: Settings, model_id: str, origin: str) -> bool:
    """Declare ``model_id`` as an imported model in the discovered-models file if it is unknown.

    Returns True when it was added. Existing declarations are never changed.
    """
    validate_model_id(model_id)
    if model_id in load_registry(settings.models_file, settings.discovered_models_file):
        return False
    path = settings.discovered_models_file
    data = load_yaml(path.read_text()) if path.is_file() else None
    models = list((data or {}).get("models", []))
    spec = ModelSpec(id=model_id, source=ImportedSource(origin=origin), description="imported replies")
    models.append(spec.model_dump(mode="json", exclude_defaults=True) | {"source": spec.source.model_dump(mode="json")})
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_suffix(".yaml.partial")
    staging.write_text(yaml.safe_dump({"models": models}, sort_keys=False))
    staging.replace(path)
    load_registry(settings.models_file, path)  # the file we wrote must still validate
    return True


def store_imported(
    conn: object,
    model: str,
    task: str,
    imported: ImportedReplies,
    dataset_sha256: str,
    finish_reason: str = "imported",
) -> dict[str, int]:
    """Replace the (model, task) rows of the first three stages with the imported ones, in one transaction.

    ``finish_reason`` marks every reply as imported (a task may read a format's replies its own way).
    """
    import duckdb

    assert isinstance(conn, duckdb.DuckDBPyConnection)
    # an imported reply is a chat reply's text (or error) and its reasoning, nothing else the engine would record
    responses = [
        Response(r.request_id, r.item_id, text=r.text, error=r.error, request_type="chat", finish_reason=finish_reason,
                 reasoning=r.reasoning)
        for r in imported.responses
    ]  # fmt: skip
    partition = {"model": model, "task": task}
    frames = {
        "task_items": to_frame("task_items", imported.items, **partition, dataset_sha256=dataset_sha256),
        "prompts": to_frame("prompts", imported.requests, **partition),
        "responses": to_frame("responses", responses, **partition),
    }
    # one transaction for the three stages and their lineage: one new generation, whole or not at all
    writes, upstream = [], None
    for table, frame in frames.items():
        upstream, lineage = generations.record(table, model, task, upstream, run_id="import")
        writes += [Write(table, frame, partition), Write("stage_generations", lineage, partition | {"stage": table})]
    replace_rows(conn, writes)
    return {table: frame.height for table, frame in frames.items()}


def record_import(
    instance: DagsterInstance, model: str, task: str, paths: Sequence[Path], counts: dict[str, int]
) -> None:
    """Log the imported stages as materializations so lineage and history show where rows came from."""
    partition = str(evaluation_key(model, task))
    metadata: dict[str, Any] = {"imported_from": json.dumps([str(p) for p in paths])}
    metadata |= {f"rows/{table}": rows for table, rows in counts.items()}
    for asset in ("task_dataset", "rendered_prompts", "raw_responses"):
        instance.report_runless_asset_event(
            AssetMaterialization(asset_key=AssetKey(asset), partition=partition, metadata=metadata)
        )
