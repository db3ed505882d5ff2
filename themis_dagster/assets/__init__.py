"""Software-defined assets: the evaluation chain and the reports built on it."""

from themis_dagster.assets.comparisons import comparisons
from themis_dagster.assets.evaluation import bias_metrics, judgments, raw_responses, rendered_prompts, task_dataset
from themis_dagster.assets.families import family_assets, is_report
from themis_dagster.assets.judge_calibration import judge_calibration
from themis_dagster.assets.leaderboard import leaderboard, leaderboard_page
from themis_dagster.assets.model_reports import model_reports
from themis_dagster.assets.perturbation_effects import perturbation_effects

evaluation_assets = [task_dataset, rendered_prompts, raw_responses, judgments, bias_metrics]
# the families' own assets (their family.yaml's ``assets``): reports beside ours, the others on demand
report_assets = [leaderboard, leaderboard_page, model_reports, *(a for a in family_assets() if is_report(a))]
comparison_assets = [comparisons, perturbation_effects]  # a variant partition measured against its task
augmentation_assets = [a for a in family_assets() if not is_report(a)]  # on demand (LangBiTe's template generator)
judge_assets = [judge_calibration]  # a judge model x a calibration set (make run: the default model on regard)

__all__ = ["augmentation_assets", "comparison_assets", "evaluation_assets", "judge_assets", "report_assets"]
