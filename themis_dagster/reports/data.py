"""Everything a model report shows, read from the warehouse in a few bound-parameter queries.

Reads only: the report runs on a read-only connection. A table a warehouse does not have
yet (an older file) reads as empty rather than failing the report.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, SupportsFloat, SupportsIndex

import duckdb

from themis_dagster.tasks.spec import MetricValue

Ideals = Mapping[tuple[str, str], float]


@dataclass(frozen=True)
class MetricRow(MetricValue):
    """One row of metric_values / metric_history: a task's ``MetricValue`` (subset None: the headline
    value) with the model and task it belongs to and when it was materialized."""

    model: str
    task: str
    materialized_at: datetime | None = None


@dataclass(frozen=True)
class Rank:
    rank: int
    of: int


@dataclass(frozen=True)
class ParseFailures:
    """A task's judgments that could not be interpreted, with their outcomes and a few examples."""

    task: str
    judged: int
    failed: int
    outcomes: list[tuple[str, int]] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class RunRecord:
    """The latest evaluation_runs row of one task; ``config`` is {} when it does not parse."""

    task: str
    run_id: str
    materialized_at: datetime | None
    config: dict[str, Any]


@dataclass(frozen=True)
class JudgedRow:
    """A judged metric's judge, the judge's kappa on its calibration set and its corrected value (``judged_metrics``).

    ``corrected`` None: ``note`` says why ("uncalibrated judge", or a judge no better than chance).
    """

    task: str
    subset: str | None
    metric: str
    judge: str
    calibration_set: str | None
    kappa: float | None
    kappa_ci_low: float | None
    kappa_ci_high: float | None
    corrected: float | None
    corrected_ci_low: float | None
    corrected_ci_high: float | None
    note: str | None
    n_calibration: int | None = None


JudgedKey = tuple[str, str, str | None]  # (task, metric, subset)


@dataclass
class ReportData:
    model: str
    headline: list[MetricRow]
    subsets: list[MetricRow]
    all_headline: list[MetricRow]
    history: list[MetricRow]
    ideals: dict[tuple[str, str], float]
    ranks: dict[tuple[str, str], Rank]
    parse_failures: list[ParseFailures]
    runs: list[RunRecord]
    family: list[str]
    judged: dict[JudgedKey, JudgedRow] = field(default_factory=dict)


def _rows(conn: duckdb.DuckDBPyConnection, sql: str, params: Sequence[object] = ()) -> list[dict[str, Any]]:
    """Rows as dicts; a missing table or view (an older warehouse) reads as no rows."""
    try:
        cursor = conn.execute(sql, list(params))
    except duckdb.CatalogException:
        return []
    names = [column[0] for column in cursor.description or []]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _float(value: object) -> float | None:
    if value is None:
        return None
    try:
        number = float(value) if isinstance(value, str | bytes | SupportsFloat | SupportsIndex) else float("nan")
    except (TypeError, ValueError):
        return None
    return None if number != number else number  # NaN reads as missing


def _metric_rows(rows: list[dict[str, Any]]) -> list[MetricRow]:
    return [
        MetricRow(
            model=str(row["model"]),
            task=str(row["task"]),
            subset=None if row.get("subset") is None else str(row["subset"]),
            metric=str(row["metric"]),
            value=_float(row.get("value")),
            ci_low=_float(row.get("ci_low")),
            ci_high=_float(row.get("ci_high")),
            n=int(row.get("n") or 0),
            materialized_at=row.get("materialized_at"),
        )
        for row in rows
    ]


_METRIC_COLUMNS = "model, task, subset, metric, value, ci_low, ci_high, n, materialized_at"


