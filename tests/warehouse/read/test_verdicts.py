"""The verdict "biased", defined once: a bias metric whose CI excludes its ideal; and one count everywhere.

The explorer's Model page, the HTML report, the leaderboard page and ``themis leaderboard`` give the
same count of biased values for each model of the synthetic warehouse (``synthetic.py``).
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import duckdb

from tests.warehouse.read.synthetic import MODELS, A, B
from themis_dagster.cli.common import print_leaderboard
from themis_dagster.evaluation.judging.reply_guard import REASONING_UNFINISHED, TRUNCATED
from themis_dagster.explorer import data
from themis_dagster.explorer.model import summary_tables
from themis_dagster.refusals.outcome import REFUSED_RATE
from themis_dagster.reports import render_model_report
from themis_dagster.reports.leaderboard_page import RegisteredModel, render_leaderboard
from themis_dagster.warehouse.read.verdicts import REPLY_SHARES, BiasCount, bias_counts, is_bias_measure, verdict

# m-a's HONEST value is judged by an uncalibrated judge: no verdict, so not among the tested (docs/judges.md)
EXPECTED = {A: BiasCount(3, 4), B: BiasCount(1, 3), "fam-step-100": BiasCount(1, 1), "fam-step-200": BiasCount(0, 1)}


def test_the_verdict() -> None:
    assert verdict("s_dis", 0.1, 0.05, 0.15, 0.0) == verdict("s_dis", 0.1, 0.05, 0.15, 0.0, False)
    assert verdict("s_dis", 0.1, 0.05, 0.15, 0.0).text == "biased: above ideal"
    assert verdict("s_dis", -0.1, -0.15, -0.05, 0.0).biased and verdict("s_dis", 0.0, -0.1, 0.1, 0.0).tested
    assert verdict("accuracy", 0.8, 0.7, 0.9, 1.0, True).text == "below ideal (not a bias measure)"
    assert not verdict("accuracy", 0.8, 0.7, 0.9, 1.0, True).tested
    assert verdict("unparsed_rate", 0.1, 0.05, 0.15, 0.0, False).text == "above ideal (not a bias measure)"
    assert verdict("accuracy", 1.0, 0.9, 1.0, 1.0, True).text == "consistent with ideal"
    assert verdict("m", 0.1, 0.0, 0.2, None).text == "no ideal declared"
    assert not verdict("m", 0.1, 0.0, 0.2, None).tested
    assert verdict("m", None, None, None, 0.0).text == "no value" and verdict("m", 1.0, None, None, 0.0).text == "no CI"
    assert {REFUSED_RATE, f"{REASONING_UNFINISHED}_rate", f"{TRUNCATED}_rate"} <= REPLY_SHARES
    assert is_bias_measure("stereotype_rate", False) and not is_bias_measure("accuracy", True)


def test_the_counts(conn: duckdb.DuckDBPyConnection) -> None:
    assert bias_counts(conn) == EXPECTED


def test_explorer_report_leaderboard_page_and_cli_give_the_same_count(synthetic: Path) -> None:
    printed = io.StringIO()
    print_leaderboard(synthetic, printed)
    cli = dict(re.findall(r"^biased: (\S+) (\d+ of \d+) bias metrics", printed.getvalue(), re.M))
    with data.read_only(synthetic) as conn:
        _same_counts(conn, cli)


def _same_counts(conn: duckdb.DuckDBPyConnection, cli: dict[str, str]) -> None:
    board = render_leaderboard(conn, [RegisteredModel(model) for model in MODELS]).html
    for model, expected in EXPECTED.items():
        report = data.model_report(conn, model)
        explorer = data.bias_of(report)
        families = sum(biased for _, biased, *_ in summary_tables(report))  # the Model page's per-family counts
        html = render_model_report(conn, model).html
        card = re.search(r'<div class="k">Biased</div><div class="v [a-z]*">(\d+ of \d+)</div>', html)
        row = re.search(rf'>{re.escape(model)}</a>.*?<td class="num[^"]*">(\d+ of \d+)</td>', board, re.S)
        assert card is not None and row is not None
        assert (explorer.text, families, card.group(1), row.group(1), cli[model]) == (
            expected.text, expected.biased, expected.text, expected.text, expected.text
        ), model  # fmt: skip
