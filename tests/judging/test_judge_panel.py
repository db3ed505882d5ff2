"""Several judges on the same replies: their agreement (Fleiss' kappa) and a majority verdict, for BOLD."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml
from dagster import DagsterInstance, materialize

from tests.conftest import SETTINGS, make_resources, requires_mirror, write_overrides
from themis_dagster.assets import evaluation_assets
from themis_dagster.engines.base import Engine
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.errors import ConfigError
from themis_dagster.exchange import Response
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.registry.models import DEFAULT_MODEL_ID, ModelSpec
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources import FakeEngineResource, ThemisConfig
from themis_dagster.stats.agreement import judges_fleiss_kappa
from themis_dagster.tasks.bold.data import Params
from themis_dagster.tasks.bold.metrics import panel_agreement
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.spec import JudgedInputs, Judgment

FIRST, SECOND, THIRD = DEFAULT_MODEL_ID, f"{DEFAULT_MODEL_ID}-judge-b", f"{DEFAULT_MODEL_ID}-judge-c"


def _judgment(item: str, votes: list[str | None] | None = None) -> Judgment:
    detail = {"domain": "gender", "group": "men", "prompt": "He", "continuation": " was."}
    if votes is not None:
        detail["regard_votes"] = votes
    return Judgment(item_id=item, subset="gender:men", outcome="answered", score=None, parsed=True, detail=detail)


def test_fleiss_kappa_of_a_panel_by_hand() -> None:
    """3 judges, 4 continuations: P_i = 1, 1, 1/3, 1, so P_bar = 5/6; category shares 5/12, 4/12, 3/12, so
    P_e = 50/144; kappa = (5/6 - 50/144) / (1 - 50/144) = 35/47 (Fleiss 1971)."""
    votes = [
        ["positive", "positive", "positive"],
        ["negative", "negative", "negative"],
        ["positive", "positive", "negative"],
        ["neutral", "neutral", "neutral"],
    ]
    judgments = [_judgment(str(i), v) for i, v in enumerate(votes)]
    judgments.append(_judgment("x", ["neutral", None, "neutral"]))  # a missing vote: left out
    params = Params(judge_model=FIRST, panel_judges=(SECOND, THIRD), bootstrap_resamples=200)
    [value] = panel_agreement("regard_judges_kappa", "regard", judgments, params)
    assert value.value == pytest.approx(35 / 47) and value.n == 4
    [none] = panel_agreement("regard_judges_kappa", "regard", [_judgment("0")], params)
    assert (none.value, none.n) == (None, 0)  # no panel: NULL, never zero


def _reply(request_id: str, text: str | None) -> Response:
    item = request_id.split(":", 1)[0]
    return Response(request_id, item, text=text, error=None if text is not None else "engine error")


def test_majority_verdict_and_votes_by_hand() -> None:
    """Each continuation's label is the majority of three judges; a tie or too few readable votes is no verdict."""
    task = load_task("bold", {"judge_model": FIRST, "panel_judges": [SECOND, THIRD], "judge_verdict": "majority"})
    judge = task.second_opinion
    answers = {  # item: (first, second, third) regard answers
        "a": ("Negative.", "negative", "Neutral"),
        "b": ("Positive", "Neutral", "Negative"),
        "c": ("Neutral", None, "I cannot say"),
    }
    judgments = [_judgment(item) for item in answers]
    asks = judge.requests(judgments, task.params)  # type: ignore[union-attr]
    responses = {
        model: [_reply(f"{item}:{kind}", answers[item][k] if kind == "regard" else "non-toxic")
                for item in answers for kind in ("regard", "toxicity")]
        for k, model in enumerate((FIRST, SECOND, THIRD))
    }  # fmt: skip
    done = {j.item_id: j.detail for j in judge.apply_panel(judgments, asks, responses, task.params)}  # type: ignore[union-attr]
    assert done["a"]["regard"] == "negative" and done["a"]["regard_votes"] == ["negative", "negative", "neutral"]
    assert done["b"]["regard"] is None and done["b"]["regard_status"] == "no majority among the judges"
    assert done["c"]["regard"] == "neutral"  # one readable vote is the most votes
    assert done["a"]["toxicity"] == "non-toxic" and done["a"]["regard_reply"] == "Negative."
    judged = judge.judged_values(JudgedInputs(list(done_judgments(judgments, done)), [], task.params, {}))  # type: ignore[union-attr]
    assert judged == []  # no metric values given: nothing to qualify


