"""Judge calibration as an asset, on the fake engine: a judge with known errors labels the regard set.

The fake judge answers every regard text with its human label except a known share it calls
``negative`` and a few it answers unreadably, so every agreement number is known in advance.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInstance, materialize

from tests.conftest import make_resources, requires_mirror, write_overrides
from themis_dagster.assets import evaluation_assets, judge_assets
from themis_dagster.engines.base import Engine
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.errors import ConfigError
from themis_dagster.evaluation.judging.calibrations import read_calibration
from themis_dagster.evaluation.judging.questions import CALIBRATED_QUESTIONS, check_judge_labels, load_calibration_set
from themis_dagster.judging.calibration_sets import REGARD_LABELS, CalibrationRow, CalibrationSet
from themis_dagster.partitions import MODELS_PARTITION, calibration_key, evaluation_key
from themis_dagster.registry.models import DEFAULT_MODEL_ID, ModelSpec
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources import FakeEngineResource
from themis_dagster.stats import Resampling
from themis_dagster.stats.agreement import judge_agreement
from themis_dagster.tasks.loader import load_task

JUDGE = DEFAULT_MODEL_ID


def _regard() -> CalibrationSet:
    from tests.conftest import SETTINGS

    return load_calibration_set("regard", datasets_dir=SETTINGS.datasets_dir, cache_dir=SETTINGS.cache_dir)


def noisy_label(text: str, human: str) -> str:
    """The fake judge: the human label, except every 5th neutral text called negative and every 30th text unreadable."""
    number = int(text.split("#", 1)[1]) if "#" in text else 0
    if number % 30 == 29:
        return "I cannot say."
    if human == "neutral" and number % 5 == 0:
        return "Negative."
    return human.capitalize() + "."


class NoisyJudgeResource(FakeEngineResource):
    """The fake engine answering the regard question by ``noisy_label`` of the text it is asked about."""

    def _build(self, spec: ModelSpec, weights: ResolvedWeights) -> Engine:
        rows = _regard().rows
        numbered = {row.text: (index, row.label) for index, row in enumerate(rows)}

        def reply(prompt: str) -> str:
            for text, (index, label) in numbered.items():
                if f'"{text}"' in prompt:
                    return noisy_label(f"{text}#{index}", label)
            if "How does the text regard" in prompt:  # BOLD's question about a continuation
                return "Negative." if len(prompt) % 3 == 0 else "Neutral."
            if "Is this text toxic" in prompt:
                return "non-toxic"
            return " was a person of note."  # BOLD's continuation

        return FakeEngine(weights.path, reply=reply)


def _materialize(instance: DagsterInstance, resources: dict[str, object]) -> object:
    return materialize(
        judge_assets, partition_key=calibration_key(JUDGE, "regard"), resources=resources, instance=instance
    )


@requires_mirror
def test_calibration_asset_labels_every_text_and_measures_agreement(tmp_path: Path, instance: DagsterInstance) -> None:
    warehouse = tmp_path / "w.duckdb"
    resources = make_resources(warehouse) | {"engine": NoisyJudgeResource()}
    instance.add_dynamic_partitions(MODELS_PARTITION, [JUDGE])
    first = _materialize(instance, resources)
    assert first.success  # type: ignore[attr-defined]
    rows = _regard().rows
    expected = [noisy_label(f"{row.text}#{i}", row.label).rstrip(".").lower() for i, row in enumerate(rows)]
    readable = [(row.label, said) for row, said in zip(rows, expected, strict=True) if said != "i cannot say"]
    params = load_task("bold", {}).params  # the judge's task's bootstrap settings
    truth = judge_agreement(
        [h for h, _ in readable], [j for _, j in readable], REGARD_LABELS,
        resampling=Resampling(n_resamples=params.bootstrap_resamples, seed=params.seed),
    )  # fmt: skip
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        labels = conn.execute("SELECT human_label, judge_label FROM judge_calibration_labels").fetchall()
        metrics = {
            (metric, label, said): (value, low, high, n)
            for metric, label, said, value, low, high, n in conn.execute(
                "SELECT metric, label, judge_label, value, ci_low, ci_high, n FROM judge_calibration_metrics"
            ).fetchall()
        }
        stored = read_calibration(conn, JUDGE, "regard", REGARD_LABELS)
    assert len(labels) == len(rows) == 301
    assert sum(said is None for _, said in labels) == len(rows) - len(readable) == 10
    assert metrics["accuracy", None, None][0] == pytest.approx(truth.accuracy.value)
    assert metrics["kappa", None, None][:3] == pytest.approx(
        (truth.kappa.value, truth.kappa.ci_low, truth.kappa.ci_high)
    )
    assert metrics["unreadable_share", None, None] == (pytest.approx(10 / 301), None, None, 301)
    neutral = metrics["sensitivity", "neutral", None]
    assert neutral[0] == pytest.approx(truth.per_class[1].sensitivity.value) and neutral[1] < neutral[0] < neutral[2]
    confusion = {(h, j): v for (m, h, j), (v, *_) in metrics.items() if m == "confusion"}
    assert confusion == {(h, j): float(n) for (h, j), n in Counter(readable).items()} | {
        (h, j): 0.0 for h in REGARD_LABELS for j in REGARD_LABELS if (h, j) not in Counter(readable)
    }
    assert stored is not None and len(stored.human) == len(readable) and stored.kappa is not None
    assert stored.kappa.value == pytest.approx(truth.kappa.value)

    # a re-run replaces the partition's rows, and the judge's answers all come from the request cache
    again = _materialize(instance, resources)
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM judge_calibration_labels), (SELECT count(*) FROM judge_calibration_metrics)"
        ).fetchone()
    assert counts == (301, len(metrics))
    event = again.asset_materializations_for_node("judge_calibration")[0]  # type: ignore[attr-defined]
    assert event.metadata["answers_reused"].value == 301 and event.metadata["requests_sent"].value == 0


@requires_mirror
def test_calibration_asks_the_tasks_own_question() -> None:
    """The calibration request is BOLD's judge request: same template and sampling settings."""
    task = load_task("bold", {"judge_model": JUDGE})
    judge = task.second_opinion
    row = CalibrationRow("train.tsv:1", "XYZ was known for his kindness.", "positive")
    [ask] = judge.calibration_requests("regard", [row], task.params)  # type: ignore[union-attr]
    assert ask.template == "bold_regard" and ask.request_id == "train.tsv:1:regard"
    assert ask.gen_params == {**task.params.generation.model_dump(mode="json"), "temperature": 0.0, "max_tokens": 8}
    assert '"XYZ was known for his kindness."' in (ask.messages or [])[0]["content"]
    assert CALIBRATED_QUESTIONS["regard"] == ("bold", "regard")


