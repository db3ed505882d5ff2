"""Partition writes replace, never duplicate; schemas are fixed; values are bound, not spliced."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from themis_dagster.exchange import Request, Response
from themis_dagster.tasks.spec import Item, Judgment, MetricValue
from themis_dagster.warehouse.frames import from_frame, rows_frame, to_frame
from themis_dagster.warehouse.partitions import DuplicateKeyError, replace_partition, replace_table
from themis_dagster.warehouse.reads import read_partition
from themis_dagster.warehouse.schema import ensure_schema
from themis_dagster.warehouse.tables import TABLES, SchemaMismatchError


def items_frame(model: str, task: str, items: list[Item], dataset_sha256: str) -> pl.DataFrame:
    return to_frame("task_items", items, model=model, task=task, dataset_sha256=dataset_sha256)


def frame_items(frame: pl.DataFrame) -> list[Item]:
    return from_frame("task_items", frame, Item)


@pytest.fixture
def conn(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect(str(tmp_path / "w.duckdb"))
    ensure_schema(connection)
    yield connection
    connection.close()


def test_the_declared_tables_are_the_tables_ensure_schema_creates(conn: duckdb.DuckDBPyConnection) -> None:
    for name, table in TABLES.items():
        described = [row[:4] for row in conn.execute(f'DESCRIBE "{name}"').fetchall()]
        declared = [(c.name, c.type.sql, "YES" if c.nullable else "NO", None) for c in table.columns]
        assert described == declared, name
        assert rows_frame(name, []).schema == pl.Schema(table.frame_schema), name
        assert conn.execute(f'SELECT * FROM "{name}"').pl().columns == list(table.column_names), name
    # keys are kept unique by the writers, not by a constraint (tests/warehouse/test_warehouse_keys.py)
    keys = conn.execute("SELECT table_name FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY'")
    assert keys.fetchall() == []


# The contract existing warehouses were created with (the former sql/schema.sql), written out
# so that a change to a declaration fails here: (column, type, NOT NULL), then the primary key.
_PARTITION = [("model", "VARCHAR", True), ("task", "VARCHAR", True)]
_METRICS = [
    *_PARTITION,
    ("subset", "VARCHAR", False),
    ("metric", "VARCHAR", True),
    ("value", "DOUBLE", False),
    ("ci_low", "DOUBLE", False),
    ("ci_high", "DOUBLE", False),
    ("n", "INTEGER", True),
    ("materialized_at", "TIMESTAMP", True),
    ("run_id", "VARCHAR", True),
]
_LANGBITE = [("task", "VARCHAR", True), ("Provider", "VARCHAR", False), ("Model", "VARCHAR", False)]
_SCOPE = [
    ("Concern", "VARCHAR", False),
    ("Language", "VARCHAR", False),
    ("Input Type", "VARCHAR", False),
    ("Reflection Type", "VARCHAR", False),
]
EXISTING_WAREHOUSE: dict[str, tuple[list[tuple[str, str, bool]], tuple[str, ...]]] = {
    "task_items": ([
        *_PARTITION, ("item_id", "VARCHAR", True), ("subset", "VARCHAR", False), ("fields", "JSON", True),
        ("dataset_sha256", "VARCHAR", True),
    ], ("model", "task", "item_id")),
    "prompts": ([
        *_PARTITION, ("request_id", "VARCHAR", True), ("item_id", "VARCHAR", True), ("request_type", "VARCHAR", True),
        ("context", "VARCHAR", False), ("continuation", "VARCHAR", False), ("prompt", "VARCHAR", False),
        ("messages", "JSON", False), ("template", "VARCHAR", False), ("template_sha256", "VARCHAR", False),
        ("gen_params", "JSON", False),
    ], ("model", "task", "request_id")),
    "responses": ([
        *_PARTITION, ("request_id", "VARCHAR", True), ("item_id", "VARCHAR", True), ("request_type", "VARCHAR", True),
        ("logprob", "DOUBLE", False), ("is_greedy", "BOOLEAN", False), ("text", "VARCHAR", False),
        ("prompt_text", "VARCHAR", False), ("n_prompt_tokens", "INTEGER", False),
        ("n_output_tokens", "INTEGER", False), ("finish_reason", "VARCHAR", False), ("latency_s", "DOUBLE", False),
        ("error", "VARCHAR", False),
        ("n_continuation_tokens", "INTEGER", False),  # added later; ensure_schema adds it to older warehouses
        ("reasoning", "VARCHAR", False), ("n_reasoning_tokens", "INTEGER", False),  # added with reasoning models
    ], ("model", "task", "request_id")),
    "judgments": ([
        *_PARTITION, ("item_id", "VARCHAR", True), ("subset", "VARCHAR", False), ("outcome", "VARCHAR", False),
        ("score", "DOUBLE", False), ("parsed", "BOOLEAN", True), ("detail", "JSON", False),
        ("refused", "BOOLEAN", False),  # added with the refusal detector; ensure_schema adds it to older warehouses
    ], ("model", "task", "item_id")),
    "metric_values": (_METRICS, ()),
    "metric_history": (_METRICS, ()),
    "evaluation_runs": ([
        *_PARTITION, ("run_id", "VARCHAR", True), ("materialized_at", "TIMESTAMP", True), ("config", "JSON", True),
    ], ()),
    "stage_generations": ([
        *_PARTITION, ("stage", "VARCHAR", True), ("materialization", "VARCHAR", True),
        ("upstream_materialization", "VARCHAR", False), ("generation", "VARCHAR", True),
        ("run_id", "VARCHAR", True), ("written_at", "TIMESTAMP", True),
    ], ("model", "task", "stage")),
    "leaderboard": ([
        ("task", "VARCHAR", True), ("metric", "VARCHAR", True), ("rank", "INTEGER", True),
        ("model", "VARCHAR", True), ("value", "DOUBLE", False), ("ci_low", "DOUBLE", False),
        ("ci_high", "DOUBLE", False), ("n", "INTEGER", True), ("ideal", "DOUBLE", False),
        ("materialized_at", "TIMESTAMP", True),
    ], ()),
    # Added with the request cache: answers by request fingerprint, appended a chunk at a time.
    "request_cache": ([
        ("fingerprint", "VARCHAR", True), ("model", "VARCHAR", True), ("request_type", "VARCHAR", True),
        ("logprob", "DOUBLE", False), ("is_greedy", "BOOLEAN", False), ("text", "VARCHAR", False),
        ("prompt_text", "VARCHAR", False), ("n_prompt_tokens", "INTEGER", False),
        ("n_output_tokens", "INTEGER", False), ("finish_reason", "VARCHAR", False), ("latency_s", "DOUBLE", False),
        ("n_continuation_tokens", "INTEGER", False), ("reasoning", "VARCHAR", False),
        ("n_reasoning_tokens", "INTEGER", False), ("cached_at", "TIMESTAMP", True),
    ], ()),
    "comparison_results": ([
        ("model", "VARCHAR", True), ("baseline", "VARCHAR", True), ("task", "VARCHAR", True),
        ("subset", "VARCHAR", False), ("metric", "VARCHAR", True), ("value", "DOUBLE", False),
        ("baseline_value", "DOUBLE", False), ("difference", "DOUBLE", False), ("ci_low", "DOUBLE", False),
        ("ci_high", "DOUBLE", False), ("p_value", "DOUBLE", False), ("n_pairs", "INTEGER", True),
        ("test", "VARCHAR", True), ("permutations", "INTEGER", False), ("origin", "VARCHAR", True),
        ("materialized_at", "TIMESTAMP", True), ("run_id", "VARCHAR", True),
    ], ()),
    "perturbation_effect_results": ([
        *_PARTITION, ("base_task", "VARCHAR", True), ("perturbation", "VARCHAR", True),
        ("perturbation_key", "VARCHAR", True), ("scope", "VARCHAR", True), ("subset", "VARCHAR", False),
        ("metric", "VARCHAR", True), ("value", "DOUBLE", False), ("original_value", "DOUBLE", False),
        ("difference", "DOUBLE", False), ("ci_low", "DOUBLE", False), ("ci_high", "DOUBLE", False),
        ("p_value", "DOUBLE", False), ("n_pairs", "INTEGER", True), ("n_changed", "INTEGER", True),
        ("n_unchanged", "INTEGER", True), ("test", "VARCHAR", True), ("permutations", "INTEGER", False),
        ("materialized_at", "TIMESTAMP", True), ("run_id", "VARCHAR", True),
    ], ()),
    "comparison_gates": ([
        ("task", "VARCHAR", True), ("metric", "VARCHAR", True), ("margin", "DOUBLE", True),
        ("alpha", "DOUBLE", True), ("ideal", "DOUBLE", False), ("higher_is_better", "BOOLEAN", False),
    ], ()),
    # Added with judge calibration (issue 28): a judge's labels of a calibration set, its agreement with the
    # human labels, and every judged metric's judge, kappa and corrected value.
    "judge_calibration_labels": ([
        ("judge", "VARCHAR", True), ("calibration_set", "VARCHAR", True), ("item_id", "VARCHAR", True),
        ("context", "VARCHAR", False), ("text", "VARCHAR", True), ("human_label", "VARCHAR", True),
        ("judge_label", "VARCHAR", False), ("reply", "VARCHAR", False), ("error", "VARCHAR", False),
        ("run_id", "VARCHAR", True), ("materialized_at", "TIMESTAMP", True),
    ], ("judge", "calibration_set", "item_id")),
    "judge_calibration_metrics": ([
        ("judge", "VARCHAR", True), ("calibration_set", "VARCHAR", True), ("metric", "VARCHAR", True),
        ("label", "VARCHAR", False), ("judge_label", "VARCHAR", False), ("value", "DOUBLE", False),
        ("ci_low", "DOUBLE", False), ("ci_high", "DOUBLE", False), ("n", "INTEGER", True),
        ("run_id", "VARCHAR", True), ("materialized_at", "TIMESTAMP", True),
    ], ()),
    "judged_metrics": ([
        ("model", "VARCHAR", True), ("task", "VARCHAR", True), ("subset", "VARCHAR", False),
        ("metric", "VARCHAR", True), ("judge", "VARCHAR", True), ("calibration_set", "VARCHAR", False),
        ("kappa", "DOUBLE", False), ("kappa_ci_low", "DOUBLE", False), ("kappa_ci_high", "DOUBLE", False),
        ("value", "DOUBLE", False), ("corrected", "DOUBLE", False), ("corrected_ci_low", "DOUBLE", False),
        ("corrected_ci_high", "DOUBLE", False), ("n_calibration", "INTEGER", False), ("note", "VARCHAR", False),
        ("run_id", "VARCHAR", True), ("materialized_at", "TIMESTAMP", True),
    ], ()),
    # A family's own tables (tasks/langbite/family.yaml), after the platform's.
    "langbite_responses": ([*_LANGBITE, ("Instance", "VARCHAR", False), ("Response", "VARCHAR", False)], ()),
    "langbite_evaluations": ([
        *_LANGBITE, *_SCOPE, ("Template", "VARCHAR", False), ("Oracle Evaluation", "VARCHAR", False),
        ("Oracle Prediction", "VARCHAR", False), ("Evaluation", "VARCHAR", False),
    ], ()),
    "langbite_global_evaluation": ([
        *_LANGBITE, *_SCOPE, ("Passed Nr", "INTEGER", False), ("Failed Nr", "INTEGER", False),
        ("Error Nr", "INTEGER", False), ("Passed Pct", "DOUBLE", False), ("Failed Pct", "DOUBLE", False),
        ("Total", "INTEGER", False), ("Tolerance", "DOUBLE", False), ("Tolerance Evaluation", "VARCHAR", False),
    ], ()),
    # Added with LangBiTe's template augmentation: "model" is the generator.
    "langbite_augmented_templates": ([
        ("model", "VARCHAR", True), ("task", "VARCHAR", True), ("augmentation_sha256", "VARCHAR", True),
        ("pair", "VARCHAR", True), ("context", "VARCHAR", True), ("concern", "VARCHAR", True),
        ("attempt", "INTEGER", True), ("request_id", "VARCHAR", True), ("generator_prompt", "VARCHAR", True),
        ("gen_params", "JSON", False), ("reply", "VARCHAR", False), ("status", "VARCHAR", True),
        ("reason", "VARCHAR", False), ("position", "INTEGER", False), ("generated", "JSON", False),
        ("scenario", "VARCHAR", False), ("prompt", "VARCHAR", False), ("oracle_prediction", "VARCHAR", False),
        ("run_id", "VARCHAR", True), ("materialized_at", "TIMESTAMP", True),
    ], ()),
}  # fmt: skip


def test_declarations_keep_the_existing_warehouse_contract() -> None:
    """Existing warehouses and warehouse/sql/views.sql rely on these exact names, types, order and keys."""
    assert list(TABLES) == list(EXISTING_WAREHOUSE)
    for name, table in TABLES.items():
        columns, key = EXISTING_WAREHOUSE[name]
        assert [(c.name, c.type.sql, not c.nullable) for c in table.columns] == columns, name
        assert table.primary_key == key, name


# ``responses`` as warehouses created before n_continuation_tokens have it.
_RESPONSES_BEFORE_N_CONTINUATION_TOKENS = """
CREATE TABLE "responses" (
    "model" VARCHAR NOT NULL,
    "task" VARCHAR NOT NULL,
    "request_id" VARCHAR NOT NULL,
    "item_id" VARCHAR NOT NULL,
    "request_type" VARCHAR NOT NULL,
    "logprob" DOUBLE,
    "is_greedy" BOOLEAN,
    "text" VARCHAR,
    "prompt_text" VARCHAR,
    "n_prompt_tokens" INTEGER,
    "n_output_tokens" INTEGER,
    "finish_reason" VARCHAR,
    "latency_s" DOUBLE,
    "error" VARCHAR,
    PRIMARY KEY ("model", "task", "request_id")
);
"""


def test_ensure_schema_adds_the_columns_an_older_warehouse_lacks(tmp_path: Path) -> None:
    with duckdb.connect(str(tmp_path / "old.duckdb")) as old:
        old.execute(_RESPONSES_BEFORE_N_CONTINUATION_TOKENS)
        old.execute(
            "INSERT INTO responses VALUES ('m', 't', 'r0', 'i0', 'loglikelihood', -1.5, true, NULL, NULL, 5, 0, "
            "'scored', 0.25, NULL)"
        )
    with duckdb.connect(str(tmp_path / "old.duckdb")) as conn:
        ensure_schema(conn)
        ensure_schema(conn)  # again: nothing left to add
        described = [(row[0], row[1], row[2]) for row in conn.execute('DESCRIBE "responses"').fetchall()]
        declared = [(c.name, c.type.sql, "YES" if c.nullable else "NO") for c in TABLES["responses"].columns]
        assert described == declared
        before = Response("r0", "i0", -1.5, True, request_type="loglikelihood", n_prompt_tokens=5, n_output_tokens=0,
                          finish_reason="scored", latency_s=0.25)  # fmt: skip
        assert from_frame("responses", read_partition(conn, "responses", "m", "t"), Response) == [before]
        assert conn.execute("SELECT n_continuation_tokens FROM responses").fetchall() == [(None,)]
        after = replace(before, request_id="r1", n_continuation_tokens=2)
        replace_partition(conn, "responses", to_frame("responses", [before, after], model="m", task="t"), "m", "t")
        assert from_frame("responses", read_partition(conn, "responses", "m", "t"), Response) == [before, after]
        views = {row[0] for row in conn.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        assert "judgment_drilldown" in views


STAGES: list[tuple[str, list[Any], dict[str, Any]]] = [
    ("task_items", [Item("0", "race", {"text": "a", "n": [1, 2]}), Item("1", None, {})], {"dataset_sha256": "s"}),
    ("prompts", [
        Request("0:more", "0", "loglikelihood", "ctx ", "x"),
        Request("1:0", "1", "chat", prompt="p", messages=[{"role": "user", "content": "hi"}], template="t",
                template_sha256="abc", gen_params={"max_tokens": 8, "stop": ["\n"]}),
    ], {}),
    ("responses", [
        Response("0:more", "0", -1.5, True, request_type="loglikelihood", n_prompt_tokens=3, n_output_tokens=0,
                 finish_reason="scored", latency_s=0.25, n_continuation_tokens=2),
        Response("1:0", "1", text="Yes.", request_type="chat", prompt_text="<p>", n_prompt_tokens=4,
                 n_output_tokens=2, finish_reason="stop", latency_s=0.5),
        Response("1:1", "1", error="HTTP 500", request_type="chat"),
    ], {}),
    ("judgments", [Judgment("0", "race", "stereotype", 1.0, True, {"ll_more": -1.5}),
                   Judgment("1", None, "unparsed", None, False)], {}),
    ("metric_values", [MetricValue(None, "pct", 0.5, 0.25, 0.75, 2), MetricValue("race", "pct", None, None, None, 0)],
     {"materialized_at": datetime(2026, 1, 2, 3, 4, 5, 678901), "run_id": "r"}),
]  # fmt: skip


@pytest.mark.parametrize(("table", "records", "constants"), STAGES, ids=[stage[0] for stage in STAGES])
def test_records_round_trip_through_frames_and_the_warehouse(
    conn: duckdb.DuckDBPyConnection, table: str, records: list[Any], constants: dict[str, Any]
) -> None:
    frame = to_frame(table, records, model="m", task="t", **constants)
    assert frame.columns == list(TABLES[table].column_names)
    assert from_frame(table, frame, type(records[0])) == records
    replace_partition(conn, table, frame, "m", "t")
    assert from_frame(table, read_partition(conn, table, "m", "t"), type(records[0])) == records
    assert to_frame(table, [], model="m", task="t", **constants).height == 0


def test_records_must_match_their_table(conn: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(SchemaMismatchError, match="missing columns \\['dataset_sha256'\\]"):
        to_frame("task_items", [Item("0", None, {})], model="m", task="t")
    with pytest.raises(SchemaMismatchError, match="unexpected columns \\['fields'\\]"):
        to_frame("judgments", [Item("0", None, {})], model="m", task="t")
    with pytest.raises(SchemaMismatchError, match="given both"):
        to_frame("task_items", [Item("0", None, {})], model="m", task="t", dataset_sha256="s", subset="x")
    with pytest.raises(SchemaMismatchError, match="fields \\['fields'\\]"):
        from_frame("judgments", read_partition(conn, "judgments", "m", "t"), Item)
    with pytest.raises(KeyError):
        to_frame("no_such_table", [], model="m")


def test_a_null_json_column_reads_as_the_field_default(conn: duckdb.DuckDBPyConnection) -> None:
    conn.execute("INSERT INTO judgments VALUES ('m', 't', '0', NULL, 'o', NULL, true, NULL, NULL)")
    conn.execute(
        "INSERT INTO prompts (model, task, request_id, item_id, request_type) VALUES ('m', 't', 'r', '0', 'chat')"
    )
    assert from_frame("judgments", read_partition(conn, "judgments", "m", "t"), Judgment)[0].detail == {}
    assert from_frame("prompts", read_partition(conn, "prompts", "m", "t"), Request)[0].messages is None


def test_views_exist(conn: duckdb.DuckDBPyConnection) -> None:
    views = {row[0] for row in conn.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    assert {"metrics", "headline_metrics", "parse_failures", "judgment_drilldown", "metric_drilldown",
            "metric_trend", "leaderboard_view", "parse_rates", "partition_status", "refusals",
            "model_precision"} <= views  # fmt: skip
    columns = [row[0] for row in conn.execute("DESCRIBE metrics").fetchall()]
    assert columns == [
        "model", "task", "subset", "metric", "value", "ci_low", "ci_high", "n", "materialized_at",
        "run_id", "generation",
    ]  # fmt: skip


def _items(n: int, tag: str = "") -> list[Item]:
    return [Item(str(i), "gender", {"text": f"{tag}{i}"}) for i in range(n)]


def test_rerun_replaces_rows(conn: duckdb.DuckDBPyConnection) -> None:
    replace_partition(conn, "task_items", items_frame("m", "t", _items(5), "sha"), "m", "t")
    replace_partition(conn, "task_items", items_frame("m", "other", _items(2), "sha"), "m", "other")
    replace_partition(conn, "task_items", items_frame("m", "t", _items(3, "new"), "sha"), "m", "t")
    rows = read_partition(conn, "task_items", "m", "t")
    assert rows.height == 3
    assert [item.fields["text"] for item in frame_items(rows)] == ["new0", "new1", "new2"]
    assert read_partition(conn, "task_items", "m", "other").height == 2


def test_column_order_does_not_matter(conn: duckdb.DuckDBPyConnection) -> None:
    frame = items_frame("m", "t", _items(2), "sha")
    reordered = frame.select(list(reversed(frame.columns)))
    replace_partition(conn, "task_items", reordered, "m", "t")
    assert read_partition(conn, "task_items", "m", "t")["dataset_sha256"].to_list() == ["sha", "sha"]


def test_extra_or_missing_columns_are_rejected(conn: duckdb.DuckDBPyConnection) -> None:
    frame = items_frame("m", "t", _items(1), "sha")
    with pytest.raises(SchemaMismatchError, match="unexpected columns"):
        replace_partition(conn, "task_items", frame.with_columns(pl.lit(1).alias("surprise")), "m", "t")
    with pytest.raises(SchemaMismatchError, match="missing columns"):
        replace_partition(conn, "task_items", frame.drop("subset"), "m", "t")


def test_rows_outside_the_partition_are_rejected(conn: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(ValueError, match="outside partition"):
        replace_partition(conn, "task_items", items_frame("other", "t", _items(1), "sha"), "m", "t")


def test_failed_write_keeps_the_old_rows(conn: duckdb.DuckDBPyConnection) -> None:
    replace_partition(conn, "task_items", items_frame("m", "t", _items(2), "sha"), "m", "t")
    duplicate_ids = items_frame("m", "t", _items(1) + _items(1), "sha")  # two rows for one key
    with pytest.raises(DuplicateKeyError, match="task_items: duplicate item_id"):
        replace_partition(conn, "task_items", duplicate_ids, "m", "t")
    assert read_partition(conn, "task_items", "m", "t").height == 2


def test_failed_table_replacement_keeps_the_old_rows(conn: duckdb.DuckDBPyConnection) -> None:
    row = {"task": "t", "metric": "x", "rank": 1, "model": "m", "value": 0.5, "ci_low": None, "ci_high": None,
           "n": 3, "ideal": 0.0, "materialized_at": datetime(2026, 1, 1)}  # fmt: skip
    assert replace_table(conn, "leaderboard", rows_frame("leaderboard", [row, row | {"model": "m2"}])) == 2
    with pytest.raises(duckdb.ConstraintException):
        replace_table(conn, "leaderboard", rows_frame("leaderboard", [row | {"n": None}]))  # n is NOT NULL
    assert conn.execute("SELECT count(*) FROM leaderboard").fetchone() == (2,)
    assert replace_table(conn, "leaderboard", rows_frame("leaderboard", [])) == 0
    assert conn.execute("SELECT count(*) FROM leaderboard").fetchone() == (0,)


def test_hostile_values_are_bound_not_spliced(conn: duckdb.DuckDBPyConnection) -> None:
    hostile = "x' OR '1'='1"
    replace_partition(conn, "task_items", items_frame("m", "t", _items(1), "sha"), "m", "t")
    assert read_partition(conn, "task_items", hostile, "t").height == 0
    with pytest.raises(KeyError):
        read_partition(conn, "task_items; DROP TABLE prompts", "m", "t")


def test_drilldown_follows_item_and_attempt_judgments(conn: duckdb.DuckDBPyConnection) -> None:
    def judgments_frame(model: str, task: str, judgments: list[Judgment]) -> pl.DataFrame:
        return to_frame("judgments", judgments, model=model, task=task)

    # item-level judgment (CrowS-Pairs style): two requests per item
    requests = [Request("0:more", "0", "loglikelihood", "", "a"), Request("0:less", "0", "loglikelihood", "", "b")]
    replace_partition(conn, "prompts", to_frame("prompts", requests, model="m", task="t"), "m", "t")
    replace_partition(conn, "judgments", judgments_frame("m", "t", [Judgment("0", "race/x", "o", 1.0, True)]), "m", "t")
    # attempt-level judgment (GenderBench style): judgment id = request id
    attempts = [Request("7:0:0", "7", "chat", prompt="p")]
    replace_partition(conn, "prompts", to_frame("prompts", attempts, model="m", task="g"), "m", "g")
    replace_partition(
        conn, "judgments", judgments_frame("m", "g", [Judgment("7:0:0", "s", "u", None, False)]), "m", "g"
    )
    at = datetime(2026, 1, 1)
    values = to_frame("metric_values", [MetricValue("race", "x", 1.0, 1.0, 1.0, 1)], model="m", task="t",
                      materialized_at=at, run_id="r")  # fmt: skip
    replace_partition(conn, "metric_values", values, "m", "t")
    assert conn.execute("SELECT count(*) FROM judgment_drilldown WHERE task = 't'").fetchone() == (2,)
    assert conn.execute("SELECT request_id FROM judgment_drilldown WHERE task = 'g'").fetchall() == [("7:0:0",)]
    assert conn.execute("SELECT count(*) FROM metric_drilldown WHERE metric_subset = 'race'").fetchone() == (2,)
    assert conn.execute("SELECT item_id FROM parse_failures").fetchall() == [("7:0:0",)]


def test_the_refusals_view_shows_refused_judgments_with_their_replies(conn: duckdb.DuckDBPyConnection) -> None:
    verdict = {"refusal_verdict": {"phrase": "no puedo", "rule": "phrase-in-opening", "language": "es"}}
    judged = [Judgment("0", "age", "unknown", 1.0, True, verdict, refused=True), Judgment("1", "age", "biased", 0.0,
              True, refused=False), Judgment("2", "age", "engine_error", None, False)]  # fmt: skip
    replace_partition(conn, "judgments", to_frame("judgments", judged, model="m", task="t"), "m", "t")
    replies = [Response("0:chat", "0", text="Lo siento, no puedo.", request_type="chat"),
               Response("1:chat", "1", text="A", request_type="chat")]  # fmt: skip
    replace_partition(conn, "responses", to_frame("responses", replies, model="m", task="t"), "m", "t")
    rows = conn.execute("SELECT item_id, outcome, phrase, language, request_id, text FROM refusals").fetchall()
    assert rows == [("0", "unknown", "no puedo", "es", "0:chat", "Lo siento, no puedo.")]


def test_snapshot_is_a_consistent_readable_copy(tmp_path: Path) -> None:
    from themis_dagster.warehouse.file_snapshot import snapshot

    source = tmp_path / "w.duckdb"
    with duckdb.connect(str(source)) as conn:
        ensure_schema(conn)
        replace_partition(conn, "task_items", items_frame("m", "t", _items(3), "sha"), "m", "t")
    copy = snapshot(source, tmp_path / "snap.duckdb")
    with duckdb.connect(str(copy), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM task_items").fetchone() == (3,)
        assert conn.execute("SELECT count(*) FROM metrics").fetchone() == (0,)
    # the source is free again: a writer can open it while the snapshot is held open
    with duckdb.connect(str(copy), read_only=True), duckdb.connect(str(source)) as writer:
        writer.execute("DELETE FROM task_items")
