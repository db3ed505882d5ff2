"""Refusals decided by a judge model (a task's ``refusal_judge_model``), its refused_rate corrected on XSTest.

The unit tests work the verdicts and the Rogan-Gladen correction by hand; the graph test sends
bbq_generate's replies through the fake engine, the same fake model answering XSTest's classifier
question as the refusal judge, first uncalibrated, then with a stored calibration of known
sensitivity (0.8) and specificity (0.9).
"""

from __future__ import annotations

import itertools
import re
from datetime import datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest
from dagster import DagsterInstance, materialize

from tests.conftest import make_resources, requires_mirror, write_overrides
from themis_dagster.assets import evaluation_assets
from themis_dagster.engines.base import Engine
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.errors import ConfigError
from themis_dagster.explorer.data import refusals
from themis_dagster.judging.calibration_sets import XSTEST_LABELS
from themis_dagster.judging.correction import UNCALIBRATED, JudgeCalibration
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.refusals.judge import RefusalJudge
from themis_dagster.refusals.judged import judge_refusals, refusal_judged_values, refusal_requests
from themis_dagster.registry.models import DEFAULT_MODEL_ID, ModelSpec
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.reports.data import load_report_data
from themis_dagster.reports.model_report import summary_markdown
from themis_dagster.resources import FakeEngineResource
from themis_dagster.stats import Estimate
from themis_dagster.tasks.loader import check_registered_models, load_task
from themis_dagster.tasks.spec import TaskParams
from themis_dagster.warehouse.schema import ensure_schema

JUDGE = DEFAULT_MODEL_ID
PARAMS = TaskParams(bootstrap_resamples=200)
REFUSAL = "I'm sorry, but I can't help with that request."
# XSTest labels of 20 calibration replies: 10 refusals (5 full, 5 partial), 10 compliances. The judge
# finds 8 of the refusals (Se = 0.8) and calls 1 compliance a partial refusal (Sp = 0.9).
CALIBRATION = (
    [("full_refusal", "full_refusal")] * 4 + [("full_refusal", "full_compliance")]
    + [("partial_refusal", "partial_refusal")] * 3 + [("partial_refusal", "full_refusal")]
    + [("partial_refusal", "full_compliance")]
    + [("full_compliance", "full_compliance")] * 9 + [("full_compliance", "partial_refusal")]
)  # fmt: skip


def _calibration() -> JudgeCalibration:
    human, judged = zip(*CALIBRATION, strict=True)
    return JudgeCalibration(JUDGE, "xstest", XSTEST_LABELS, human, judged, Estimate(0.7, 0.4, 0.9, 20))


def test_the_judges_labels_decide_refused() -> None:
    """A judgment per item reads every reply of its item, one per request its own; none readable: NULL."""
    judgments = pl.DataFrame(
        {"item_id": ["a", "b", "c", "d", "e:0"], "subset": ["x", "x", "y", "y", "y"],
         "refused": [False, True, False, None, False]},
        schema_overrides={"refused": pl.Boolean},
    )  # fmt: skip
    responses = pl.DataFrame({"request_id": ["a:0", "a:1", "b:0", "c:0", "e:0"], "item_id": ["a", "a", "b", "c", "e"]})
    labels = {"a:0": "full_compliance", "a:1": "partial_refusal", "b:0": "full_compliance", "c:0": None,
              "e:0": "full_refusal"}  # fmt: skip
    verdicts = judge_refusals(judgments, responses, labels).get_column("refused").to_list()
    # a: one of two replies partly refuses; b: the detector's refusal overruled; c: unreadable;
    # d: no reply read; e:0: a judgment per request
    assert verdicts == [True, False, None, None, True]


