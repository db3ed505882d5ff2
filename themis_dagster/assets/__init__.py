"""Software-defined assets: the evaluation chain and the reports built on it."""

from themis_dagster.assets.benchmark_reports import genderbench_marks, langbite_reports
from themis_dagster.assets.comparisons import comparisons
from themis_dagster.assets.evaluation import bias_metrics, judgments, raw_responses, rendered_prompts, task_dataset
from themis_dagster.assets.genderbench_report import genderbench_report
from themis_dagster.assets.judge_calibration import judge_calibration
from themis_dagster.assets.langbite_augmentation import langbite_augmented_templates
from themis_dagster.assets.leaderboard import leaderboard, leaderboard_page
from themis_dagster.assets.model_reports import model_reports

evaluation_assets = [task_dataset, rendered_prompts, raw_responses, judgments, bias_metrics]
report_assets = [leaderboard, leaderboard_page, model_reports, langbite_reports, genderbench_marks, genderbench_report]
comparison_assets = [comparisons]
augmentation_assets = [langbite_augmented_templates]  # materialized on demand (a generator model x a langbite task)
judge_assets = [judge_calibration]  # a judge model x a calibration set (make run: the default model on regard)

__all__ = ["augmentation_assets", "comparison_assets", "evaluation_assets", "judge_assets", "report_assets"]
