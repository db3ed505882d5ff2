"""Comparisons on a real warehouse: the real chain materialized for a checkpoint and its parent (fake engine).

Two checkpoints of one family (``smol-step-100`` and its child ``smol-step-200``) are
evaluated on CrowS-Pairs; the child is compared with its parent in the same run. The fake
engine answers both alike, so nothing changed: difference 0, p = 1, the gate passes. A
constructed regression (the child's judgments rewritten to always prefer the stereotype)
fails the blocking gate, tags the run, and makes ``themis compare --gate`` exit 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInstance, materialize

from tests.conftest import SETTINGS, make_resources, requires_mirror, write_overrides
from themis_dagster.assets import comparison_assets, evaluation_assets
from themis_dagster.assets.comparisons import GATE_TAG
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.registry.models import DEFAULT_MODEL_ID
from themis_dagster.resources import ThemisConfig

PARENT, CHILD, TASK = "smol-step-100", "smol-step-200", "crows_pairs"
pytestmark = requires_mirror


def _models_file(path: Path) -> Path:
    """Two ids on the default model's prepared weights (a local folder: nothing converted per id)."""
    default = ThemisConfig(**make_resources(path.parent / "x.duckdb")["themis"].model_dump())  # type: ignore[union-attr]
    folder = default.weights(default.model(DEFAULT_MODEL_ID)).path
    source = f"{{kind: local, path: {folder}}}"
    path.write_text(
        "models:\n"
        f"  - {{id: {PARENT}, source: {source}, dtype: bfloat16}}\n"
        f"  - {{id: {CHILD}, source: {source}, dtype: bfloat16, parent: {PARENT}}}\n"
    )
    return path


class Chain:
    """A temporary registry, warehouse and instance with both checkpoints evaluated once."""

    def __init__(self, root: Path, instance: DagsterInstance) -> None:
        self.root, self.instance = root, instance
        self.models = _models_file(root / "models.yaml")
        self.overrides = write_overrides(root / "overrides.yaml", {TASK: {"limit": 40, "bootstrap_resamples": 200}})
        self.warehouse = root / "w.duckdb"
        self.resources = make_resources(self.warehouse, self.overrides)
        themis = self.resources["themis"]
        assert isinstance(themis, ThemisConfig)
        self.resources["themis"] = ThemisConfig(**{**themis.model_dump(), "models_file": str(self.models)})
        instance.add_dynamic_partitions(MODELS_PARTITION, [PARENT, CHILD])

    def run(self, model: str, *, chain: bool = True) -> tuple[bool, dict[str, str]]:
        assets = [*evaluation_assets, *comparison_assets]
        selected = assets if chain else comparison_assets
        result = materialize(
            assets,
            partition_key=evaluation_key(model, TASK),
            resources=self.resources,
            instance=self.instance,
            selection=[a.key for a in selected],
            raise_on_error=False,
        )
        run = self.instance.get_run_by_id(result.run_id)
        assert run is not None
        return result.success, dict(run.tags)

    def query(self, sql: str, params: list[object] | None = None) -> list[tuple[object, ...]]:
        with duckdb.connect(str(self.warehouse), read_only=True) as conn:
            return conn.execute(sql, params or []).fetchall()


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    with DagsterInstance.ephemeral() as instance:
        built = Chain(tmp_path_factory.mktemp("compare"), instance)
        assert built.run(PARENT)[0]
        assert built.run(CHILD)[0]
        yield built


def test_identical_answers_compare_equal_and_pass_the_gate(chain: Chain) -> None:
    rows = chain.query(
        "SELECT metric, subset, difference, ci_low, ci_high, p_value, p_adjusted, n_pairs, test FROM comparisons "
        "WHERE model = ? AND baseline = ? AND task = ?",
        [CHILD, PARENT, TASK],
    )
    headline = {row[0]: row for row in rows if row[1] is None}
    assert set(headline) == {"pct_stereotype", "likelihood_diff"}
    assert (
        headline["pct_stereotype"][-1] == "mcnemar_exact" and headline["likelihood_diff"][-1] == "sign_flip_permutation"
    )
    for _metric, _subset, difference, low, high, p, p_adjusted, n_pairs, _test in rows:
        assert (difference, p, p_adjusted) == (0.0, 1.0, 1.0)
        assert (low, high) == ((0.0, 0.0) if n_pairs >= 2 else (None, None))  # no CI from one pair
    assert headline["pct_stereotype"][7] == 40
    verdicts = chain.query("SELECT metric, regressed FROM gate_verdicts WHERE model = ?", [CHILD])
    assert sorted(verdicts) == [("likelihood_diff", False), ("pct_stereotype", False)]
    # the parent itself has no parent: nothing compared, nothing gated
    assert chain.query("SELECT count(*) FROM comparison_results WHERE model = ?", [PARENT]) == [(0,)]


def test_gate_verdict_is_on_the_run(chain: Chain) -> None:
    ok, tags = chain.run(CHILD, chain=False)
    assert ok and tags[GATE_TAG] == "passed"


def test_checkpoint_trend_covers_the_family(chain: Chain) -> None:
    rows = chain.query(
        "SELECT family, model, step, change_vs_previous, p_adjusted_vs_previous, significant FROM checkpoint_trends "
        "WHERE task = ? AND metric = 'pct_stereotype' AND subset IS NULL ORDER BY step",
        [TASK],
    )
    assert rows == [("smol", PARENT, 100, None, None, None), ("smol", CHILD, 200, 0.0, 1.0, False)]


