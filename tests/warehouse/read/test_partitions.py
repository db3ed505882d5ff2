"""One definition of a complete partition (``partition_status``); an incomplete one is named where it is asked for."""

from __future__ import annotations

import duckdb
import pytest

from tests.warehouse.read.synthetic import A, B
from themis_dagster.explorer import data
from themis_dagster.warehouse.read.partitions import incomplete, partition_status, partition_statuses


def test_partition_status(conn: duckdb.DuckDBPyConnection) -> None:
    assert all(status.complete for status in partition_statuses(conn, A))
    [gap] = incomplete(conn)
    assert (gap.model, gap.task, gap.complete) == (B, "crows_pairs_prompted", False)
    assert gap.status == "incomplete: responses missing; materialize the partition again"
    assert partition_status(conn, B, "crows_pairs_prompted") == gap
    assert partition_status(conn, B, "honest") is None


def test_the_explorer_says_why_an_incomplete_partition_has_no_metric(conn: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(data.UnknownNameError, match="has no metrics to show: incomplete: responses missing"):
        data.check_metric(conn, B, "crows_pairs_prompted", "pct_stereotype", None)
    with pytest.raises(data.UnknownNameError, match="unknown metric 'zzz'"):
        data.check_metric(conn, A, "bbq", "zzz", None)
