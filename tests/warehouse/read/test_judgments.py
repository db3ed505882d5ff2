"""Parse failures (``parse_rates``, ``parse_failures``) and refusals (``refusals``) of a model, per task."""

from __future__ import annotations

import duckdb

from tests.warehouse.read.synthetic import A, B
from themis_dagster.warehouse.read.judgments import DETECTOR, RefusalCount, parse_failures, refusal_counts


def test_parse_failures(conn: duckdb.DuckDBPyConnection) -> None:
    [bbq] = parse_failures(conn, A, examples=1)
    assert (bbq.task, bbq.judged, bbq.failed) == ("bbq", 4, 2)
    assert bbq.outcomes == [("refused", 1), ("unparsed", 1)]
    assert [(e["item_id"], e["text"]) for e in bbq.examples] == [("i3", "hmm")]
    assert [(p.judged, p.failed) for p in parse_failures(conn, B, examples=3)] == [(4, 0)]


def test_refusals(conn: duckdb.DuckDBPyConnection) -> None:
    assert refusal_counts(conn, A) == [RefusalCount("bbq", "refused", 1), RefusalCount("bbq", DETECTOR, 1)]
    assert refusal_counts(conn, B) == []
