"""The run's time budget: sizes scaled from the budget left and the speed observed, floors, and what it costs."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.conftest import requires_mirror
from tests.deployment import MODEL, themis_deployment
from themis_dagster import cli
from themis_dagster.errors import ConfigError
from themis_dagster.tasks import budget as budget_module
from themis_dagster.tasks.budget import Budget, ReferenceCosts, TaskCost, budget_for, load_costs, size_knob, summary
from themis_dagster.tasks.family import sizes


def _costs(**tasks: tuple[float, float]) -> ReferenceCosts:
    return ReferenceCosts(
        host="reference",
        tasks={name: TaskCost(inference_s=inference, other_s=other) for name, (inference, other) in tasks.items()},
        calibrations={"regard": 100.0},
        reports_s=10.0,
    )


def test_the_shipped_costs_cover_every_task_of_the_profile() -> None:
    costs = load_costs()
    profile = sizes("run")
    assert set(profile) - set(costs.tasks) <= {"discrim_eval_implicit"}  # its file is not in the mirror
    for task, entry in profile.items():
        if task in costs.tasks and not any(knob in entry for knob in budget_module.KNOBS):
            assert costs.tasks[task].items is not None or costs.tasks[task].inference_s < 5, task


def test_the_knob_is_the_profiles_size_and_the_floor_the_engine_tests() -> None:
    assert size_knob("bbq", {"limit": 16}, {"limit": 4}, None) == budget_module.Knob("limit", 16, 4)
    assert size_knob("gb_direct", {"sample_k": 60}, {"sample_k": 8}, None) == budget_module.Knob("sample_k", 60, 8)
    assert size_knob("iat", {"iterations": 2}, {"iterations": 1}, None) == budget_module.Knob("iterations", 2, 1)
    assert size_knob("crows_pairs", {}, {"limit": 24}, 1508) == budget_module.Knob("limit", 1508, 24)
    assert size_knob("crows_pairs", {}, None, None) is None  # no size named and none known: not scaled
    assert size_knob("x", {"limit": 3}, {"limit": 10}, None) == budget_module.Knob("limit", 3, 3)


def test_a_budget_that_fits_keeps_every_size() -> None:
    budget = Budget(3600.0, _costs(a=(100.0, 10.0), b=(50.0, 5.0)), {"a": {"limit": 10}, "b": {"limit": 20}})
    assert budget.scale(["a", "b"], elapsed_s=0.0) == 1.0
    assert budget.params_for("a", 1.0) == {"limit": 10}
    assert budget.resized == []
    assert "every task ran at make run's profile size" in summary(budget, ["a", "b"])[0]


def test_the_budget_left_is_shared_over_the_tasks_left() -> None:
    """(budget - elapsed - fixed) / inference: (400 - 100 - (10 + 10 + 5)) / (100 + 50) = 1.8333 -> 1; then slower."""
    budget = Budget(400.0, _costs(a=(100.0, 10.0), b=(50.0, 5.0)), {"a": {"limit": 10}, "b": {"limit": 20}})
    assert budget.scale(["a", "b"], elapsed_s=100.0) == 1.0
    budget.observe(300.0, 100.0)  # this host takes three times the reference's seconds
    assert budget.speed == pytest.approx(3.0)
    scale = budget.scale(["a", "b"], elapsed_s=100.0)
    assert scale == pytest.approx((400 - 100 - 3 * 25) / (3 * 150))
    assert budget.params_for("a", scale) == {"limit": 5}  # int(0.5 * 10)
    assert budget.resized[-1].ci_width_factor == pytest.approx(math.sqrt(2))
    assert budget.expected_s("a", {"limit": 5}) == pytest.approx(10 + 100 * 0.5)


def test_reused_answers_do_not_count_as_speed_and_floors_hold() -> None:
    budget = Budget(60.0, _costs(a=(1000.0, 0.0)), {"a": {"limit": 40}}, {"a": {"limit": 24}})
    budget.observe(1.0, 100.0, fresh=0.0)  # answered from the request cache: says nothing of the engine
    assert budget.speed == 1.0
    assert budget.params_for("a", budget.scale(["a"], 0.0)) == {"limit": 24}  # never below the engine test's size
    lines = summary(budget, ["a"])
    assert "1 of 1 tasks ran smaller" in lines[0] and "a: limit 24 of 40" in lines[1]


def test_bad_budgets_and_cost_files_fail_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--budget-minutes"):
        budget_for(0, {})
    broken = tmp_path / "costs.yaml"
    broken.write_text(yaml.safe_dump({"host": "h", "tasks": {"bbq": {"inference_s": -1, "other_s": 1}}}))
    with pytest.raises(ConfigError, match=r"tasks\.bbq\.inference_s"):
        load_costs(broken)


@requires_mirror
def test_themis_run_within_a_budget_runs_smaller_and_says_what_it_costs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A budget far below the reference costs: every task at its floor, each resize and the summary printed."""
    env, _ = themis_deployment(tmp_path)
    for name, value in env.items():
        if name.startswith(("THEMIS_", "DAGSTER_HOME")):
            monkeypatch.setenv(name, value)
    overrides = Path(env["THEMIS_TASK_OVERRIDES"])
    overrides.write_text(yaml.safe_dump({"crows_pairs": {"limit": 40}}))
    costs = tmp_path / "costs.yaml"
    reference = {"host": "reference", "tasks": {"crows_pairs": {"inference_s": 5000, "other_s": 1}}}
    costs.write_text(yaml.safe_dump(reference))
    monkeypatch.setattr(budget_module, "COSTS_FILE", costs)
    argv = ["run", "--model", MODEL, "--task", "crows_pairs", "--skip-reports"]
    since = time.time() - 600  # make started ten minutes ago (its setup): inside the budget too
    assert cli.main([*argv, "--budget-minutes", "1", "--budget-since", str(since)]) == 0
    out = capsys.readouterr()
    estimate = re.search(r"time budget 1 min: make run's profile would take about (\d+) min here", out.err)
    assert estimate is not None and 93 <= int(estimate[1]) <= 96  # 83 min of tasks after 10 (and the CLI's start)
    assert "x the seconds of the reference host: reference)" in out.err  # costs.yaml's host, not this one
    assert "budget: crows_pairs: limit 24 of 40 (confidence intervals about 1.29x as wide)" in out.out
    assert "1 of 1 tasks ran smaller than make run's profile" in out.out
    with duckdb.connect(env["THEMIS_WAREHOUSE"], read_only=True) as conn:
        pairs = conn.execute("SELECT count(DISTINCT item_id) FROM judgments WHERE task = 'crows_pairs'").fetchone()
    assert pairs == (24,)
    assert list((tmp_path / "cache" / "run_profiles").glob("*.yaml")) == []  # the run's copy is removed
    assert yaml.safe_load(overrides.read_text())["crows_pairs"] == {"limit": 40}  # the user's file untouched


def test_a_bad_budget_variable_fails_naming_it_before_any_engine(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("THEMIS_RUN_BUDGET_MINUTES", "twenty")
    assert cli.main(["run", "--task", "crows_pairs"]) == 2
    assert "THEMIS_RUN_BUDGET_MINUTES='twenty': expected a number of minutes" in capsys.readouterr().err