def test_a_calibration_set_with_other_labels_than_the_judge_fails_naming_the_field() -> None:
    judge = load_task("bold", {}).second_opinion
    rows = tuple(CalibrationRow(f"r{i}", f"text {i}", "good" if i % 2 else "bad") for i in range(20))
    other = CalibrationSet("mine", ("good", "bad"), rows, source="here", license="mine")
    with pytest.raises(ConfigError, match=r"field 'labels' is \['bad', 'good'\], but the judge's 'regard' question"):
        check_judge_labels(judge, "regard", other)  # type: ignore[arg-type]


@requires_mirror
def test_bold_reports_its_judged_metrics_beside_the_judges_calibration(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    """BOLD with the default model as its regard judge: uncalibrated first, then with its kappa and corrected value."""
    warehouse = tmp_path / "w.duckdb"
    overrides = write_overrides(
        tmp_path / "o.yaml",
        {"bold": {"limit": 2, "judge_model": JUDGE, "domains": ["religious_ideology"], "bootstrap_resamples": 200}},
    )
    resources = make_resources(warehouse, overrides) | {"engine": NoisyJudgeResource()}
    instance.add_dynamic_partitions(MODELS_PARTITION, [JUDGE])

    def evaluate() -> dict[tuple[str, str | None], tuple]:
        assert materialize(
            evaluation_assets, partition_key=evaluation_key(JUDGE, "bold"), resources=resources, instance=instance
        ).success
        with duckdb.connect(str(warehouse), read_only=True) as conn:
            rows = conn.execute(
                "SELECT metric, subset, judge, calibration_set, kappa, value, corrected, corrected_ci_low, "
                "corrected_ci_high, note FROM judged_metrics"
            ).fetchall()
        return {(row[0], row[1]): row[2:] for row in rows}

    before = evaluate()
    assert before["negative_regard_share", None][:2] == (JUDGE, None)
    assert {row[-1] for row in before.values()} == {"uncalibrated judge"}

    assert _materialize(instance, resources).success  # type: ignore[attr-defined]
    after = evaluate()  # a re-run replaces the partition's judged rows
    assert set(after) == set(before)
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        kappa = conn.execute("SELECT value FROM judge_calibration_metrics WHERE metric = 'kappa'").fetchone()
        judged = conn.execute(
            "SELECT value FROM metric_values WHERE metric = 'negative_regard_share' AND subset IS NULL"
        ).fetchone()
    judge, calibration_set, stored_kappa, value, corrected, low, high, note = after["negative_regard_share", None]
    assert (judge, calibration_set, note) == (JUDGE, "regard", None)
    assert kappa is not None and stored_kappa == pytest.approx(kappa[0])
    assert judged is not None and value == pytest.approx(judged[0])
    assert corrected is not None and low <= corrected <= high
    assert after["negative_regard_disparity", None][-1] is None
    assert after["toxicity_rate", None][-1] == "uncalibrated judge"  # no calibration set for toxicity


@pytest.mark.engine
@requires_mirror
def test_real_engine_default_model_as_regard_judge(
    tmp_path: Path, instance: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default model labels regard texts through the real engine; its kappa is stored, whatever it is.

    The dev and test splits (90 texts) keep the suite's time down; ``make run`` calibrates on all 301.
    """
    import functools
    import time

    from themis_dagster.evaluation.judging import questions
    from themis_dagster.judging.calibration_sets import load_regard
    from themis_dagster.resources import VLLMResource

    monkeypatch.setitem(questions.PUBLISHED_SETS, "regard", functools.partial(load_regard, ("dev", "test")))
    warehouse = tmp_path / "w.duckdb"
    resources = make_resources(warehouse) | {"engine": VLLMResource()}
    instance.add_dynamic_partitions(MODELS_PARTITION, [JUDGE])
    started = time.perf_counter()
    result = _materialize(instance, resources)
    elapsed = time.perf_counter() - started
    assert result.success  # type: ignore[attr-defined]
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        labels = conn.execute("SELECT judge_label, count(*) FROM judge_calibration_labels GROUP BY ALL").fetchall()
        kappa = conn.execute(
            "SELECT value, ci_low, ci_high, n FROM judge_calibration_metrics WHERE metric = 'kappa'"
        ).fetchone()
    assert sum(count for _, count in labels) == 90
    assert kappa is not None and kappa[3] > 0, "some answers are readable"
    print(f"real-engine regard calibration: {elapsed:.0f} s, labels {dict(labels)}, kappa {kappa}")


def test_themis_run_calibrates_the_judges_its_tasks_name(tmp_path: Path) -> None:
    """make run's profile makes the default model BOLD's regard judge: themis run calibrates it on regard first."""
    from themis_dagster.cli.common import judge_calibrations
    from themis_dagster.settings import Settings
    from themis_dagster.tasks.profile import write_profile

    profile = Settings(task_overrides_file=write_profile(tmp_path / "default.yaml"))
    assert judge_calibrations(profile, ["crows_pairs", "bold"]) == [(JUDGE, "regard")]
    assert judge_calibrations(profile, ["crows_pairs"]) == []
    no_judge = Settings(task_overrides_file=write_overrides(tmp_path / "o.yaml", {"bold": {"limit": 3}}))
    assert judge_calibrations(no_judge, ["bold"]) == []


def test_calibration_partition_keys(instance: DagsterInstance) -> None:
    """``calibration_set|judge`` (dimensions sort by name), typed or as a plain string; unknown sets fail."""
    from dagster import build_asset_context

    from themis_dagster.partitions import judge_and_set

    assert str(calibration_key(JUDGE, "regard")) == f"regard|{JUDGE}"
    instance.add_dynamic_partitions(MODELS_PARTITION, [JUDGE])
    context = build_asset_context(partition_key=f"regard|{JUDGE}", instance=instance)
    assert judge_and_set(context) == (JUDGE, "regard")
    with pytest.raises(ValueError, match="unknown calibration set 'toxicity'"):
        calibration_key(JUDGE, "toxicity")
