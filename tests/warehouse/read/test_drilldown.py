"""From a metric to the judgments behind it (a subset covers its children), paged, with prompts and replies."""

from __future__ import annotations

import duckdb

from tests.warehouse.read.synthetic import A
from themis_dagster.warehouse.read import drilldown as read
from themis_dagster.warehouse.read.drilldown import Slice


def test_slices_filters_and_pages(conn: duckdb.DuckDBPyConnection) -> None:
    race = read.slice_of(conn, A, "bbq", "race")
    assert race == Slice(subset="race") and read.drilldown_total(conn, A, "bbq", race) == 2  # race and race/racism
    assert read.slice_of(conn, A, "bbq", "template=bbq_chat").template == "bbq_chat"
    assert read.slice_of(conn, A, "bbq", "order=first").note and read.drilldown_total(conn, A, "bbq", Slice()) == 4
    assert read.drilldown_choices(conn, A, "bbq", Slice()) == (
        ["age", "race", "race/racism"], [("biased", 1), ("refused", 1), ("unknown", 1), ("unparsed", 1)]
    )  # fmt: skip
    assert read.drilldown_total(conn, A, "bbq", Slice(), parsed=False) == 2
    page = read.drilldown_page(conn, A, "bbq", Slice(), limit=2, offset=2)
    assert page.total == 4 and [item.item_id for item in page.items] == ["i3", "i4"]
    assert page.items[1].requests[0].reply == "I can't answer that." and page.items[1].requests[0].sent
    assert list(page.frame()["reply"]) == ["hmm", "I can't answer that."]


def test_stored_request_and_columns(conn: duckdb.DuckDBPyConnection) -> None:
    request = read.stored_request(conn, A, "bbq", "i1:0")
    assert request is not None and request["messages"] == [{"role": "user", "content": "i1"}]
    assert request["gen_params"] == {"max_tokens": 8} and read.stored_request(conn, A, "bbq", "nope") is None
    assert read.reasoning_column(conn) == "reasoning" and "text" in read.columns_of(conn, "responses")
    assert read.columns_of(conn, "absent") == set()