def done_judgments(judgments: list[Judgment], details: dict[str, dict[str, object]]) -> list[Judgment]:
    from dataclasses import replace

    return [replace(j, detail=details[j.item_id]) for j in judgments]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"panel_judges": [SECOND]}, "panel_judges: needs judge_model"),
        ({"judge_model": FIRST, "panel_judges": [FIRST]}, "must not repeat"),
        ({"judge_model": FIRST, "panel_judges": [SECOND], "judge_verdict": "majority"}, "at least three judges"),
        ({"judge_model": FIRST, "judge_verdict": "most"}, "judge_verdict"),
    ],
)
def test_a_bad_panel_fails_before_any_engine(params: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_task("bold", params)


def test_an_unregistered_panel_judge_fails_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"panel_judges\[1\]: model 'nobody' is not registered"):
        load_task("bold", {"judge_model": FIRST, "panel_judges": [SECOND, "nobody"]}, models={FIRST, SECOND})


def _models_file(tmp_path: Path) -> Path:
    """The project's registry plus two judges: the default model under an instruction naming the judge (a
    variant shares its parent's engine, so the fake engine tells the judges apart by that instruction)."""
    document = yaml.safe_load(SETTINGS.models_file.read_text(encoding="utf-8"))
    for model, name in ((SECOND, "judge B"), (THIRD, "judge C")):
        document["models"].append(
            {"id": model, "parent": FIRST, "description": "another judge for tests",
             "mitigation": {"kind": "instruction", "template": f"You are {name}. {{text}}"}}
        )  # fmt: skip
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


class PanelResource(FakeEngineResource):
    """Three judges: the first and third rate regard by the continuation's words, the second always neutral."""

    def _build(self, spec: ModelSpec, weights: ResolvedWeights) -> Engine:
        def reply(prompt: str) -> str:
            if "How does the text regard" in prompt:
                if "You are judge B." in prompt:
                    return "Neutral."
                return "Negative." if "feared" in prompt else "Positive."
            if "Is this text toxic" in prompt:
                return "toxic" if "You are judge C." in prompt else "non-toxic"
            return " was a person of note." if len(prompt) % 3 else " was feared and hated."

        return FakeEngine(weights.path, reply=reply)


@requires_mirror
def test_bold_with_three_judges_on_the_fake_engine(tmp_path: Path, instance: DagsterInstance) -> None:
    """Every judge answers every question; the verdict is the majority, the agreement a stored metric."""
    warehouse = tmp_path / "w.duckdb"
    overrides = write_overrides(
        tmp_path / "o.yaml",
        {"bold": {"limit": 3, "domains": ["religious_ideology"], "bootstrap_resamples": 200, "judge_model": FIRST,
                  "panel_judges": [SECOND, THIRD], "judge_verdict": "majority"}},
    )  # fmt: skip
    resources = make_resources(warehouse, overrides)
    themis = resources["themis"]
    assert isinstance(themis, ThemisConfig)
    resources["themis"] = ThemisConfig(**(themis.model_dump() | {"models_file": str(_models_file(tmp_path))}))
    instance.add_dynamic_partitions(MODELS_PARTITION, [FIRST])
    result = materialize(
        evaluation_assets,
        partition_key=evaluation_key(FIRST, "bold"),
        resources=resources | {"engine": PanelResource()},
        instance=instance,
    )
    assert result.success
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        details = [
            yaml.safe_load(row[0]) for row in conn.execute("SELECT detail FROM judgments WHERE parsed").fetchall()
        ]
        metrics = dict(
            ((metric, subset), (value, n))
            for metric, subset, value, n in conn.execute(
                "SELECT metric, subset, value, n FROM metric_values"
            ).fetchall()
        )
        judged = conn.execute(
            "SELECT judge, note FROM judged_metrics WHERE metric = 'negative_regard_share' AND subset IS NULL"
        ).fetchone()
    assert details and all(len(d["regard_votes"]) == 3 and d["regard_votes"][1] == "neutral" for d in details)
    assert all(d["regard"] == d["regard_votes"][0] for d in details)  # first and third agree: the majority
    assert {d["regard"] for d in details} == {"negative", "positive"}
    assert all(d["toxicity"] == "non-toxic" for d in details)  # two of three say non-toxic
    expected = judges_fleiss_kappa([d["regard_votes"] for d in details], ["positive", "negative", "neutral"])
    assert metrics["regard_judges_kappa", None] == (pytest.approx(expected.value), len(details))
    assert judged == (f"majority of {FIRST}, {SECOND}, {THIRD}", "uncalibrated judge")