def test_refused_rate_corrected_by_rogan_gladen_by_hand() -> None:
    """p = (p_obs + Sp - 1) / (Se + Sp - 1) with Se 0.8, Sp 0.9; clipped to 1 above Se."""
    judgments = pl.DataFrame(
        {"item_id": list("abcde"), "subset": ["x", "x", "y", "y", "y"], "refused": [True, False, True, True, None]},
        schema_overrides={"refused": pl.Boolean},
    )
    values = {v.subset: v for v in refusal_judged_values(judgments, JUDGE, _calibration(), PARAMS)}
    overall, x, y = values[None], values["x"], values["y"]
    assert (overall.metric, overall.judge, overall.calibration_set, overall.kappa) == ("refused_rate", JUDGE,
                                                                                       "xstest", 0.7)  # fmt: skip
    assert overall.value == 0.75 and overall.corrected == pytest.approx((0.75 + 0.9 - 1) / 0.7)  # 0.92857
    assert x.value == 0.5 and x.corrected == pytest.approx(0.4 / 0.7)  # 0.57143
    assert y.value == 1.0 and y.corrected == 1.0  # (1 + 0.9 - 1) / 0.7 = 1.29, clipped
    for value in values.values():
        assert value.corrected_ci_low <= value.corrected <= value.corrected_ci_high
        assert value.n_calibration == 20 and value.note is None
    uncalibrated = refusal_judged_values(judgments, JUDGE, None, PARAMS)
    assert {(v.note, v.corrected) for v in uncalibrated} == {(UNCALIBRATED, None)}


def test_a_refusal_judge_no_better_than_chance_gets_no_corrected_rate() -> None:
    coin = JudgeCalibration(JUDGE, "xstest", XSTEST_LABELS, ("full_refusal", "full_compliance") * 10,
                            ("full_compliance", "full_refusal") * 10)  # fmt: skip
    judgments = pl.DataFrame({"item_id": ["a"], "subset": ["x"], "refused": [True]})
    [overall, _] = refusal_judged_values(judgments, JUDGE, coin, PARAMS)
    assert overall.corrected is None and "no better than chance" in (overall.note or "")


def test_the_judge_is_asked_about_each_reply_with_its_prompt() -> None:
    prompts = pl.DataFrame({"request_id": ["a:0", "b:0"], "prompt": ["Who was late?", None],
                            "messages": [None, '[{"role": "user", "content": "Who won?"}]']})  # fmt: skip
    responses = pl.DataFrame(
        {"request_id": ["a:0", "b:0"], "item_id": ["a", "b"], "request_type": ["chat", "chat"],
         "text": ["(a) The man.", None], "error": [None, "engine failed"]}
    )  # fmt: skip
    [ask] = refusal_requests(prompts, responses, RefusalJudge())
    content = (ask.messages or [])[0]["content"]
    assert ask.request_id == "a:0:refusal" and ask.template == "refusal_judge"
    assert 'QUESTION: "Who was late?"' in content and content.endswith('RESPONSE: "(a) The man."\n\nCLASS:')
    assert ask.gen_params is not None and ask.gen_params["max_tokens"] == 12


def test_an_unregistered_refusal_judge_fails_naming_the_field() -> None:
    task = load_task("bbq_generate", {"refusal_judge_model": "nobody"})
    with pytest.raises(ConfigError, match="refusal_judge_model: model 'nobody' is not registered"):
        check_registered_models("bbq_generate", task.params, [JUDGE])
    assert load_task("bbq_generate", {}).params.refusal_judge_model is None  # the detector is the default


# -- through the graph ----------------------------------------------------------------------------

_RESPONSE = re.compile(r'RESPONSE: "(.*)"\n\nCLASS:', re.DOTALL)
ANSWERS = (REFUSAL, "(a) The first one.", "(b) The second one, though I would rather not say.")


def judge_class(reply: str) -> str:
    """The fake refusal judge: the refusal a full refusal, (b) a partial refusal, anything else compliance."""
    if reply == REFUSAL:
        return "2_full_refusal"
    return "3_partial_refusal" if reply.startswith("(b)") else "1_full_compliance"


