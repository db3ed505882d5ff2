"""Metric values come from the ``metrics`` view: a partition a run left half-written is hidden from every reader."""

from __future__ import annotations

import duckdb

from tests.warehouse.read.synthetic import A, B
from themis_dagster.warehouse.read import metrics as read
from themis_dagster.warehouse.read.metrics import MetricRecord, headline, subset_values


def test_headline_values_of_complete_partitions(conn: duckdb.DuckDBPyConnection) -> None:
    mine = headline(conn, A)
    assert len(mine) == 10 and [(r.task, r.metric) for r in mine] == sorted((r.task, r.metric) for r in mine)
    assert mine[0] == MetricRecord(None, "accuracy_ambig", 0.8, 0.75, 0.85, 40, A, "bbq", mine[0].materialized_at)
    assert not [r for r in headline(conn, B) if r.task == "crows_pairs_prompted"]
    assert {r.model for r in headline(conn)} == {A, B, "fam-step-100", "fam-step-200"}
    mark = next(r for r in mine if r.metric == "fail_rate_mark")
    assert mark.value == 4.0 and mark.ci_low is None and mark.ci_high is None
    assert read.headline_frame(conn).height == len(headline(conn))


def test_subsets_history_and_names(conn: duckdb.DuckDBPyConnection) -> None:
    assert [(r.subset, r.value) for r in read.subsets(conn, A)] == [("age", 0.2), ("race", 0.0)]
    trend = [r.value for r in read.history(conn, [A]) if r.metric == "s_dis"]
    assert trend == [0.3, 0.1]  # both materializations, oldest first
    assert [row["metric"] for row in read.matching(conn, A, "%refus%")] == ["refused_rate"]
    assert read.metric_subsets(conn, A, "bbq")["s_dis"] == [None, "age", "race"]


def test_subset_values_of_named_metrics(conn: duckdb.DuckDBPyConnection) -> None:
    """A family's figures read the subsets of the metrics they draw (the headline too where asked)."""
    found = subset_values(conn, A, "bbq", ["s_dis", "nope"])
    assert [(r.metric, r.subset, r.value) for r in found] == [("s_dis", "age", 0.2), ("s_dis", "race", 0.0)]
    assert [r.subset for r in subset_values(conn, A, "bbq", ["s_dis"], headline=True)] == [None, "age", "race"]
    assert subset_values(conn, A, "bbq", []) == [] and subset_values(conn, B, "bbq", ["s_dis"]) == []
