"""The model report draws the figures a family declares: shares per persona beside the reference, ranked subsets."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from themis_dagster.reports import render_model_report
from themis_dagster.reports.data import MetricRow
from themis_dagster.reports.figures import capped_panels, ranked_rows, share_bars, share_groups
from themis_dagster.tasks.figures import RankedFigure, SharesFigure
from themis_dagster.warehouse.schema import ensure_schema

MODEL = "m"
SHARES = SharesFigure(kind="shares", title="t", metric="option_share", beside="reference_share")
GROUPS = RankedFigure(kind="ranked", title="t", metric="representativeness", subsets="[A-Z]+=.+")
# (task, subset, metric, value)
VALUES = [
    ("persona_poll", "state=Alabama|Democratic", "option_share", 0.5),
    ("persona_poll", "state=Alabama|Republican", "option_share", 0.5),
    ("persona_poll", "state=Alabama|Democratic", "reference_share", 0.37),
    ("persona_poll", "state=Alabama|Republican", "reference_share", 0.63),
    ("persona_poll", "state=Alaska|Democratic", "option_share", 0.45),
    ("persona_poll", "state=Alaska|Republican", "option_share", 0.55),
    ("persona_poll", "state=Alaska|Democratic", "reference_share", 0.45),
    ("persona_poll", "state=Alaska|Republican", "reference_share", 0.55),
    ("persona_poll", "gender=female|Democratic", "option_share", 0.6),
    ("persona_poll", "gender=female|Republican", "option_share", 0.4),
    ("persona_poll", "state", "persona_spread", 0.05),
    ("opinions_qa", "POLPARTY=Democrat", "representativeness", 0.8),
    ("opinions_qa", "POLPARTY=Republican", "representativeness", 0.9),
    ("opinions_qa", "topic=guns", "representativeness", 0.7),
]


def rows(task: str) -> list[MetricRow]:
    return [MetricRow(s, m, v, v - 0.1, v + 0.1, 10, MODEL, t) for t, s, m, v in VALUES if t == task]


def test_shares_split_into_sets_panels_and_categories() -> None:
    bars = share_bars(rows("persona_poll"), SHARES)
    assert share_groups(bars) == ["state", "gender"]
    assert [(b.member, b.category, b.source, b.value) for b in bars if b.member == "Alabama"] == [
        ("Alabama", "Democratic", "option_share", 0.5),
        ("Alabama", "Republican", "option_share", 0.5),
        ("Alabama", "Democratic", "reference_share", 0.37),
        ("Alabama", "Republican", "reference_share", 0.63),
    ]
    # Alabama is 0.13 from its reference (total variation), Alaska 0: with room for one, Alabama stays
    state = [b for b in bars if b.group == "state"]
    assert capped_panels(state, 1) == (["state=Alabama"], 1) and capped_panels(state, 5) == (
        ["state=Alabama", "state=Alaska"],
        0,
    )


def test_ranked_rows_are_the_matching_subsets_largest_first() -> None:
    assert [r.subset for r in ranked_rows(rows("opinions_qa"), GROUPS)] == ["POLPARTY=Republican", "POLPARTY=Democrat"]


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        for task, subset, metric, value in [*VALUES, ("persona_poll", None, "reference_distance", 0.1),
                                            ("opinions_qa", None, "representativeness", 0.85)]:  # fmt: skip
            for table in ("metric_values", "metric_history"):
                conn.execute(
                    f"INSERT INTO {table} (model, task, subset, metric, value, ci_low, ci_high, n, materialized_at, "
                    "run_id) VALUES (?, ?, ?, ?, ?, ?, ?, 10, TIMESTAMP '2026-01-01 12:00:00', 'r')",
                    [MODEL, task, subset, metric, value, value - 0.1, value + 0.1],
                )
    return path


def test_the_report_shows_each_declared_figure_that_has_values(warehouse: Path) -> None:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        html = render_model_report(conn, MODEL).html
    section = html[html.index('<section id="figures">') : html.index('<section id="subsets">')]
    titles = re.findall(r"<h3>([^<]+)</h3>", section)
    assert titles == [
        "opinions_qa · Representativeness per group, sorted (1 - W1 / (N - 1) over the default context&#39;s "
        "questions)",
        "opinions_qa · Representativeness per topic (the whole population)",
        "persona_poll · The answer distribution per persona, beside the reference&#39;s: gender",  # sets by name
        "persona_poll · The answer distribution per persona, beside the reference&#39;s: state",
        "persona_poll · Spread between the personas of each set",
    ]  # steerability has no value here: no figure
    assert len(re.findall(r'src="data:image/png;base64,iVBORw0KGgo', section)) == len(titles)


def test_a_report_without_declared_figures_has_no_figures_section(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        conn.execute(
            "INSERT INTO metric_values (model, task, subset, metric, value, ci_low, ci_high, n, materialized_at, "
            "run_id) VALUES (?, 'task_a', 'g', 'score', 0.5, 0.4, 0.6, 10, TIMESTAMP '2026-01-01 12:00:00', 'r')",
            [MODEL],
        )
    with duckdb.connect(str(path), read_only=True) as conn:
        assert '<section id="figures">' not in render_model_report(conn, MODEL).html
