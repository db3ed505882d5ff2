"""A partition's stages belong together: readers never see new items beside old metrics as if current."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest
from dagster import AssetsDefinition, DagsterInstance, materialize

from tests.conftest import make_resources, requires_mirror, write_overrides
from themis_dagster.assets import evaluation_assets
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.registry.models import DEFAULT_MODEL_ID
from themis_dagster.warehouse.frames import rows_frame
from themis_dagster.warehouse.generations import STAGES
from themis_dagster.warehouse.partitions import Write, replace_rows
from themis_dagster.warehouse.schema import ensure_schema

MODEL = DEFAULT_MODEL_ID
TASKS = ("crows_pairs", "bbq")


def _run(
    warehouse: Path, overrides: Path, instance: DagsterInstance, task: str, assets: list[AssetsDefinition]
) -> None:
    result = materialize(
        assets,
        partition_key=evaluation_key(MODEL, task),
        resources=make_resources(warehouse, overrides),
        instance=instance,
        selection=[asset.key for asset in assets],
    )
    assert result.success


def _status(warehouse: Path) -> dict[str, tuple[str, bool, str]]:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        rows = conn.execute("SELECT task, generation, complete, status FROM partition_status").fetchall()
    return {task: (generation, complete, status) for task, generation, complete, status in rows}


def _shown(warehouse: Path, view: str) -> set[str]:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        return {row[0] for row in conn.execute(f"SELECT DISTINCT task FROM {view}").fetchall()}


@requires_mirror
def test_a_half_rewritten_partition_is_hidden_until_a_run_completes_it(tmp_path: Path) -> None:
    warehouse = tmp_path / "w.duckdb"
    overrides = write_overrides(tmp_path / "o.yaml", {"crows_pairs": {"limit": 6}, "bbq": {"limit": 2}})
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL])
        for task in TASKS:
            _run(warehouse, overrides, instance, task, evaluation_assets)
        first = _status(warehouse)
        assert {task: first[task][1:] for task in TASKS} == {task: (True, "complete") for task in TASKS}
        with duckdb.connect(str(warehouse), read_only=True) as conn:
            stages = conn.execute(
                "SELECT stage, count(DISTINCT generation) FROM stage_generations WHERE task = 'crows_pairs' GROUP BY 1"
            ).fetchall()
        assert sorted(stages) == sorted((stage, 1) for stage in STAGES)  # one generation across the chain
        assert _shown(warehouse, "metrics") == set(TASKS) == _shown(warehouse, "metric_drilldown")

        # what a run killed after its first two stages leaves: new items and prompts, old responses onwards
        _run(warehouse, overrides, instance, "crows_pairs", evaluation_assets[:2])
        half = _status(warehouse)
        assert half["crows_pairs"][0] != first["crows_pairs"][0]  # a new generation began
        assert half["crows_pairs"][1:] == (
            False,
            "incomplete: responses are from earlier prompts; materialize the partition again",
        )
        assert half["bbq"] == first["bbq"]  # other partitions are untouched
        with duckdb.connect(str(warehouse), read_only=True) as conn:
            old_rows = conn.execute("SELECT count(*) FROM metric_values WHERE task = 'crows_pairs'").fetchone()
        assert old_rows is not None and old_rows[0] > 0  # the old metrics are kept...
        for view in ("metrics", "headline_metrics", "metric_drilldown"):
            assert _shown(warehouse, view) == {"bbq"}, view  # ...but never shown as current

        _run(warehouse, overrides, instance, "crows_pairs", evaluation_assets[2:])
        done = _status(warehouse)
        assert done["crows_pairs"] == (half["crows_pairs"][0], True, "complete")
        assert _shown(warehouse, "metrics") == set(TASKS)
        event = instance.get_latest_materialization_event(evaluation_assets[4].key)
        assert event is not None and event.asset_materialization is not None
        assert event.asset_materialization.metadata["generation"].value == done["crows_pairs"][0]


def _generation_row(stage: str, materialization: str, upstream: str | None) -> dict[str, object]:
    return {
        "model": "m", "task": "t", "stage": stage, "materialization": materialization,
        "upstream_materialization": upstream, "generation": "g", "run_id": "r",
        "written_at": datetime(2026, 1, 1),
    }  # fmt: skip


@pytest.mark.parametrize(
    ("missing", "stale", "status"),
    [
        (None, None, "complete"),
        ("judgments", None, "incomplete: judgments missing; materialize the partition again"),
        (
            None,
            "metric_values",
            "incomplete: metric_values are from earlier judgments; materialize the partition again",
        ),
        (None, "prompts", "incomplete: prompts are from an earlier task_items; materialize the partition again"),
    ],
)
def test_partition_status_names_the_first_broken_link(missing: str | None, stale: str | None, status: str) -> None:
    with duckdb.connect() as conn:
        ensure_schema(conn)
        rows = []
        for index, stage in enumerate(STAGES):
            upstream = None if index == 0 else STAGES[index - 1]
            if stage == stale:
                upstream = "an older one"
            if stage != missing:
                rows.append(_generation_row(stage, stage, upstream))
        frame = rows_frame("stage_generations", rows)
        replace_rows(conn, [Write("stage_generations", frame, {"model": "m", "task": "t"})])
        row = conn.execute("SELECT complete, status FROM partition_status").fetchone()
    assert row == (status == "complete", status)


def test_a_failed_write_keeps_every_table_of_it_old() -> None:
    """The stage's rows and its lineage row go in one transaction: neither changes alone."""
    with duckdb.connect() as conn:
        ensure_schema(conn)
        good = _lineage_frame("first")
        replace_rows(conn, [Write("stage_generations", good, {"model": "m", "task": "t", "stage": "task_items"})])
        outside = rows_frame(
            "evaluation_runs",
            [{"model": "m", "task": "other", "run_id": "r", "materialized_at": datetime(2026, 1, 1), "config": {}}],
        )
        with pytest.raises(ValueError, match="outside partition"):
            replace_rows(
                conn,
                [
                    Write(
                        "stage_generations",
                        _lineage_frame("second"),
                        {"model": "m", "task": "t", "stage": "task_items"},
                    ),
                    Write("evaluation_runs", outside, {"model": "m", "task": "t"}),
                ],
            )
        assert conn.execute("SELECT materialization FROM stage_generations").fetchall() == [("first",)]


def _lineage_frame(materialization: str) -> pl.DataFrame:
    return rows_frame("stage_generations", [_generation_row("task_items", materialization, None)])


def test_partitions_written_before_generations_are_shown_as_they_are() -> None:
    with duckdb.connect() as conn:
        ensure_schema(conn)
        conn.execute(
            "INSERT INTO metric_values VALUES ('m', 't', NULL, 'x', 0.5, 0.4, 0.6, 10, TIMESTAMP '2026-01-01', 'r')"
        )
        assert conn.execute("SELECT metric, generation FROM metrics").fetchall() == [("x", None)]
        assert conn.execute("SELECT count(*) FROM partition_status").fetchone() == (0,)
