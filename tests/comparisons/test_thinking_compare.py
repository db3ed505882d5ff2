"""Does thinking change bias? Thinking on and off as parent and child, compared pairwise (fake engine).

The fake engine plays a model that answers BBQ's items one way after thinking and another
without (``enable_thinking: false``); the comparison of the child with its parent is then the
paired effect of reasoning on the same items, as ``themis compare`` reports it.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInstance, materialize

from tests.conftest import make_resources, requires_mirror, write_overrides
from tests.reasoning_fixture import default_model_folder, write_models_file
from themis_dagster.assets import comparison_assets, evaluation_assets
from themis_dagster.engines.base import Engine
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.registry.models import ModelSpec, is_reasoning_variant, load_models
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.reports import render_model_report
from themis_dagster.resources import FakeEngineResource, ThemisConfig
from themis_dagster.resources.engine import fake_reasoning

pytest.importorskip("vllm.reasoning")
pytestmark = requires_mirror

THINKING, NOT_THINKING, TASK = "fake-qwen3", "fake-qwen3-no-think", "bbq_generate"
SENTINEL = "OKAPI"  # in every reasoning: never in a judgment


class ThinkingOrNotEngineResource(FakeEngineResource):
    """Answers ``A`` after a think block, or ``B`` straight away where the chat template turns thinking off."""

    def _build(self, spec: ModelSpec, weights: ResolvedWeights) -> Engine:
        kwargs = spec.reasoning.chat_template_kwargs if spec.reasoning is not None else {}
        reply = "B" if kwargs.get("enable_thinking") is False else f"{SENTINEL} weighing the context</think>A"
        return FakeEngine(weights.path, reply=lambda prompt: reply, reasoning=fake_reasoning(spec))


def test_thinking_off_child_is_compared_with_its_thinking_parent(tmp_path: Path) -> None:
    models = write_models_file(
        tmp_path / "models.yaml",
        [
            {"id": THINKING, "source": {"kind": "local", "path": str(default_model_folder())}, "dtype": "bfloat16",
             "reasoning": {"parser": "qwen3", "budget_tokens": 256}},
            {"id": NOT_THINKING, "parent": THINKING,
             "reasoning": {"parser": "qwen3", "chat_template_kwargs": {"enable_thinking": False}, "budget_tokens": 0}},
        ],
    )  # fmt: skip
    registry = load_models(models)
    assert is_reasoning_variant(registry[NOT_THINKING], registry[THINKING])
    overrides = write_overrides(tmp_path / "overrides.yaml", {TASK: {"limit": 24, "bootstrap_resamples": 200}})
    warehouse = tmp_path / "w.duckdb"
    resources = make_resources(warehouse, overrides) | {"engine": ThinkingOrNotEngineResource()}
    themis = resources["themis"]
    assert isinstance(themis, ThemisConfig)
    resources["themis"] = ThemisConfig(**{**themis.model_dump(), "models_file": str(models)})
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [THINKING, NOT_THINKING])
        for model in (THINKING, NOT_THINKING):
            result = materialize([*evaluation_assets, *comparison_assets], partition_key=evaluation_key(model, TASK),
                                 resources=resources, instance=instance)  # fmt: skip
            assert result.success, model
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        replies = dict(
            conn.execute(
                "SELECT model, list(DISTINCT text) FROM responses WHERE task = ? GROUP BY model", [TASK]
            ).fetchall()
        )
        reasoning = dict(
            conn.execute("SELECT model, bool_and(reasoning LIKE ?) FROM responses WHERE task = ? GROUP BY model",
                         [f"%{SENTINEL}%", TASK]).fetchall()
        )  # fmt: skip
        leaked = conn.execute(
            "SELECT count(*) FROM judgments WHERE CAST(detail AS VARCHAR) LIKE ?", [f"%{SENTINEL}%"]
        ).fetchone()
        judged = conn.execute("SELECT count(*) FROM judgments WHERE model = ? AND task = ?", [NOT_THINKING, TASK])
        (n_judged,) = judged.fetchone() or (0,)
        rows = conn.execute(
            "SELECT metric, difference, n_pairs FROM comparisons WHERE model = ? AND baseline = ? AND task = ? "
            "AND subset IS NULL",
            [NOT_THINKING, THINKING, TASK],
        ).fetchall()
        report = render_model_report(conn, THINKING)
    assert replies == {THINKING: ["A"], NOT_THINKING: ["B"]}  # each variant's answer, its reasoning split off
    assert reasoning[THINKING] is True and not reasoning[NOT_THINKING]
    assert leaked == (0,)
    assert rows, "the thinking-off child is compared with its thinking parent"
    assert max(n_pairs for _, _, n_pairs in rows) == n_judged > 0, rows  # paired on the same items
    assert any(difference not in (None, 0.0) for _, difference, _ in rows)  # the effect of thinking is measured
    # the report sets the shares of refused and unfinished replies beside the task's values
    summary = report.html[report.html.index('<section id="summary">') : report.html.index('<section id="parent">')]
    assert "Reasoning unfinished · truncated" in summary
    assert '<td class="num unfinished">0.0% of ' in summary and '<td class="num refused">0.0% of ' in summary
