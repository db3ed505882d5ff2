"""The answering path of a registered model, built from a run's resources (``evaluation/answering.py``)."""

from __future__ import annotations

from pathlib import Path

from themis_dagster.engines.fingerprint import model_fingerprint
from themis_dagster.engines.precision import resolved
from themis_dagster.evaluation.answering import Answerer, Answerers
from themis_dagster.registry.models import ModelSpec
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources import EngineResource, ThemisConfig, WarehouseResource


def answerer_for(
    spec: ModelSpec,
    weights: ResolvedWeights,
    *,
    themis: ThemisConfig,
    engine: EngineResource,
    warehouse: WarehouseResource,
) -> Answerer:
    """The answering path of a registered model (evaluated model, judge or generator) and its resolved weights.

    Its answers are cached under the model's fingerprint (weights, output-changing settings, the
    engine's identity) when the platform's request cache is on.
    """
    declared = spec  # the engine resolves dtype: auto itself, and says why (engine_for)
    spec, precision = resolved(spec, Path(weights.path))  # dtype: auto made concrete here, so it is in the key
    fingerprint = model_fingerprint(spec, weights, engine.output_identity()) if themis.request_cache else None
    return Answerer(
        model_id=spec.id,
        engine=lambda: engine.engine_for(declared, weights),
        warehouse=warehouse,
        model_fingerprint=fingerprint,
        chunk_size=themis.request_chunk_size,
        commit_interval_s=themis.commit_interval_s,
        precision=precision,
    )


def model_answerers(themis: ThemisConfig, engine: EngineResource, warehouse: WarehouseResource) -> Answerers:
    """Each registered model's answering path by id (a judge's, for the judgments stage); an unknown id fails
    when asked for, naming it."""

    def answerer(model_id: str) -> Answerer:
        spec = themis.model(model_id)
        return answerer_for(spec, themis.weights(spec), themis=themis, engine=engine, warehouse=warehouse)

    return answerer
