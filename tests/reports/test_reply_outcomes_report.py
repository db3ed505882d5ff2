"""The model report sets refusal and unfinished-reasoning rates beside task values, reasoning beside replies."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from themis_dagster.reports import render_model_report
from themis_dagster.reports.data import MetricRow
from themis_dagster.reports.reply_outcomes import reply_outcomes, share_text
from themis_dagster.warehouse.schema import ensure_schema

MODEL = "thinker"
T0 = datetime(2026, 1, 1, 12, 0, 0)
SENTINEL = "PLANTEDREASONINGWORD"


def _metric(conn: duckdb.DuckDBPyConnection, task: str, subset: str | None, metric: str, value: float, n: int) -> None:
    for table in ("metric_values", "metric_history"):
        conn.execute(
            f"INSERT INTO {table} (model, task, subset, metric, value, ci_low, ci_high, n, materialized_at, run_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'r1')",
            [MODEL, task, subset, metric, value, value - 0.05, value + 0.05, n, T0],
        )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory):
    path: Path = tmp_path_factory.mktemp("reply_outcomes") / "w.duckdb"
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        # a generation task with refusals and withheld replies, per subset too
        _metric(conn, "bbq_generate", None, "accuracy", 0.61, 40)
        _metric(conn, "bbq_generate", None, "refused_rate", 0.125, 40)
        _metric(conn, "bbq_generate", None, "reasoning_unfinished_rate", 0.05, 40)
        _metric(conn, "bbq_generate", None, "truncated_rate", 0.025, 40)
        _metric(conn, "bbq_generate", "age", "accuracy", 0.7, 20)
        _metric(conn, "bbq_generate", "age", "refused_rate", 0.2, 20)
        _metric(conn, "bbq_generate", "gender", "accuracy", 0.5, 20)
        _metric(conn, "bbq_generate", "gender", "refused_rate", 0.05, 20)
        # a loglikelihood task: no reply read, no rate
        _metric(conn, "crows_pairs", None, "pct_stereotype", 0.58, 100)
        conn.execute(
            "INSERT INTO judgments (model, task, item_id, subset, outcome, score, parsed, detail) "
            "VALUES (?, 'bbq_generate', 'item-1', 'age', 'reasoning_unfinished', NULL, false, '{}')",
            [MODEL],
        )
        conn.execute(
            "INSERT INTO responses (model, task, request_id, item_id, request_type, text, error, reasoning) "
            "VALUES (?, 'bbq_generate', 'req-1', 'item-1', 'chat', NULL, 'reasoning_unfinished: withheld', ?)",
            [MODEL, f"Let me think about {SENTINEL} and the context"],
        )
    with duckdb.connect(str(path), read_only=True) as conn:
        return render_model_report(conn, MODEL, now=T0)


def _summary_row(html: str, task: str, metric: str) -> str:
    summary = html[html.index('<section id="summary">') : html.index('<section id="parent">')]
    match = re.search(rf"<tr><td>{task}<td>{metric}<.*?</tr>", summary, re.S)
    assert match, (task, metric)
    return match.group(0)


def test_rates_stand_beside_each_headline_value(report) -> None:
    row = _summary_row(report.html, "bbq_generate", "accuracy")
    assert '<td class="num refused">12.5% of 40</td>' in row
    assert '<td class="num unfinished">5.0% of 40 unfinished · 2.5% of 40 truncated</td>' in row
    # the rates are columns now, not rows of their own in the summary
    summary = report.html[report.html.index('<section id="summary">') : report.html.index('<section id="parent">')]
    assert "refused_rate" not in summary and "truncated_rate" not in summary


def test_task_without_replies_shows_no_rate(report) -> None:
    row = _summary_row(report.html, "crows_pairs", "pct_stereotype")
    assert "refused" not in row  # CrowS-Pairs' table has no such column: nothing refused or unfinished there


def test_refusal_rate_per_subset(report) -> None:
    html = report.html
    subsets = html[html.index('<section id="subsets">') : html.index('<section id="models">')]
    assert "<th>Refused</th>" in subsets
    assert re.search(r"<td>age<td>[^<]+<td>[^<]+<td>[^<]+<td>[^<]+<td>20\.0% of 20(?:<tr|\s)", subsets)
    assert re.search(r"<td>gender<td>[^<]+<td>[^<]+<td>[^<]+<td>[^<]+<td>5\.0% of 20(?:<tr|\s)", subsets)


def test_reasoning_beside_the_example_reply(report) -> None:
    failures = report.html[report.html.index('<section id="parse-failures">') :]
    assert "<th>Reasoning</th>" in failures
    assert SENTINEL in failures
    assert "reasoning_unfinished: withheld" in failures  # the reply's place says why it was not read


def test_markdown_summary_counts_refusals(report) -> None:
    assert (
        "Refused and unfinished replies: bbq_generate refused 12.5% of 40, "
        "reasoning 5.0% of 40 unfinished · 2.5% of 40 truncated." in report.markdown.splitlines()
    )


def test_share_text_and_grouping() -> None:
    rows = [
        MetricRow(None, "refused_rate", 0.25, None, None, 8, model=MODEL, task="t"),
        MetricRow("a", "refused_rate", 0.5, None, None, 4, model=MODEL, task="t"),
        MetricRow(None, "score", 0.9, None, None, 8, model=MODEL, task="t"),
    ]
    found = reply_outcomes(rows)
    assert set(found) == {("t", None), ("t", "a")}
    assert found["t", None].refused_text == "25.0% of 8"
    assert found["t", "a"].unfinished_text == "—"  # no guard rates recorded: the model does not reason
    assert share_text(None) == "—"
