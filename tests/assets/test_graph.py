"""The asset graph end to end on the fake engine: plumbing, idempotence and fail-fast config."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInstance, materialize

from tests.conftest import make_resources, requires_mirror, write_overrides
from themis_dagster.assets import evaluation_assets, report_assets
from themis_dagster.definitions import build_definitions, defs
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.registry.models import DEFAULT_MODEL_ID
from themis_dagster.reports.leaderboard_page import RegisteredModel, render_leaderboard
from themis_dagster.resources import EngineResource
from themis_dagster.tasks.loader import task_names

MODEL = DEFAULT_MODEL_ID


def test_definitions_load() -> None:
    """The code location loads as `dagster dev` would load it (the definitions load-check)."""
    from dagster import Definitions

    Definitions.validate_loadable(defs)
    job = defs.resolve_job_def("evaluate")
    assert job.partitions_def is not None
    keys = {key.to_user_string() for key in defs.resolve_all_asset_keys()}
    assert {"task_dataset", "rendered_prompts", "raw_responses", "judgments", "bias_metrics", "leaderboard"} <= keys


def test_asset_graph_snapshot() -> None:
    """An accidental change to the graph's shape shows up here."""
    graph = defs.resolve_asset_graph()
    edges = {
        key.to_user_string(): sorted(parent.to_user_string() for parent in graph.get(key).parent_keys)
        for key in graph.get_all_asset_keys()
    }
    assert edges == {
        "task_dataset": ["langbite_augmented_templates"],  # a langbite task's generated templates (any generator)
        "rendered_prompts": ["task_dataset"],
        "raw_responses": ["rendered_prompts"],
        "judgments": ["raw_responses"],
        "bias_metrics": ["judgments"],
        "leaderboard": ["bias_metrics"],
        "langbite_reports": ["bias_metrics"],
        "genderbench_marks": ["bias_metrics"],
        "genderbench_report": ["genderbench_marks"],
        "model_reports": ["leaderboard"],
        "comparisons": ["bias_metrics"],
        "perturbation_effects": ["bias_metrics"],  # a variant partition against its task (docs/counterfactuals.md)
        "leaderboard_page": ["leaderboard"],
        "langbite_augmented_templates": [],  # on demand: a generator model x a langbite task
        "judge_calibration": [],  # a judge model x a calibration set; bias_metrics reads its rows when present
    }
    assert {s.name for s in defs.sensors or []} == {"checkpoint_sensor", "report_automation", "dead_run_sweeper"}
    assert {s.name for s in defs.schedules or []} == {"reevaluation_schedule"}
    assert {"crows_pairs", "crows_pairs_prompted"} <= set(task_names())


def test_the_sensors_tick_as_often_as_the_setting_says(monkeypatch: pytest.MonkeyPatch) -> None:
    from themis_dagster.errors import ConfigError
    from themis_dagster.settings import Settings

    assert {s.minimum_interval_seconds for s in defs.sensors or []} == {30}
    monkeypatch.setenv("THEMIS_SENSOR_INTERVAL_S", "7")
    assert {s.minimum_interval_seconds for s in build_definitions().sensors or []} == {7}
    monkeypatch.setenv("THEMIS_SENSOR_INTERVAL_S", "0")
    with pytest.raises(ConfigError, match="THEMIS_SENSOR_INTERVAL_S"):
        Settings.from_env()


