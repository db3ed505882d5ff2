"""The explorer's pages a researcher checks a number with (AppTest, on the warehouse of tests/explorer_warehouse.py).

A judged value carries its judge and gets no verdict when its judge failed calibration; the Judges
page shows the calibration behind it and the Refusals page the refused replies; the drill-down
lists the items a value counts and opens one with its answers marked; Compare runs ``themis
compare``'s code without writing; the playground asks again beside the stored reply and as
different people; every count of "biased" is the same on every page; a bad URL says what is wrong.
"""

from __future__ import annotations

import io
import re

import pytest

from tests.conftest import requires_mirror
from tests.explorer.apptest import app, frame, problems, texts
from tests.explorer_warehouse import CHILD, PARENT, Built
from themis_dagster.cli.common import print_leaderboard
from themis_dagster.explorer import data
from themis_dagster.explorer.counted import counted_items
from themis_dagster.explorer.engine_slot import shared_slot
from themis_dagster.reports import render_model_report
from themis_dagster.warehouse.read.verdicts import bias_counts

pytestmark = requires_mirror
FAILED = "judge failed calibration"


def test_a_judged_value_carries_its_judge_and_no_verdict_when_the_judge_failed(built: Built) -> None:
    with data.read_only(built.warehouse) as conn:
        board = data.leaderboard(conn)
    bold = board[(board["task"] == "bold") & (board["model"] == CHILD)].set_index("metric")
    share = bold.loc["positive_regard_share"]
    assert share["verdict"] == FAILED and share["apart"] == f"ranked apart: {FAILED}" and share["tone"] == "none"
    assert share["judge"] == f"judge {PARENT} · kappa 0.000 (0.000 – 0.000) on regard, 301 readable answers"
    assert str(share["corrected"]).startswith("no corrected value: ")
    assert bold.loc["toxicity_rate", "verdict"] == "uncalibrated judge"  # no calibration set for toxicity
    assert bold.loc["negative_disparity", "judge"] is None  # VADER's, not a judge's: a verdict as any value
    at = app("leaderboard.py", task="bold")
    shown = frame(at, "metric", "verdict", "judge")
    assert set(shown[shown["metric"] == "positive_regard_share"]["rank"]) == {f"apart: {FAILED}"}
    assert "ranked apart (their judge gives no verdict)" in texts(at)


def test_the_biased_count_is_the_same_on_the_model_page_the_report_and_the_cli(built: Built) -> None:
    printed = io.StringIO()
    print_leaderboard(built.warehouse, printed)
    cli = dict(re.findall(r"^biased: (\S+) (\d+ of \d+) bias metrics", printed.getvalue(), re.M))
    assert "judged values" in printed.getvalue() and FAILED in printed.getvalue()
    with data.read_only(built.warehouse) as conn:
        counts = bias_counts(conn)
        reports = {model: render_model_report(conn, model).html for model in (PARENT, CHILD)}
        board = data.leaderboard(conn)
    for model in (PARENT, CHILD):
        at = app("model.py", model=model)
        card = next(m.value for m in at.metric if m.label == "Biased")
        html = re.search(r'<div class="k">Biased</div><div class="v [a-z]*">(\d+ of \d+)</div>', reports[model])
        mine = board[board["model"] == model]
        assert html is not None
        assert (card, html.group(1), cli[model]) == (counts[model].text,) * 3, model
        assert int(mine["verdict"].str.startswith("biased").sum()) == counts[model].biased


def test_the_leaderboard_side_by_side_hides_twins_and_draws(built: Built) -> None:
    at = app("leaderboard.py")
    assert not problems(at) and not frame(at, "metric", "verdict")["metric"].str.endswith("_answered").any()
    at.toggle(key="answered").set_value(True).run()
    assert frame(at, "metric", "verdict")["metric"].str.endswith("_answered").any()
    at.multiselect(key="models").select(PARENT).select(CHILD).run()
    wide = frame(at, "task", "metric", "ideal")
    assert {f"{PARENT} · bfloat16", f"{CHILD} · bfloat16"} <= set(wide.columns)  # the dtype beside each model
    row = wide[(wide["task"] == "crows_pairs") & (wide["metric"] == "pct_stereotype")].iloc[0]
    assert re.fullmatch(r"[✓✗] \d+\.\d% \(\d+\.\d% – \d+\.\d%\)", row[f"{CHILD} · bfloat16"])  # a rate in percent
    at = app("leaderboard.py", family="BBQ")
    assert not problems(at) and at.get("vega_lite_chart"), "the family's values against their ideals"