def test_themis_run_calibrates_every_judge_of_the_panel(tmp_path: Path) -> None:
    from themis_dagster.cli.common import judge_calibrations
    from themis_dagster.settings import Settings

    overrides = write_overrides(tmp_path / "o.yaml", {"bold": {"judge_model": FIRST, "panel_judges": [SECOND, THIRD]}})
    pairs = judge_calibrations(Settings(task_overrides_file=overrides), ["bold"])
    assert pairs == [(FIRST, "regard"), (SECOND, "regard"), (THIRD, "regard")]


# -- the majority calibrated as a judge of its own --------------------------------------------------

# (item, human label, the three judges' labels): item 3 ties (no verdict), item 5 has one readable vote.
MAJORITY_ROWS = [
    ("1", "negative", ("negative", "negative", "neutral")),
    ("2", "neutral", ("neutral", "negative", "negative")),
    ("3", "positive", ("positive", "neutral", None)),
    ("4", "neutral", ("neutral", "neutral", "neutral")),
    ("5", "positive", (None, None, "positive")),
]


def _stored_calibrations(path: Path, judges: tuple[str, ...]) -> None:
    from datetime import datetime

    from themis_dagster.warehouse.schema import ensure_schema

    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        for item, human, said in MAJORITY_ROWS:
            for judge, label in zip((FIRST, SECOND, THIRD), said, strict=True):
                if judge in judges:
                    conn.execute(
                        "INSERT INTO judge_calibration_labels (judge, calibration_set, item_id, text, human_label, "
                        "judge_label, run_id, materialized_at) VALUES (?, 'regard', ?, ?, ?, ?, 'r', ?)",
                        [judge, item, f"text {item}", human, label, datetime(2026, 1, 1)],
                    )


def test_the_majority_is_calibrated_as_a_judge_of_its_own(tmp_path: Path) -> None:
    """Its label per calibration text by the task's rule; its own confusion pairs and Cohen's kappa, by hand."""
    from themis_dagster.evaluation.judging.calibrations import majority_calibration
    from themis_dagster.judging.calibration_sets import REGARD_LABELS
    from themis_dagster.judging.correction import UNCALIBRATED
    from themis_dagster.tasks.spec import MetricValue

    task = load_task("bold", {"judge_model": FIRST, "panel_judges": [SECOND, THIRD], "judge_verdict": "majority",
                              "bootstrap_resamples": 200})  # fmt: skip
    _stored_calibrations(tmp_path / "w.duckdb", (FIRST, SECOND, THIRD))
    with duckdb.connect(str(tmp_path / "w.duckdb")) as conn:
        found = majority_calibration(conn, (FIRST, SECOND, THIRD), "regard", REGARD_LABELS, task.params)
    assert found is not None and found.judge == f"majority of {FIRST}, {SECOND}, {THIRD}"
    # items 1, 2, 4, 5 (3 ties): majority negative, negative, neutral, positive
    assert found.human == ("negative", "neutral", "neutral", "positive")
    assert found.judged == ("negative", "negative", "neutral", "positive")
    # p_o = 3/4; marginals human (1, 2, 1), majority (2, 1, 1) of 4: p_c = (2 + 2 + 1) / 16; kappa = 7/11
    assert found.kappa is not None and found.kappa.value == pytest.approx((0.75 - 5 / 16) / (1 - 5 / 16))

    values = [MetricValue(None, "negative_regard_share", 0.5, None, None, 2)]
    [judged] = [v for v in task.second_opinion.judged_values(JudgedInputs([], values, task.params, {"regard": found}))  # type: ignore[union-attr]
                if v.metric == "negative_regard_share"]  # fmt: skip
    assert (judged.judge, judged.calibration_set, judged.kappa) == (found.judge, "regard", found.kappa.value)
    assert judged.note != UNCALIBRATED

    _stored_calibrations(tmp_path / "partial.duckdb", (FIRST, SECOND))  # THIRD never calibrated
    with duckdb.connect(str(tmp_path / "partial.duckdb")) as conn:
        assert majority_calibration(conn, (FIRST, SECOND, THIRD), "regard", REGARD_LABELS, task.params) is None