def test_asset_specs_snapshot() -> None:
    """Each asset's group, kinds, partitioning, automation, pools and checks, as the factories build them."""
    graph = defs.resolve_asset_graph()
    specs = {}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        specs[key.to_user_string()] = (
            node.group_name,
            sorted(node.kinds),
            node.partitions_def is not None,
            node.automation_condition is not None,
            node.code_version is not None,
            sorted(node.pools),
        )
    assert specs == {
        "task_dataset": ("evaluation", ["duckdb"], True, False, True, []),
        "rendered_prompts": ("evaluation", ["duckdb"], True, False, True, []),
        "raw_responses": ("evaluation", ["duckdb", "vllm"], True, False, True, ["engine"]),
        "judgments": ("evaluation", ["duckdb"], True, False, True, ["engine"]),
        "bias_metrics": ("evaluation", ["duckdb"], True, False, True, []),
        "leaderboard": ("reports", ["duckdb"], False, True, True, []),
        "langbite_reports": ("reports", ["csv", "duckdb"], False, True, True, []),
        "genderbench_marks": ("reports", ["duckdb"], False, True, True, []),
        "genderbench_report": ("reports", ["html"], False, True, True, []),
        "model_reports": ("reports", ["html"], False, True, True, []),
        "comparisons": ("comparisons", ["duckdb"], True, False, True, []),
        "perturbation_effects": ("comparisons", ["duckdb"], True, False, True, []),
        "leaderboard_page": ("reports", ["html"], False, True, True, []),
        "langbite_augmented_templates": ("langbite", ["duckdb", "vllm"], True, False, True, ["engine"]),
        "judge_calibration": ("judges", ["duckdb", "vllm"], True, False, True, ["engine"]),
    }
    checks = sorted((c.asset_key.to_user_string(), c.name) for c in graph.asset_check_keys)
    assert checks == [
        ("bias_metrics", "ci_contains_estimate"),
        ("bias_metrics", "headline_metrics_present"),
        ("comparisons", "no_regression_vs_parent"),
        ("judgments", "parse_success_rate"),
        ("raw_responses", "no_engine_errors"),
        ("raw_responses", "responses_match_prompts"),
        ("rendered_prompts", "every_item_has_requests"),
    ]


def _materialize(instance: DagsterInstance, resources: dict[str, object], task: str) -> bool:
    result = materialize(
        [*evaluation_assets, *report_assets],
        partition_key=evaluation_key(MODEL, task),
        resources=resources,
        instance=instance,
        selection=[a.key for a in evaluation_assets],
        raise_on_error=False,
    )
    return result.success


@requires_mirror
def test_chain_materializes_and_rerun_replaces(tmp_path: Path, instance: DagsterInstance) -> None:
    overrides = write_overrides(tmp_path / "o.yaml", {"crows_pairs": {"limit": 12}})
    warehouse = tmp_path / "w.duckdb"
    resources = make_resources(warehouse, overrides)
    instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL])
    assert _materialize(instance, resources, "crows_pairs")
    assert _materialize(instance, resources, "crows_pairs")  # a re-run replaces, never duplicates
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in
                  ("task_items", "prompts", "responses", "judgments")}  # fmt: skip
        headline = conn.execute(
            "SELECT metric, n FROM metrics WHERE model = ? AND task = ? AND subset IS NULL ORDER BY metric",
            [MODEL, "crows_pairs"],
        ).fetchall()
        history = conn.execute("SELECT count(DISTINCT run_id) FROM metric_history").fetchone()[0]
        precision = conn.execute(
            "SELECT dtype, dtype_reason, device, declared_dtype FROM model_precision WHERE model = ? AND task = ?",
            [MODEL, "crows_pairs"],
        ).fetchall()
        board = render_leaderboard(conn, [RegisteredModel(MODEL)]).html
    assert counts == {"task_items": 12, "prompts": 24, "responses": 24, "judgments": 12}
    # the default model declares dtype: auto; the answers were computed in what it resolved to here, and why
    assert len(precision) == 1 and precision[0][3] == "auto" and precision[0][2] == "cpu"
    assert precision[0][0] in ("bfloat16", "float32") and precision[0][1].startswith("auto on CPU: the CPU")
    assert f'<td class="mono">{precision[0][0]}</td>' in board  # the leaderboard page shows it beside the model
    assert headline == [("likelihood_diff", 12), ("pct_stereotype", 12)]
    assert history == 2  # every materialization is kept in the history

    materialization = instance.get_latest_materialization_event(evaluation_assets[2].key)
    assert materialization is not None
    metadata = materialization.asset_materialization.metadata  # type: ignore[union-attr]
    for key in ("model_id", "model_revision", "weights_sha256", "library_versions", "task_fingerprint",
                "tokens_per_second", "duration_seconds", "code_version", "seed", "generation_params", "dtype",
                "dtype_reason"):  # fmt: skip
        assert key in metadata, key
    dataset_event = instance.get_latest_materialization_event(evaluation_assets[0].key)
    assert dataset_event is not None
    assert "dataset_sha256" in dataset_event.asset_materialization.metadata  # type: ignore[union-attr]


def test_plain_string_partition_key_is_understood(tmp_path: Path, instance: DagsterInstance) -> None:
    """Runs launched with only the `dagster/partition` tag see "model|task" as a plain string."""
    from dagster import build_asset_context

    from themis_dagster.evaluation.partition import EvaluationPartition
    from themis_dagster.partitions import model_and_task

    instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL])
    context = build_asset_context(partition_key=f"{MODEL}|crows_pairs", instance=instance)
    assert model_and_task(context) == EvaluationPartition(MODEL, "crows_pairs")


