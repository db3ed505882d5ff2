"""Runs on a Ray cluster: a real daemon launches a backfill's runs as Ray jobs on a local two-node cluster.

The stack is real and started here (``deploy/local_stack.py``): PostgreSQL 15 (the Dagster instance
and the DuckLake catalog), ``ray start --head`` plus a worker ``ray start --address`` (one CPU and
one ``fake_gpu`` each: the custom resource standing in for a GPU), and ``dagster-daemon`` with
``deploy/dagster.ray.yaml`` as its instance, changed only through environment variables. The
default model is backfilled on four tiny tasks with the fake engine. Checked:

- every run is a Ray job asking for its model's GPU (``dagster-ray/config``: one ``fake_gpu``);
- the runs land on both nodes (Ray's job info: the driver's node id);
- every partition in the DuckLake warehouse has exactly the rows a single-process run of the
  same tasks writes (none lost, none duplicated).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.local_stack import (
    GPU_STAND_IN,
    STAGE_TABLES,
    ClusterStack,
    cluster_stack,
    failure_details,
    launch_backfill,
    partition_counts,
    run_placements,
    wait_for_backfill,
    why_no_postgres,
)
from tests.conftest import make_resources, requires_mirror, write_overrides
from themis_dagster.registry.models import DEFAULT_MODEL_ID

pytest.importorskip("dagster_ray", reason="dagster-ray is not installed (requirements/*.txt pins it)")
pytest.importorskip("ray.dashboard", reason="ray[default] is not installed (job submission needs it)")
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.server,  # a real dagster-daemon: outside the fast suite, serialized with the other server tests
    requires_mirror,
    pytest.mark.skipif(why_no_postgres() is not None, reason=str(why_no_postgres())),
]
TASKS = ["crows_pairs", "bbq", "crows_pairs_prompted", "crows_pairs_mc"]
SIZES: dict[str, dict[str, object]] = {
    "crows_pairs": {"limit": 4},
    "bbq": {"limit": 1},
    "crows_pairs_prompted": {"limit": 4},
    "crows_pairs_mc": {"limit": 4},
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterStack]:
    with cluster_stack(tmp_path_factory.mktemp("ray-stack"), "fake", SIZES) as started:
        yield started


def _single_process_counts(tmp_path: Path) -> dict[str, dict[str, tuple[int, int]]]:
    """The same partitions written by one in-process run each into a DuckDB file: the rows to expect."""
    from dagster import DagsterInstance

    from themis_dagster.definitions import build_definitions
    from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
    from themis_dagster.settings import Settings

    resources = make_resources(tmp_path / "reference.duckdb", write_overrides(tmp_path / "sizes.yaml", SIZES))
    job = build_definitions(Settings(engine="fake")).resolve_job_def("evaluate")
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [DEFAULT_MODEL_ID])
        for task in TASKS:
            key = evaluation_key(DEFAULT_MODEL_ID, task)
            assert job.execute_in_process(instance=instance, resources=resources, partition_key=key).success
    with resources["warehouse"].connect() as conn:  # type: ignore[attr-defined]
        counts: dict[str, dict[str, tuple[int, int]]] = {}
        for table in STAGE_TABLES:
            for task, total in conn.execute(f"SELECT task, count(*) FROM {table} GROUP BY task").fetchall():
                counts.setdefault(task, {})[table] = (total, total)
    return counts


def test_a_backfill_runs_as_ray_jobs_on_both_nodes_and_every_partition_has_exactly_its_rows(
    stack: ClusterStack, tmp_path: Path
) -> None:
    backfill_id = launch_backfill(stack, DEFAULT_MODEL_ID, TASKS)
    expected = _single_process_counts(tmp_path)  # meanwhile, in this process
    status = wait_for_backfill(stack, backfill_id, timeout_s=600)
    placements = run_placements(stack, backfill_id)
    if status != "COMPLETED_SUCCESS":
        details = "\n".join(f"--- {key}\n{text}" for key, text in failure_details(stack, backfill_id).items())
        pytest.fail(f"backfill {status}: {placements}\n{details}")
    assert sorted(p.partition for p in placements) == sorted(f"{DEFAULT_MODEL_ID}|{task}" for task in TASKS)
    assert {p.status for p in placements} == {"SUCCESS"}
    assert all(json.loads(p.ray_request) == {"resources": {GPU_STAND_IN: 1}} for p in placements), placements
    assert {p.node for p in placements} == {"head", "worker"}, placements  # both nodes ran runs
    assert partition_counts(stack, DEFAULT_MODEL_ID) == expected
    assert set(expected) == set(TASKS) and all(len(tables) == len(STAGE_TABLES) for tables in expected.values())
