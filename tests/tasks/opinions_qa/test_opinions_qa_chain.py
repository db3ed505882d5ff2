"""OpinionQA through the whole chain (fake engine): the representativeness the warehouse stores equals scipy's.

The distributions are read back as they were stored (the judgment's ``d_model``, the item's group
distributions) and every stored representativeness is recomputed with ``scipy.stats.wasserstein_distance``
over the ordinal positions, to 1e-9; the headline value is the mean of the stored per-question values.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInstance, materialize
from scipy.stats import wasserstein_distance

from tests.conftest import make_resources, requires_mirror, write_overrides
from themis_dagster.assets import evaluation_assets
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.registry.models import DEFAULT_MODEL_ID

SIZES = {"opinions_qa": {"limit": 8, "steer_limit": 2, "steer_groups": ["SEX"], "bootstrap_resamples": 100}}


@requires_mirror
def test_stored_representativeness_equals_scipy(tmp_path: Path) -> None:
    overrides = write_overrides(tmp_path / "overrides.yaml", SIZES)
    warehouse = tmp_path / "warehouse.duckdb"
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [DEFAULT_MODEL_ID])
        result = materialize(
            evaluation_assets,
            partition_key=evaluation_key(DEFAULT_MODEL_ID, "opinions_qa"),
            resources=make_resources(warehouse, overrides),
            instance=instance,
        )
    assert result.success
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        fields = dict(conn.execute("SELECT item_id, fields FROM task_items WHERE task = 'opinions_qa'").fetchall())
        judged = conn.execute("SELECT item_id, detail, score FROM judgments WHERE task = 'opinions_qa'").fetchall()
        headline = conn.execute(
            "SELECT value FROM metric_values WHERE task = 'opinions_qa' AND metric = 'representativeness' "
            "AND subset IS NULL"
        ).fetchone()
    checked, overall = 0, []
    for item_id, detail_text, score in judged:
        item, detail = json.loads(fields[item_id]), json.loads(detail_text)
        positions = item["ordinal"]
        for group, stored in detail["representativeness"].items():
            d_group = item["human"][group]
            theirs = 1 - wasserstein_distance(positions, positions, detail["d_model"], d_group) / (
                max(positions) - min(positions)
            )
            assert stored == pytest.approx(theirs, abs=1e-9)
            checked += 1
        if detail["style"] == "default" and score is not None:
            overall.append(score)
    assert len(judged) == 8 + 2 * 3 * 2 and checked > 8 * 30
    assert headline is not None and headline[0] == pytest.approx(sum(overall) / len(overall), abs=1e-12)
