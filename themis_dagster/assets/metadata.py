"""What an asset's materialization shows in Dagster's UI: the task it ran, its ids, a preview.

Each evaluation stage's own facts come from its stage function (``themis_dagster/evaluation``);
these helpers turn the shared ones into Dagster metadata, written once for every asset.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import polars as pl
from dagster import MetadataValue

from themis_dagster.assets.factory import ROW_COUNT
from themis_dagster.datasets import ResolvedFile
from themis_dagster.evaluation.answering import answering_metadata
from themis_dagster.evaluation.items import dataset_sha256
from themis_dagster.evaluation.judging.pipeline import Judged
from themis_dagster.evaluation.prompts import template_hashes
from themis_dagster.evaluation.responses import Answered
from themis_dagster.evaluation.variants import perturbation_record
from themis_dagster.provenance import code_version
from themis_dagster.refusals.outcome import marked
from themis_dagster.registry.models import ModelSpec
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources import EngineResource
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.warehouse.generations import Materialization


def task_metadata(task: LoadedTask) -> dict[str, Any]:
    """What every stage's materialization records about the task it ran (for reproducibility)."""
    return {
        "task": task.name,
        "task_fingerprint": task.spec.fingerprint(),
        "task_params": MetadataValue.json(task.params.model_dump(mode="json")),
        "seed": task.params.seed,
        "code_version": code_version(),
    }


def generation_metadata(written: Materialization) -> dict[str, str]:
    """The ids a materialization shows in the UI: find its rows with ``stage_generations``."""
    return {"materialization": written.materialization, "generation": written.generation}


def preview(frame: pl.DataFrame, rows: int = 5) -> MetadataValue:
    """The first rows as a markdown table, shown in the UI beside the materialization."""
    head = frame.head(rows).to_pandas()
    return MetadataValue.md(head.to_markdown(index=False) if not head.empty else "(no rows)")


def dataset_metadata(
    task: LoadedTask, items: pl.DataFrame, files: Mapping[str, ResolvedFile], written: Materialization
) -> dict[str, Any]:
    """``task_dataset``: the items, their dataset files and where each came from."""
    return {
        **task_metadata(task),
        ROW_COUNT: items.height,
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
        "dataset_sha256": dataset_sha256(files),
        "license": task.spec.license_note,
        **{f"upstream/{name}": len(rows) for name, rows in task.inputs.upstream.items()},
        **generation_metadata(written),
        "preview": preview(items.select("item_id", "subset", "fields")),
    }


def prompts_metadata(
    task: LoadedTask,
    items: int,
    prompts: pl.DataFrame,
    written: Materialization,
    perturbed: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """``rendered_prompts``: the requests, their templates' hashes and generation parameters; a variant's
    perturbation and what it changed (items changed and unchanged, requests changed)."""
    return {
        **task_metadata(task),
        ROW_COUNT: prompts.height,
        "items": items,
        "request_type": task.spec.request_type,
        "template_sha256": MetadataValue.json(template_hashes(task)),
        "generation_params": MetadataValue.json(task.params.generation.model_dump(mode="json")),
        "preview": preview(prompts.select("request_id", "context", "continuation", "prompt", "template")),
        **({"perturbation": task.perturbation.name} if task.perturbation is not None else {}),
        **{f"perturbation/{name}": count for name, count in (perturbed or {}).items()},
        **generation_metadata(written),
    }


def responses_metadata(
    task: LoadedTask,
    rows: int,
    spec: ModelSpec,
    weights: ResolvedWeights,
    engine: EngineResource,
    answered: Answered,
    request_cache: bool,
    written: Materialization,
) -> dict[str, Any]:
    """``raw_responses``: the model, its weights, the engine (loaded now, reused, or none) and the answering;
    a variant's perturbation with the key its answers are cached under."""
    stats = answered.stats.dispatch
    info = engine.loaded_info() if answered.stats.sent else None
    loaded_now = info is not None and engine.loaded_in_last_call
    identity = engine.output_identity()
    return {
        **task_metadata(task),
        ROW_COUNT: rows,
        "model_id": spec.id,
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
            {"dtype": answered.precision.dtype, "dtype_reason": answered.precision.reason}
            if answered.precision is not None
            else {}
        ),
        "engine_settings": MetadataValue.json(json.loads(json.dumps(info.settings if info else {}, default=str))),
        "library_versions": MetadataValue.json(info.versions if info is not None else {}),
        "engine_load_seconds": round(info.load_seconds, 2) if info is not None and loaded_now else 0.0,
        "engine_reused": info is not None and not loaded_now,
        "generation_params": MetadataValue.json(task.params.generation.model_dump(mode="json")),
        "duration_seconds": round(answered.seconds, 2),
        "engine_seconds": round(stats.engine_seconds, 2),
        "handoff_seconds": round(stats.handoff_seconds, 3),
        "prompt_tokens": stats.prompt_tokens,
        "output_tokens": stats.output_tokens,
        "tokens_per_second": round(stats.tokens_per_second, 1),
        "errors": stats.errors,
        "retried_requests": stats.retried,
        "resent_unjudged": answered.resent,
        **({"perturbation": MetadataValue.json(record)} if (record := perturbation_record(task)) is not None else {}),
        **answering_metadata(answered.stats, request_cache),
        **generation_metadata(written),
    }


def judgments_metadata(
    task: LoadedTask, judged: Judged, request_cache: bool, written: Materialization
) -> dict[str, Any]:
    """``judgments``: parsed and unparsed replies, outcomes, what the guard withheld, what the judges were asked."""
    frame = judged.frame
    rows = frame.height
    parsed = int(frame.get_column("parsed").sum())
    outcomes = frame.group_by("outcome").len().sort("outcome")
    refusal_judge = task.params.refusal_judge_model
    return {
        **task_metadata(task),
        ROW_COUNT: rows,
        "parsed": parsed,
        "second_opinions": judged.second_opinions,
        **({"refusal_judge_questions": judged.refusal_questions} if refusal_judge else {}),
        **(answering_metadata(judged.answering, request_cache) if task.judge_model or refusal_judge else {}),
        "unparsed": rows - parsed,
        "parse_success_rate": round(parsed / rows, 4) if rows else 0.0,
        "outcomes": MetadataValue.json(
            dict(zip(outcomes["outcome"].to_list(), outcomes["len"].to_list(), strict=True))
        ),
        **({"withheld_replies": MetadataValue.json(judged.withheld)} if judged.withheld is not None else {}),
        **({"refused": int(frame.get_column("refused").sum())} if marked(frame) else {}),
        **generation_metadata(written),
    }


def metrics_metadata(
    task: LoadedTask, values: pl.DataFrame, judged: pl.DataFrame, written: Materialization
) -> dict[str, Any]:
    """``bias_metrics``: the headline values (each also as ``metric/<name>``) and the judged metrics."""
    headline = headline_values(values)
    return {
        **task_metadata(task),
        ROW_COUNT: values.height,
        "headline": preview(headline, rows=20),
        **generation_metadata(written),
        **(
            {"judged_metrics": preview(judged.drop("model", "task", "run_id", "materialized_at"), rows=20)}
            if judged.height
            else {}
        ),
        **{
            f"metric/{row['metric']}": float(row["value"])
            for row in headline.iter_rows(named=True)
            if row["value"] is not None
        },
    }


def headline_values(values: pl.DataFrame) -> pl.DataFrame:
    """The overall (``subset`` NULL) value of each metric, with its CI and ``n``."""
    return values.filter(pl.col("subset").is_null()).select("metric", "value", "ci_low", "ci_high", "n")