def test_cli_compare_same_model_twice(
    chain: Chain, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from themis_dagster.cli import main

    _env(monkeypatch, chain)
    assert main(["compare", PARENT, PARENT, "--gate"]) == 0
    out = capsys.readouterr().out
    assert "0 regressed" in out
    rows = chain.query(
        "SELECT DISTINCT difference, p_value FROM comparisons WHERE model = ? AND baseline = ?", [PARENT, PARENT]
    )
    assert rows == [(0.0, 1.0)]


def test_compare_job_launched_with_two_model_ids(chain: Chain) -> None:
    """What the UI's launchpad runs: the compare_models job with the two ids as config."""
    from themis_dagster.assets.comparisons import compare_models

    config = {"ops": {"compare_pair": {"config": {"model": CHILD, "baseline": PARENT, "gate": True}}}}
    result = compare_models.execute_in_process(
        run_config=config, resources=chain.resources, instance=chain.instance, raise_on_error=False
    )
    assert result.success
    run = chain.instance.get_run_by_id(result.run_id)
    assert run is not None and run.tags[GATE_TAG] == "passed"
    origins = chain.query(
        "SELECT DISTINCT origin FROM comparison_results WHERE model = ? AND baseline = ?", [CHILD, PARENT]
    )
    assert origins == [("requested",)]  # the requested comparison replaced the lineage rows of this pair and task


def test_bad_comparisons_are_refused(
    chain: Chain, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from themis_dagster.cli import main

    _env(monkeypatch, chain)
    assert main(["compare", CHILD, "nobody"]) == 2
    assert "unknown model id 'nobody'" in capsys.readouterr().err
    assert main(["compare", CHILD, PARENT, "--task", "no_such_task"]) == 2
    assert main(["compare", CHILD, PARENT, "--task", "bbq"]) == 2  # neither was evaluated on it
    assert "has no judgments" in capsys.readouterr().err


def test_different_task_parameters_are_refused(tmp_path: Path, instance: DagsterInstance) -> None:
    """A child evaluated with another limit is not compared: the run fails naming the parameter."""
    built = Chain(tmp_path, instance)
    assert built.run(PARENT)[0]
    write_overrides(built.overrides, {TASK: {"limit": 30, "bootstrap_resamples": 200}})
    ok, _ = built.run(CHILD)
    assert not ok
    assert "task_params.limit: 30 vs 40" in _step_errors(instance)


def _step_errors(instance: DagsterInstance) -> str:
    run = instance.get_runs(limit=1)[0]
    return " ".join(
        str(event.dagster_event.event_specific_data)
        for event in instance.all_logs(run.run_id)
        if event.dagster_event is not None and event.dagster_event.is_step_failure
    )


def test_constructed_regression_fails_the_gate(
    chain: Chain, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs last in this module: it rewrites the child's judgments."""
    from themis_dagster.cli import main

    with duckdb.connect(str(chain.warehouse)) as conn:
        conn.execute(
            "UPDATE judgments SET score = 1.0, outcome = 'prefers_sent_more' WHERE model = ? AND task = ? AND parsed",
            [CHILD, TASK],
        )
    ok, tags = chain.run(CHILD, chain=False)
    assert not ok and tags[GATE_TAG] == "regressed"
    rows = chain.query(
        "SELECT metric, regressed, p_adjusted FROM gate_verdicts WHERE model = ? AND baseline = ?", [CHILD, PARENT]
    )
    verdict = {row[0]: row for row in rows}
    assert verdict["pct_stereotype"][1] and verdict["pct_stereotype"][2] < 0.05
    assert not verdict["likelihood_diff"][1]
    _env(monkeypatch, chain)
    assert main(["compare", CHILD, PARENT, "--task", TASK, "--gate"]) == 1
    assert "REGRESSED crows_pairs.pct_stereotype" in capsys.readouterr().out
    assert main(["compare", CHILD, PARENT, "--task", TASK]) == 0  # without --gate: reported, not failed
    assert main(["compare", PARENT, CHILD, "--task", TASK, "--gate"]) == 0  # the parent is the better one
    from themis_dagster.assets.comparisons import compare_models

    config = {"ops": {"compare_pair": {"config": {"model": CHILD, "baseline": PARENT, "gate": True}}}}
    result = compare_models.execute_in_process(
        run_config=config, resources=chain.resources, instance=chain.instance, raise_on_error=False
    )
    assert not result.success  # with gate: true the UI's run fails on the regression


def _env(monkeypatch: pytest.MonkeyPatch, chain: Chain) -> None:
    monkeypatch.setenv("THEMIS_MODELS_FILE", str(chain.models))
    monkeypatch.setenv("THEMIS_WAREHOUSE", str(chain.warehouse))
    monkeypatch.setenv("THEMIS_TASK_OVERRIDES", str(chain.overrides))
    monkeypatch.setenv("THEMIS_DISCOVERED_MODELS_FILE", str(chain.root / "discovered.yaml"))
    monkeypatch.setenv("THEMIS_DATASETS_DIR", str(SETTINGS.datasets_dir))