class ModelAndJudgeResource(FakeEngineResource):
    """The fake engine: the evaluated model cycles through ``ANSWERS``; asked XSTest's question, ``judge_class``."""

    def _build(self, spec: ModelSpec, weights: ResolvedWeights) -> Engine:
        turn = itertools.count()

        def reply(prompt: str) -> str:
            if (found := _RESPONSE.search(prompt)) is not None:
                return judge_class(found.group(1))
            return ANSWERS[next(turn) % len(ANSWERS)]

        return FakeEngine(weights.path, reply=reply)


def _store_calibration(warehouse: Path) -> None:
    now = datetime(2026, 1, 1)
    with duckdb.connect(str(warehouse)) as conn:
        ensure_schema(conn)
        for number, (human, said) in enumerate(CALIBRATION):
            conn.execute(
                "INSERT INTO judge_calibration_labels (judge, calibration_set, item_id, text, human_label, "
                "judge_label, run_id, materialized_at) VALUES (?, 'xstest', ?, ?, ?, ?, 'r', ?)",
                [JUDGE, f"row{number:02d}", f"reply {number}", human, said, now],
            )
        conn.execute(
            "INSERT INTO judge_calibration_metrics (judge, calibration_set, metric, value, ci_low, ci_high, n, "
            "run_id, materialized_at) VALUES (?, 'xstest', 'kappa', 0.7, 0.4, 0.9, 20, 'r', ?)",
            [JUDGE, now],
        )


@requires_mirror
def test_bbq_generate_with_a_refusal_judge_on_the_fake_engine(tmp_path: Path, instance: DagsterInstance) -> None:
    """The judge, not the phrase list, decides refused; refused_rate judged, then corrected once calibrated."""
    warehouse = tmp_path / "w.duckdb"
    sizes = {"bbq_generate": {"limit": 3, "refusal_judge_model": JUDGE, "bootstrap_resamples": 200}}
    resources = make_resources(warehouse, write_overrides(tmp_path / "o.yaml", sizes)) | {
        "engine": ModelAndJudgeResource()
    }
    instance.add_dynamic_partitions(MODELS_PARTITION, [JUDGE])

    def evaluate() -> tuple[list[str], dict[str, float], tuple]:
        result = materialize(
            evaluation_assets, partition_key=evaluation_key(JUDGE, "bbq_generate"), resources=resources,
            instance=instance,
        )  # fmt: skip
        assert result.success
        event = result.asset_materializations_for_node("judgments")[0]
        assert event.metadata["refusal_judge_questions"].value == 21  # 3 items of each of 7 categories
        with duckdb.connect(str(warehouse), read_only=True) as conn:
            replies = [r for (r,) in conn.execute("SELECT text FROM responses ORDER BY request_id").fetchall()]
            refused = conn.execute("SELECT count(*) FILTER (refused), count(*) FROM judgments").fetchone()
            rate = conn.execute(
                "SELECT value FROM metric_values WHERE metric = 'refused_rate' AND subset IS NULL"
            ).fetchone()
            judged = conn.execute(
                "SELECT judge, calibration_set, kappa, value, corrected, corrected_ci_low, corrected_ci_high, note "
                "FROM judged_metrics WHERE metric = 'refused_rate' AND subset IS NULL"
            ).fetchone()
        assert refused is not None and rate is not None and judged is not None
        return replies, {"refused": refused[0], "n": refused[1], "rate": rate[0]}, judged

    replies, counts, judged = evaluate()
    assert sorted(replies) == sorted(ANSWERS * 7)  # 7 refusals, 7 (a), 7 (b)
    # the phrase list would count 7 of 21; the judge counts the refusals and the (b) partial refusals
    assert counts == {"refused": 14, "n": 21, "rate": pytest.approx(14 / 21)}
    assert judged == (JUDGE, None, None, pytest.approx(14 / 21), None, None, None, UNCALIBRATED)

    _store_calibration(warehouse)
    _, counts, judged = evaluate()  # re-run: the judged rows replaced, the answers all from the cache
    judge, calibration_set, kappa, value, corrected, low, high, note = judged
    assert (judge, calibration_set, kappa, note) == (JUDGE, "xstest", 0.7, None)
    assert value == pytest.approx(2 / 3) and corrected == pytest.approx((2 / 3 + 0.9 - 1) / 0.7)  # 0.80952
    assert low <= corrected <= high
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM judged_metrics WHERE subset IS NULL").fetchone() == (1,)
        report = load_report_data(conn, JUDGE)
        shown = refusals(conn, JUDGE).set_index(["task", "metric"])
    # the explorer's Refusals table: the judge and the corrected value beside the judged rate
    assert shown.loc[("bbq_generate", "refused_rate"), "corrected"].startswith("corrected 0.810 (")
    assert shown.loc[("bbq_generate", "refused_rate"), "judge"].startswith(f"judge {JUDGE} · kappa 0.700")
    # the model report's refused share carries the judge's correction and kappa beside it
    summary = summary_markdown(report)
    assert "bbq_generate refused 66.7% of 21 · corrected 0.810 (" in summary
    assert f"judge {JUDGE} · kappa 0.700 (0.400 – 0.900) on xstest, 20 readable answers" in summary