def test_the_drilldown_lists_the_items_a_value_counts_with_their_answers_marked(built: Built) -> None:
    with data.read_only(built.warehouse) as conn:
        counted = counted_items(conn, CHILD, "bbq", "accuracy_ambig", data.Slice())
        n, value = conn.execute(
            "SELECT n, value FROM metrics WHERE model = ? AND task = 'bbq' AND metric = 'accuracy_ambig' "
            "AND subset IS NULL",
            [CHILD],
        ).fetchone() or (0, 0.0)
        every = data.drilldown_total(conn, CHILD, "bbq", data.Slice())
    assert counted is not None and len(counted.counted) == n < every  # ambiguous questions only, not all
    assert counted.numerator is not None and len(counted.numerator) == round(value * n)
    at = app("drilldown.py", model=CHILD, task="bbq", metric="accuracy_ambig")
    assert not problems(at) and f"The value counts {n:,} of the slice's {every:,} judgments" in texts(at)
    assert len(frame(at, "item", "outcome", "reply")) == n
    at = app("drilldown.py", model=CHILD, task="bbq", metric="accuracy_ambig", show="numerator")
    assert len(frame(at, "item", "outcome", "reply")) == len(counted.numerator)
    item = counted.counted[0]
    at = app("drilldown.py", model=CHILD, task="bbq", metric="accuracy_ambig", item=item)
    options = frame(at, "option", "answer", "logprob", "chosen", "correct", "stereotyped")
    assert len(options) == 3 and all((options[c] == "✓").sum() == 1 for c in ("chosen", "correct", "stereotyped"))
    assert "context (shared by every option):" in texts(at)  # once, not once per answer
    assert any(link.value == "Ask again in the playground" for link in at.get("page_link"))


def test_a_judged_items_drilldown_shows_the_judges_prompt_reply_and_verdict(built: Built) -> None:
    at = app("drilldown.py", model=PARENT, task="bold", metric="positive_regard_share")
    assert not problems(at) and "the items whose regard the judge model answered readably" in texts(at)
    assert FAILED in texts(at) and f"judge {PARENT} · kappa 0.000" in texts(at)
    item = str(frame(at, "item", "outcome", "reply")["item"].iloc[0])
    at = app("drilldown.py", model=PARENT, task="bold", metric="positive_regard_share", item=item)
    shown = texts(at)
    assert f"Judge {PARENT}** on **regard**: verdict **positive** (judged)" in shown
    assert "How does the text regard the person or group it is about?" in shown  # the judge's prompt as sent
    assert "Positive." in shown  # the judge's reply


def test_the_judges_page_shows_each_calibration_and_what_its_judge_counted(built: Built) -> None:
    at = app("judges.py")
    assert not problems(at)
    overview = frame(at, "judge", "calibration set", "kappa (95% CI)")
    assert list(overview["standing"]) == ["failed: no better than chance (kappa CI reaches 0)"]
    assert list(overview["readable answers"]) == ["301 of 301"]
    confusion = frame(at, "human label", "judge: positive", "unreadable")
    assert set(confusion["human label"]) == {"negative", "neutral", "positive"}
    assert sum(int(v) for v in confusion["judge: positive"]) == 301  # it called every text positive
    per_class = frame(at, "class", "sensitivity (95% CI)", "specificity (95% CI)").set_index("class")
    assert per_class.loc["positive", "sensitivity (95% CI)"].startswith("100.0%")
    wrong = frame(at, "human", "judge", "text")
    assert set(wrong["judge"]) == {"positive"} and set(wrong["human"]) <= {"negative", "neutral"}
    counted = frame(at, "judge", "model", "metric", "verdict")
    assert set(counted[counted["metric"] == "toxicity_rate"]["verdict"]) == {"uncalibrated judge"}
    assert set(counted[counted["metric"] == "positive_regard_share"]["verdict"]) == {FAILED}
    assert problems(app("judges.py", judge=PARENT, set="nope"))[0].startswith("unknown calibration: judge")


def test_the_refusals_page_shows_each_refused_reply_with_what_marked_it(built: Built) -> None:
    at = app("refusals.py", model=CHILD)
    assert not problems(at)
    replies = frame(at, "task", "item", "phrase", "detector", "reply")
    assert set(replies["task"]) == {"bold"} and set(replies["reply"]) == {"I cannot continue that sentence."}
    assert set(replies["phrase"]) == {"i cannot"} and replies["detector"].str.startswith("phrase list · ").all()
    assert replies["items"].str.startswith(f"drilldown?model={CHILD}&task=bold&item=").all()
    assert "No reply of smol-step-100 was marked refused." in texts(app("refusals.py", model=PARENT))
    assert problems(app("refusals.py", model=CHILD, task="crows_pairs"))[0].startswith("unknown task 'crows_pairs'")


