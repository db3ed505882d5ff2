"""Two real-engine runs of the default model compare equal: difference 0 and p = 1 for every metric.

The default model is evaluated on CrowS-Pairs with vLLM (request cache off, so the engine
answers both times), the first run's rows are kept under a second registered id, the
partition is evaluated again, and ``themis compare`` tests the second run against the first.

Both compared runs follow a warm-up run of the same partition: an engine's first batch after it
loads is scheduled on an empty KV cache, later ones around the blocks earlier batches left, and
the different batch shapes move bf16 sums by up to about 0.2 nats (113 of these 120 scores
differ between a cold and a warm run; two warm runs agree to every digit). Run alone, without
the warm-up, this test compared a cold run with a warm one.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInstance, materialize

from tests.conftest import SETTINGS, make_resources, requires_mirror, write_overrides
from themis_dagster.assets import evaluation_assets
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.registry.models import DEFAULT_MODEL_ID
from themis_dagster.resources.engine import shutdown_warm_engines

pytestmark = [pytest.mark.engine, requires_mirror]
TASK, FIRST_RUN = "crows_pairs", "smollm2-first-run"
KEPT_TABLES = ("task_items", "judgments", "evaluation_runs")


def test_the_same_model_twice_differs_by_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from themis_dagster.cli import main

    models = tmp_path / "models.yaml"
    models.write_text(SETTINGS.models_file.read_text() + f"  - {{id: {FIRST_RUN}, source: {{kind: imported}}}}\n")
    overrides = write_overrides(tmp_path / "o.yaml", {TASK: {"limit": 60, "bootstrap_resamples": 200}})
    warehouse = tmp_path / "w.duckdb"
    resources = make_resources(warehouse, overrides, engine="vllm", keep_warm=True, request_cache=False)
    try:
        with DagsterInstance.ephemeral() as instance:
            instance.add_dynamic_partitions(MODELS_PARTITION, [DEFAULT_MODEL_ID])
            key = evaluation_key(DEFAULT_MODEL_ID, TASK)
            for _ in ("warm-up", "first run"):
                assert materialize(evaluation_assets, partition_key=key, resources=resources, instance=instance).success
            with duckdb.connect(str(warehouse)) as conn:
                for table in KEPT_TABLES:  # the first run's rows, kept under another id
                    conn.execute(f"CREATE TEMP TABLE kept AS SELECT * FROM {table} WHERE model = ?", [DEFAULT_MODEL_ID])
                    conn.execute("UPDATE kept SET model = ?", [FIRST_RUN])
                    conn.execute(f"INSERT INTO {table} SELECT * FROM kept")
                    conn.execute("DROP TABLE kept")
            assert materialize(evaluation_assets, partition_key=key, resources=resources, instance=instance).success
    finally:
        shutdown_warm_engines()
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        runs = conn.execute("SELECT count(DISTINCT run_id) FROM evaluation_runs WHERE model = ?", [DEFAULT_MODEL_ID])
        assert runs.fetchone() == (3,)  # three materializations, the engine answering each (no request cache)
    for name, value in {
        "THEMIS_MODELS_FILE": models,
        "THEMIS_WAREHOUSE": warehouse,
        "THEMIS_TASK_OVERRIDES": overrides,
        "THEMIS_DISCOVERED_MODELS_FILE": tmp_path / "discovered.yaml",
    }.items():
        monkeypatch.setenv(name, str(value))
    assert main(["compare", DEFAULT_MODEL_ID, FIRST_RUN, "--task", TASK, "--gate"]) == 0
    assert "0 regressed" in capsys.readouterr().out
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        rows = conn.execute(
            "SELECT metric, subset, difference, p_value, p_adjusted, n_pairs FROM comparisons WHERE model = ?",
            [DEFAULT_MODEL_ID],
        ).fetchall()
    assert {(metric, n) for metric, subset, *_, n in rows if subset is None} == {
        ("pct_stereotype", 60),
        ("likelihood_diff", 60),
    }
    assert {(difference, p, adjusted) for _, _, difference, p, adjusted, _ in rows} == {(0.0, 1.0, 1.0)}
