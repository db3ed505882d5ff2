"""Jobs: the per-partition evaluation chain, the reports, and a judge's calibration."""

from __future__ import annotations

from dagster import AssetSelection, define_asset_job, in_process_executor

from themis_dagster.assets import evaluation_assets, judge_assets
from themis_dagster.partitions import evaluation_partitions, judge_calibration_partitions

# One process per run, so every stage of a partition shares one engine
# (the multiprocess executor would build one engine per step).
evaluate_job = define_asset_job(
    "evaluate",
    # the comparisons group: a new checkpoint is compared with its parent in the same run (its gate's verdict)
    selection=AssetSelection.assets(*evaluation_assets) | AssetSelection.groups("comparisons"),
    partitions_def=evaluation_partitions,
    executor_def=in_process_executor,
    description="Evaluate one model on one task: dataset -> prompts -> responses -> judgments -> metrics.",
)

reports_job = define_asset_job(
    "reports",
    selection=AssetSelection.groups("reports"),
    executor_def=in_process_executor,
    description="Rebuild the leaderboard and reports from the warehouse.",
)

calibrate_judge_job = define_asset_job(
    "calibrate_judge",
    selection=AssetSelection.assets(*judge_assets),
    partitions_def=judge_calibration_partitions,
    executor_def=in_process_executor,
    description="Check a judge model against a human-labelled calibration set: its labels, kappa and error rates.",
)
