"""Mitigation variants on the real vLLM engine with the default model (one engine load for the module).

The parent and its system-prompt and logit-bias variants are materialized through Dagster on
tiny task limits; the variants share the parent's loaded engine and never its cached answers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInstance, materialize

from tests.conftest import requires_mirror, write_overrides
from tests.mitigation_fixtures import (
    FAIR_TEXT,
    INSTRUCTION,
    LOGIT_BIAS,
    SYSTEM_PROMPT,
    resources_with_variants,
    variant,
)
from themis_dagster.assets import evaluation_assets
from themis_dagster.exchange import GenerationParams, Request
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.registry.models import DEFAULT_MODEL_ID
from themis_dagster.resources import EngineResource
from themis_dagster.resources.engine import shutdown_warm_engines

pytestmark = [pytest.mark.engine, requires_mirror]

MODELS = [DEFAULT_MODEL_ID, variant(SYSTEM_PROMPT), variant(LOGIT_BIAS)]
TASKS = {"crows_pairs": {"limit": 4}, "bbq_generate": {"limit": 3, "generation": {"max_tokens": 24}}}
PRONOUNS = re.compile(r"\b(he|she|his|her)\b", re.IGNORECASE)
NURSE = [{"role": "user", "content": "Write two sentences about a nurse called Mary and her day at work."}]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, object], DagsterInstance]]:
    folder = tmp_path_factory.mktemp("mitigation")
    warehouse = folder / "warehouse.duckdb"
    resources = resources_with_variants(
        warehouse, write_overrides(folder / "overrides.yaml", TASKS), engine="vllm", keep_warm=True
    )
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, MODELS)
        yield warehouse, resources, instance
    shutdown_warm_engines()


def _engine(resources: dict[str, object], model: str):  # type: ignore[no-untyped-def]
    themis, engines = resources["themis"], resources["engine"]
    spec = themis.model(model)  # type: ignore[attr-defined]
    return engines.engine_for(spec, themis.weights(spec))  # type: ignore[attr-defined]


def test_variants_share_one_engine_and_change_what_they_should(workspace) -> None:  # type: ignore[no-untyped-def]
    warehouse, resources, instance = workspace
    _engine(resources, DEFAULT_MODEL_ID)  # the one load of this module
    loads = EngineResource.loads
    for model in MODELS:
        for task in TASKS:
            result = materialize(evaluation_assets, partition_key=evaluation_key(model, task),
                                 resources=resources, instance=instance)  # fmt: skip
            assert result.success, (model, task)
    assert EngineResource.loads == loads, "a variant runs on its parent's loaded engine"
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        scores = dict(conn.execute(
            "SELECT model, list(logprob ORDER BY request_id) FROM responses WHERE task = 'crows_pairs' GROUP BY model"
        ).fetchall())  # fmt: skip
        replies = dict(conn.execute(
            "SELECT model, list(text ORDER BY request_id) FROM responses WHERE task = 'bbq_generate' GROUP BY model"
        ).fetchall())  # fmt: skip
        shown = dict(conn.execute(
            "SELECT model, min(prompt_text) FROM responses WHERE task = 'bbq_generate' GROUP BY model"
        ).fetchall())  # fmt: skip
        recorded = dict(conn.execute(
            "SELECT model, config->>'$.engine.settings.mitigation.stage' FROM evaluation_runs "
            "WHERE task = 'bbq_generate'"
        ).fetchall())  # fmt: skip
        metrics = conn.execute("SELECT count(DISTINCT model) FROM metric_values").fetchone()
        errors = conn.execute("SELECT count(error) FROM responses").fetchone()
    parent = scores[DEFAULT_MODEL_ID]
    # a system prompt becomes part of every context: each sentence is scored given it
    assert all(a != b for a, b in zip(scores[variant(SYSTEM_PROMPT)], parent, strict=True))
    # a logit bias acts on decoding only: prompt logprobs are the raw model's
    assert scores[variant(LOGIT_BIAS)] == pytest.approx(parent, abs=1e-6)
    assert FAIR_TEXT in shown[variant(SYSTEM_PROMPT)] and FAIR_TEXT not in shown[DEFAULT_MODEL_ID]
    assert replies[variant(SYSTEM_PROMPT)] != replies[DEFAULT_MODEL_ID]
    assert recorded == {DEFAULT_MODEL_ID: None, variant(SYSTEM_PROMPT): "pre-processing",
                        variant(LOGIT_BIAS): "in-processing"}  # fmt: skip
    assert metrics == (3,) and errors == (0,)


def test_logit_bias_removes_the_biased_words_from_generated_text(workspace) -> None:  # type: ignore[no-untyped-def]
    _, resources, _ = workspace
    params = GenerationParams(max_tokens=48)
    asked = [Request.conversation(NURSE, "nurse")]
    parent = _engine(resources, DEFAULT_MODEL_ID).chat(asked, params)[0].text or ""
    biased = _engine(resources, variant(LOGIT_BIAS)).chat(asked, params)[0].text or ""
    assert PRONOUNS.search(parent), f"the parent should use a pronoun here: {parent!r}"
    assert not PRONOUNS.search(biased), f"the biased words came back: {biased!r}"
    assert biased.strip(), "the variant still answers"
    assert INSTRUCTION  # the instruction template is covered by the fast tests (tests/mitigations/test_mitigation.py)
