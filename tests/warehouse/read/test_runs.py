"""Run records and the task declarations they carry."""

from __future__ import annotations

import duckdb

from tests.warehouse.read.synthetic import A, B
from themis_dagster.warehouse.read.runs import (
    all_runs,
    dataset_hashes,
    dig,
    latest_config,
    latest_runs,
    parse_config,
    precisions,
    task_declarations,
)


def test_run_records(conn: duckdb.DuckDBPyConnection) -> None:
    assert [run.task for run in latest_runs(conn, A)] == ["bbq", "crows_pairs_prompted", "gb_direct", "honest"]
    assert len(all_runs(conn, B)) == 3 and dig(all_runs(conn, B)[0].config, "engine", "engine") == "fake"
    assert dig(latest_config(conn, A, "bbq") or {}, "task_params", "confidence") == 0.95
    assert latest_config(conn, A, "nope") is None
    assert dataset_hashes(conn, A, "bbq") == ["sha-1"] and dataset_hashes(conn, B, "bbq") == []
    assert [(p.task, p.dtype, p.declared_dtype) for p in precisions(conn, B)] == [
        ("bbq", "float32", "auto"), ("crows_pairs_prompted", "float32", "auto"), ("gb_direct", "float32", "auto")
    ]  # fmt: skip


def test_declarations_and_configs(conn: duckdb.DuckDBPyConnection) -> None:
    declared = task_declarations(conn)
    assert [m["name"] for m in declared["bbq"]] == ["s_dis", "s_amb", "accuracy_ambig", "unparsed_rate"]
    assert parse_config("not json") == {} and parse_config(b'{"a": 1}') == {"a": 1} and parse_config(None) == {}
    assert dig({"a": {"b": 1}}, "a", "b") == 1 and dig({"a": 1}, "a", "b") is None