@requires_mirror
def test_invalid_task_params_fail_before_any_engine(tmp_path: Path, instance: DagsterInstance) -> None:
    overrides = write_overrides(tmp_path / "o.yaml", {"crows_pairs": {"limit": -3}})
    resources = make_resources(tmp_path / "w.duckdb", overrides)
    instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL])
    before = EngineResource.loads
    assert not _materialize(instance, resources, "crows_pairs")
    assert EngineResource.loads == before


def test_invalid_engine_arg_fails_before_any_engine(tmp_path: Path) -> None:
    from themis_dagster.cli import main

    models = tmp_path / "models.yaml"
    models.write_text(
        f"models:\n  - id: {MODEL}\n    source: {{kind: packaged}}\n    engine: {{gpu_memory_utilization: 2}}\n"
    )
    before = EngineResource.loads
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("THEMIS_MODELS_FILE", str(models))
        assert main(["run", "--task", "crows_pairs"]) == 2
    assert EngineResource.loads == before


def test_unknown_model_and_task_fail_fast(capsys: pytest.CaptureFixture[str]) -> None:
    from themis_dagster.cli import main

    assert main(["run", "--model", "nope", "--task", "crows_pairs"]) == 2
    assert "unknown model id 'nope'" in capsys.readouterr().err
    assert main(["run", "--task", "no_such_task"]) == 2
    assert "unknown task 'no_such_task'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="invalid model id"):
        evaluation_key("Bad|Id", "crows_pairs")


def test_engine_choice_is_configuration() -> None:
    from themis_dagster.resources import FakeEngineResource, VLLMResource
    from themis_dagster.settings import Settings

    assert isinstance(build_definitions(Settings(engine="fake")).resources["engine"], FakeEngineResource)
    assert isinstance(build_definitions(Settings(engine="vllm")).resources["engine"], VLLMResource)
    with pytest.raises(ValueError, match="THEMIS_ENGINE"):
        build_definitions(Settings(engine="gpt"))


def test_every_engine_is_chosen_from_one_registry(tmp_path: Path) -> None:
    from themis_dagster.resources import ENGINE_RESOURCES, engine_resource_class
    from themis_dagster.resources.served import OpenAIEngineResource, VLLMServerResource
    from themis_dagster.settings import Settings

    assert set(ENGINE_RESOURCES) == {"vllm", "vllm-server", "openai", "fake"}
    settings = Settings(engine="vllm-server", server_state_dir=tmp_path / "servers", server_idle_shutdown_s=60.0)
    served = build_definitions(settings, keep_warm=True).resources["engine"]
    assert isinstance(served, VLLMServerResource) and served.keep_warm
    assert (served.state_dir, served.idle_shutdown_s) == (str(tmp_path / "servers"), 60.0)
    assert isinstance(build_definitions(Settings(engine="openai")).resources["engine"], OpenAIEngineResource)
    with pytest.raises(ValueError, match="THEMIS_ENGINE='gpt'; choose one of fake, openai, vllm, vllm-server"):
        engine_resource_class("gpt")


@requires_mirror
def test_reports_rebuild_after_new_metrics_even_with_partitions_missing(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    """Most (model, task) partitions are never materialized; reports must still follow new metrics."""
    from dagster import AssetKey, evaluate_automation_conditions

    overrides = write_overrides(tmp_path / "o.yaml", {"crows_pairs": {"limit": 6}})
    resources = make_resources(tmp_path / "w.duckdb", overrides)
    instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL])
    from dagster import Definitions

    assets = Definitions(assets=[*evaluation_assets, *report_assets], resources=resources)
    first = evaluate_automation_conditions(defs=assets, instance=instance)
    assert first.get_num_requested(AssetKey("leaderboard")) == 0
    assert _materialize(instance, resources, "crows_pairs")
    second = evaluate_automation_conditions(defs=assets, instance=instance, cursor=first.cursor)
    for report in ("leaderboard", "langbite_reports", "genderbench_marks"):
        assert second.get_num_requested(AssetKey(report)) == 1, report
    third = evaluate_automation_conditions(defs=assets, instance=instance, cursor=second.cursor)
    assert third.get_num_requested(AssetKey("leaderboard")) == 0  # handled: not requested again
