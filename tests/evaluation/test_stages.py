"""The chain's stages as plain functions: a task, frames and an answerer in, each stage's rows out; no Dagster.

The toy task (``judging/toy_task.py``) goes items -> prompts -> responses -> judgments -> metrics.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from tests.evaluation.judging.toy_task import KEY, AskJudge, answerers, toy_task
from themis_dagster.errors import ConfigError
from themis_dagster.evaluation.items import load_items
from themis_dagster.evaluation.judging.pipeline import PartitionReplies, judge_partition
from themis_dagster.evaluation.metrics import judged_metrics_frame, metric_values
from themis_dagster.evaluation.prompts import render_prompts
from themis_dagster.evaluation.responses import answer_prompts, check_answer_budget, largest_answer_budget
from themis_dagster.judging.correction import JudgeCalibration
from themis_dagster.registry.models import ModelSpec
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.warehouse.tables import declared


class NoCalibrations:
    """No judge has been calibrated."""

    def of_judge(self, task: LoadedTask) -> dict[str, JudgeCalibration | None]:
        return {}

    def of_refusal_judge(self, judge: str) -> JudgeCalibration | None:
        return None


def _columns(table: str) -> list[str]:
    return list(declared(table).column_names)


def test_the_five_stages_run_as_plain_functions(tmp_path: Path) -> None:
    task = toy_task(AskJudge(), judge_model="judge", limit=4)
    items = load_items(task, KEY, {})
    assert items.columns == _columns("task_items") and items.get_column("item_id").to_list() == ["1", "2", "3", "4"]
    prompts = render_prompts(task, KEY, items)
    assert prompts.columns == _columns("prompts") and prompts.height == 4

    def reply(model: str, question: str) -> str:
        return {"evaluated": "maybe" if question == "?" else "?", "judge": "yes"}[model]

    models, asked = answerers(tmp_path, reply)
    answered = answer_prompts(task, KEY, prompts, models("evaluated"), read_items=lambda: [])
    assert answered.frame.select("model", "task").unique().rows() == [("m", "toy")]
    assert sorted(answered.frame.columns) == sorted(_columns("responses"))
    assert (answered.stats.sent, answered.resent) == (4, 0)

    replies = PartitionReplies(items, answered.frame, lambda: prompts)
    judged = judge_partition(task, KEY, replies, declares_reasoning=False, answerers=models)
    assert judged.frame.get_column("outcome").to_list() == ["judged_yes"] * 4 and judged.second_opinions == 4
    assert asked == ["evaluated", "judge"]

    metrics = metric_values(task, judged.frame, reasoning=lambda: False, calibrations=NoCalibrations())
    assert [(v.subset, v.metric, v.n) for v in metrics.values][:1] == [(None, "yes_rate", 0)]
    assert {v.metric for v in metrics.values} >= {"refused_rate", "n_answered", "yes_rate_answered"}
    assert metrics.judged == []  # the toy judge offers no calibration
    frame = judged_metrics_frame(metrics.judged, KEY, "run", datetime(2026, 1, 1))
    assert frame.height == 0 and frame.columns == _columns("judged_metrics")


def test_the_guard_counts_only_where_it_could_withhold() -> None:
    task = toy_task()
    judged = pl.DataFrame(
        {"item_id": ["1", "2"], "subset": [None, None], "outcome": ["yes", "truncated"], "score": [1.0, None],
         "parsed": [True, False], "detail": ["{}", "{}"], "refused": [None, None]}
    )  # fmt: skip
    judged = judged.with_columns(pl.lit("m").alias("model"), pl.lit("toy").alias("task")).select(_columns("judgments"))
    asked: list[bool] = []

    def reasoning() -> bool:
        asked.append(True)
        return False

    values = metric_values(task, judged, reasoning=reasoning, calibrations=NoCalibrations()).values
    assert {"truncated_rate", "reasoning_unfinished_rate"} <= {v.metric for v in values}
    assert asked == [True]  # asked, since the task's replies are chats


def test_a_reasoning_budget_that_does_not_fit_fails_before_any_engine() -> None:
    prompts = pl.DataFrame({"request_type": ["chat", "chat", "loglikelihood"],
                            "gen_params": ['{"max_tokens": 64}', '{"max_tokens": 512}', None]})  # fmt: skip
    assert largest_answer_budget(prompts) == 512
    spec = ModelSpec.model_validate(
        {"id": "thinker", "source": {"kind": "packaged"}, "max_model_len": 1024,
         "reasoning": {"parser": "qwen3", "budget_tokens": 600}}
    )  # fmt: skip
    with pytest.raises(ConfigError, match="1024"):
        check_answer_budget(spec, KEY, prompts)