def test_compare_runs_themis_compares_code_without_writing_and_never_pairs_a_model_with_itself(built: Built) -> None:
    at = app("compare.py")
    assert not problems(at) and at.selectbox(key="model").value == CHILD  # a checkpoint with its parent by default
    assert at.selectbox(key="baseline").value == PARENT and CHILD not in at.selectbox(key="baseline").options
    at.button(key="compare-go").click().run()
    assert not problems(at) and "Computed here, as `themis compare` computes (nothing stored)." in texts(at)
    computed = frame(at, "p (Holm)", "verdict", "difference")
    assert "within gate" in set(computed["verdict"]) and at.get("vega_lite_chart")
    assert problems(app("compare.py", model=CHILD, baseline=CHILD)) == [
        f"{CHILD} cannot be compared with itself: choose another baseline."
    ]


def test_the_playground_asks_again_beside_the_stored_reply_and_as_different_people(built: Built) -> None:
    shared_slot().release()
    at = app("playground.py", model=PARENT, task="gb_direct", request="sbic:0001:0:0")
    at.selectbox(key="keep-warm").select("30 minutes").run()
    at.button(key="FormSubmitter:chat-form-Send").click().run()
    assert not problems(at)
    shown = texts(at)
    assert "the new reply is the same as the stored one" in shown and "stored reply:" in shown
    assert "Warm engine: **smol-step-100** · loaded in" in shown and "kept warm 30 min idle" in shown
    assert shared_slot().keep_warm_s() == 1800.0
    at.toggle(key="ask-as-on").set_value(True).run()
    at.text_input(key="ask-as").input("Emily, Jamal").run()
    at.text_area(key=f"chat-{PARENT}-draft").input("Can you recommend a career?")
    at.button(key="FormSubmitter:chat-form-Send").click().run()
    shown = texts(at)
    assert "The same message as 2 people" in shown and "My name is Emily. Can you recommend a career?" in shown
    assert "My name is Jamal. Can you recommend a career?" in shown
    with data.read_only(built.warehouse) as conn:
        [(request,)] = conn.execute(
            "SELECT min(request_id) FROM prompts WHERE model = ? AND task = 'crows_pairs'", [PARENT]
        ).fetchall()
    at = app("playground.py", model=PARENT, task="crows_pairs", request=request)
    assert len(at.text_area(key="score-completions").value.splitlines()) == 2  # both sentences of the pair
    at.button(key="score-go").click().run()
    scores = frame(at, "variant", "loglikelihood", "stored loglikelihood")
    plain = scores[scores["variant"] == "plain"]
    assert list(plain["loglikelihood"]) == pytest.approx(list(plain["stored loglikelihood"]))  # reproduced
    assert "Asked again**: 2 of 2 options score as stored" in texts(at)  # and said so
    shared_slot().idle_s = None


@pytest.mark.parametrize(
    ("page", "params", "said"),
    [
        ("drilldown.py", {"model": CHILD, "task": "bbq", "metric": "accuracy_ambig", "show": "all-of-it"},
         "unknown show 'all-of-it'"),
        ("drilldown.py", {"model": CHILD, "task": "bbq", "page": "two"}, "unknown page 'two'"),
        ("drilldown.py", {"model": CHILD, "task": "bbq", "size": "many"}, "unknown size 'many'"),
        ("drilldown.py", {"model": CHILD, "task": "bbq", "item": "nope"}, "unknown item 'nope'"),
        ("drilldown.py", {"model": CHILD, "task": "bbq", "parsed": "maybe"}, "unknown parsed filter 'maybe'"),
        ("leaderboard.py", {"family": "Astrology"}, "unknown family 'Astrology'"),
        ("model.py", {"model": "../etc"}, "invalid model id"),
        ("compare.py", {"model": CHILD, "baseline": "ghost"}, "unknown model 'ghost'"),
        ("playground.py", {"model": CHILD, "task": "gb_direct"}, "an ask-again link names both"),
        ("refusals.py", {"model": "Not An Id"}, "invalid model id"),
    ],
)  # fmt: skip
def test_a_bad_url_says_what_is_wrong_never_a_traceback(
    built: Built, page: str, params: dict[str, str], said: str
) -> None:
    at = app(page, **params)
    assert not at.exception and at.error and said in at.error[0].value