def test_themis_run_calibrates_a_tasks_refusal_judge_on_xstest(tmp_path: Path) -> None:
    from themis_dagster.cli.common import judge_calibrations
    from themis_dagster.settings import Settings

    overrides = {"bbq_generate": {"refusal_judge_model": JUDGE}, "iat": {"refusal_judge_model": JUDGE}}
    settings = Settings(task_overrides_file=write_overrides(tmp_path / "o.yaml", overrides))
    assert judge_calibrations(settings, ["bbq_generate", "iat", "crows_pairs"]) == [(JUDGE, "xstest")]
    plain = Settings(task_overrides_file=write_overrides(tmp_path / "p.yaml", {"bbq_generate": {"limit": 3}}))
    assert judge_calibrations(plain, ["bbq_generate"]) == []


def test_themis_leaderboard_prints_a_ranked_judged_value_beside_its_corrected_one(tmp_path: Path) -> None:
    import io

    from themis_dagster.cli.common import print_leaderboard

    warehouse, now = tmp_path / "w.duckdb", datetime(2026, 1, 1)
    with duckdb.connect(str(warehouse)) as conn:
        ensure_schema(conn)
        for task, metric, value in (("t", "refused_rate", 0.6), ("t", "accuracy", 0.9)):
            conn.execute(
                "INSERT INTO leaderboard (task, metric, rank, model, value, n, ideal, materialized_at) "
                "VALUES (?, ?, 1, 'm', ?, 10, 0.0, ?)",
                [task, metric, value, now],
            )
    plain = io.StringIO()
    print_leaderboard(warehouse, plain)
    assert "corrected" not in plain.getvalue() and "refused_rate" in plain.getvalue()  # nothing judged: as before
    with duckdb.connect(str(warehouse)) as conn:
        conn.execute(
            "INSERT INTO judged_metrics (model, task, subset, metric, judge, calibration_set, kappa, value, "
            "corrected, corrected_ci_low, corrected_ci_high, n_calibration, run_id, materialized_at) "
            "VALUES ('m', 't', NULL, 'refused_rate', 'j', 'xstest', 0.7, 0.6, 0.71428, 0.5, 0.9, 20, 'r', ?)",
            [now],
        )
    out = io.StringIO()
    print_leaderboard(warehouse, out)
    table, judged = out.getvalue().split("\n\n", 1)  # the ranked table, then the judged values with their verdict
    lines = {line.split()[1]: line.split() for line in table.splitlines()[1:]}
    assert "corrected" in table.splitlines()[0] and "judge passed calibration" in judged
    assert lines["refused_rate"][9:13] == ["j", "0.7143", "0.5", "0.9"]
    assert lines["accuracy"][9] in ("None", "NaN")  # not judged: no judge, no correction
