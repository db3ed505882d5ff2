"""Queue an asset backfill of the evaluation chain for the Dagster daemon, as the UI does.

``themis backfill`` and the explorer's Runs page both submit through here, so the two queue the
same backfill; it sits above ``definitions`` because the backfill names the code location's asset graph.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from themis_dagster.partitions import register_models


def submit_backfill(instance: object, model: str, tasks: Sequence[str], title: str | None = None) -> str:
    """Queue an asset backfill of the evaluation chain for ``model`` x ``tasks`` for the daemon.

    This is what the UI's "Materialize partitions" dialog does (GraphQL
    ``launchPartitionBackfill``): the daemon then launches one run per partition.
    """
    from dagster import DagsterInstance
    from dagster._core.execution.backfill import PartitionBackfill
    from dagster._core.utils import make_new_backfill_id

    from themis_dagster.assets import evaluation_assets
    from themis_dagster.definitions import defs
    from themis_dagster.partitions import evaluation_key

    assert isinstance(instance, DagsterInstance)
    backfill = PartitionBackfill.from_asset_partitions(
        backfill_id=make_new_backfill_id(),
        asset_graph=defs.resolve_asset_graph(),
        partition_names=[str(evaluation_key(model, task)) for task in tasks],
        asset_selection=[asset.key for asset in evaluation_assets],
        backfill_timestamp=time.time(),
        tags={"themis/backfill_model": model},
        dynamic_partitions_store=instance,
        all_partitions=False,
        title=title or f"evaluate {model} on {len(tasks)} task(s)",
        description=None,
        run_config=None,
    )
    instance.add_backfill(backfill)
    return backfill.backfill_id


def queue_evaluation(instance: object, model: str, tasks: Sequence[str], title: str | None = None) -> str:
    """Register ``model`` as a partition and queue its backfill over ``tasks``; the backfill's id.

    The plan is the caller's to check first (``validate_plan``), as each has its own tasks to settle.
    """
    register_models(instance, [model])
    return submit_backfill(instance, model, tasks, title)