def parse_config(raw: object) -> dict[str, Any]:
    """The evaluation_runs ``config`` as a dict, whatever was stored (JSON text, dict, garbage)."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, bytes | bytearray):
        raw = raw.decode("utf-8", errors="replace")
    if not isinstance(raw, str):
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def dig(config: Mapping[str, Any], *keys: str) -> Any:
    """``config[k1][k2]...`` or None when any level is missing or not a mapping."""
    node: Any = config
    for key in keys:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def known_models(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """Every model with metrics now or in the past."""
    rows = _rows(conn, "SELECT DISTINCT model FROM metrics")
    rows += _rows(conn, "SELECT DISTINCT model FROM metric_history")
    return sorted({str(row["model"]) for row in rows})


def _ideals(
    conn: duckdb.DuckDBPyConnection, runs: list[RunRecord], given: Ideals | None
) -> dict[tuple[str, str], float]:
    """Ideal values: the task specs recorded in evaluation_runs, then the leaderboard, then ``given``."""
    ideals: dict[tuple[str, str], float] = {}
    for run in runs:
        metrics = dig(run.config, "task", "metrics")
        for metric in metrics if isinstance(metrics, list) else []:
            name, ideal = dig(metric, "name"), _float(dig(metric, "ideal"))
            if isinstance(name, str) and ideal is not None:
                ideals[(run.task, name)] = ideal
    for row in _rows(conn, "SELECT DISTINCT task, metric, ideal FROM leaderboard WHERE ideal IS NOT NULL"):
        ideal = _float(row["ideal"])
        if ideal is not None:
            ideals[(str(row["task"]), str(row["metric"]))] = ideal
    for key, ideal in (given or {}).items():
        ideals[key] = float(ideal)
    return ideals


def _ranks(
    conn: duckdb.DuckDBPyConnection, model: str, all_headline: list[MetricRow], ideals: Mapping[tuple[str, str], float]
) -> dict[tuple[str, str], Rank]:
    """Rank on the leaderboard table; where it has no row yet, ranked the same way (|value - ideal|, ties share)."""
    ranks: dict[tuple[str, str], Rank] = {}
    board = _rows(
        conn,
        "SELECT task, metric, rank, of FROM (SELECT model, task, metric, rank, "
        "count(*) OVER (PARTITION BY task, metric) AS of FROM leaderboard) WHERE model = ?",
        [model],
    )
    for entry in board:
        ranks[(str(entry["task"]), str(entry["metric"]))] = Rank(int(entry["rank"]), int(entry["of"]))
    for row in all_headline:
        key = (row.task, row.metric)
        if row.model != model or key in ranks or key not in ideals or row.value is None:
            continue
        ideal = ideals[key]
        distances = [abs(p.value - ideal) for p in all_headline if (p.task, p.metric) == key and p.value is not None]
        mine = abs(row.value - ideal)
        ranks[key] = Rank(sum(1 for d in distances if d < mine) + 1, len(distances))
    return ranks


def _parse_failures(conn: duckdb.DuckDBPyConnection, model: str, examples: int) -> list[ParseFailures]:
    counts = _rows(
        conn,
        "SELECT task, count(*) AS judged, count(*) FILTER (WHERE NOT parsed) AS failed "
        "FROM judgments WHERE model = ? GROUP BY task ORDER BY task",
        [model],
    )
    outcomes = _rows(
        conn,
        "SELECT task, coalesce(outcome, '(none)') AS outcome, count(*) AS n FROM judgments "
        "WHERE model = ? AND NOT parsed GROUP BY ALL ORDER BY task, n DESC, outcome",
        [model],
    )
    samples = _rows(
        conn,
        "SELECT task, item_id, outcome, text, error, reasoning FROM parse_failures WHERE model = ? "
        "QUALIFY row_number() OVER (PARTITION BY task ORDER BY item_id, request_id) <= ?",
        [model, examples],
    )
    result = []
    for row in counts:
        task = str(row["task"])
        result.append(
            ParseFailures(
                task=task,
                judged=int(row["judged"]),
                failed=int(row["failed"]),
                outcomes=[(str(o["outcome"]), int(o["n"])) for o in outcomes if o["task"] == task],
                examples=[s for s in samples if s["task"] == task],
            )
        )
    return result


def _runs(conn: duckdb.DuckDBPyConnection, model: str) -> list[RunRecord]:
    rows = _rows(
        conn,
        "SELECT task, run_id, materialized_at, config FROM evaluation_runs WHERE model = ? "
        "QUALIFY row_number() OVER (PARTITION BY task ORDER BY materialized_at DESC, run_id) = 1 ORDER BY task",
        [model],
    )
    return [
        RunRecord(str(row["task"]), str(row["run_id"]), row["materialized_at"], parse_config(row["config"]))
        for row in rows
    ]


def load_report_data(
    conn: duckdb.DuckDBPyConnection,
    model: str,
    *,
    ideals: Ideals | None = None,
    family: Sequence[str] | None = None,
    failure_examples: int = 3,
) -> ReportData:
    """Read what the report of ``model`` needs; ``family`` lists its checkpoints in order (default: itself)."""
    members = list(family) if family else [model]
    if model not in members:
        members.append(model)
    headline = _metric_rows(
        _rows(
            conn,
            f"SELECT {_METRIC_COLUMNS} FROM metrics WHERE model = ? AND subset IS NULL ORDER BY task, metric",  # noqa: S608
            [model],
        )
    )
    subsets = _metric_rows(
        _rows(
            conn,
            f"SELECT {_METRIC_COLUMNS} FROM metrics WHERE model = ? AND subset IS NOT NULL "  # noqa: S608
            "ORDER BY task, metric, subset",
            [model],
        )
    )
    all_headline = _metric_rows(
        _rows(
            conn,
            f"SELECT {_METRIC_COLUMNS} FROM metrics WHERE subset IS NULL ORDER BY task, metric, model",  # noqa: S608
        )
    )
    history = _metric_rows(
        _rows(
            conn,
            f"SELECT {_METRIC_COLUMNS} FROM metric_history WHERE subset IS NULL "  # noqa: S608
            "AND list_contains(?::VARCHAR[], model) ORDER BY task, metric, model, materialized_at",
            [members],
        )
    )
    runs = _runs(conn, model)
    all_ideals = _ideals(conn, runs, ideals)
    return ReportData(
        model=model,
        headline=headline,
        subsets=subsets,
        all_headline=all_headline,
        history=history,
        ideals=all_ideals,
        ranks=_ranks(conn, model, all_headline, all_ideals),
        parse_failures=_parse_failures(conn, model, failure_examples),
        runs=runs,
        family=members,
        judged=judged_rows(conn, model),
    )


def judged_rows(conn: duckdb.DuckDBPyConnection, model: str) -> dict[JudgedKey, JudgedRow]:
    """The model's judged metrics by (task, metric, subset): judge, kappa, corrected value (none: older warehouse)."""
    rows = _rows(
        conn,
        "SELECT task, subset, metric, judge, calibration_set, kappa, kappa_ci_low, kappa_ci_high, corrected, "
        "corrected_ci_low, corrected_ci_high, note, n_calibration FROM judged_metrics WHERE model = ?",
        [model],
    )
    found = {}
    for row in rows:
        numbers = {key: _float(row[key]) for key in ("kappa", "kappa_ci_low", "kappa_ci_high", "corrected",
                                                      "corrected_ci_low", "corrected_ci_high")}  # fmt: skip
        judged = JudgedRow(
            row["task"], row["subset"], row["metric"], row["judge"], row["calibration_set"], note=row["note"],
            n_calibration=row["n_calibration"], **numbers,
        )  # fmt: skip
        found[judged.task, judged.metric, judged.subset] = judged
    return found
