"""Judged numbers carry their judge: ``judged_metrics`` (each judged metric value's judge, the judge's kappa with
its CI, the corrected value or why there is none) and the calibrations behind them (``judge_calibration_*``).

Both tables are newer than the stage tables: a warehouse without them reads as "no judged metric".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import duckdb

from themis_dagster.judging.correction import UNCALIBRATED
from themis_dagster.warehouse.read.query import number, optional_rows

JudgedKey = tuple[str, str, str | None]  # (task, metric, subset)


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

    @property
    def reason(self) -> str | None:
        """Why there is no corrected value (None: there is one)."""
        return None if self.corrected is not None else self.note or UNCALIBRATED

    @property
    def calibrated(self) -> bool:
        """Whether the judge was measured on a calibration set (else: "uncalibrated judge")."""
        return self.calibration_set is not None and self.kappa is not None

    @property
    def no_better_than_chance(self) -> bool:
        """A calibrated judge whose kappa CI reaches 0: its labels may be no better than chance."""
        return self.kappa_ci_low is not None and self.kappa_ci_low <= 0.0


_JUDGED = (
    "SELECT model, task, subset, metric, judge, calibration_set, kappa, kappa_ci_low, kappa_ci_high, corrected, "
    "corrected_ci_low, corrected_ci_high, note, n_calibration FROM judged_metrics"
)


def _judged(row: dict[str, Any]) -> JudgedRow:
    numbers = {key: number(row[key]) for key in ("kappa", "kappa_ci_low", "kappa_ci_high", "corrected",
                                                 "corrected_ci_low", "corrected_ci_high")}  # fmt: skip
    return JudgedRow(
        row["task"], row["subset"], row["metric"], row["judge"], row["calibration_set"], note=row["note"],
        n_calibration=row["n_calibration"], **numbers,
    )  # fmt: skip


def judged_rows(conn: duckdb.DuckDBPyConnection, model: str) -> dict[JudgedKey, JudgedRow]:
    """``model``'s judged metric values by (task, metric, subset); empty when none (or an older warehouse)."""
    found = optional_rows(conn, f"{_JUDGED} WHERE model = ?", [model]) or []
    return {(j.task, j.metric, j.subset): j for j in map(_judged, found)}


def judged_headlines(conn: duckdb.DuckDBPyConnection, models: Iterable[str]) -> dict[tuple[str, str, str], JudgedRow]:
    """The judged headline values (subset NULL) of ``models`` by (model, task, metric)."""
    wanted = list(models)
    found = optional_rows(conn, f"{_JUDGED} WHERE subset IS NULL AND list_contains(?::VARCHAR[], model)", [wanted])
    return {(str(row["model"]), str(row["task"]), str(row["metric"])): _judged(row) for row in found or []}


@dataclass(frozen=True)
class CalibrationLabel:
    """One calibration text's human label and the judge's (None: the judge's answer could not be read)."""

    item_id: str
    human_label: str
    judge_label: str | None


def calibration_labels(conn: duckdb.DuckDBPyConnection, judge: str, calibration_set: str) -> list[CalibrationLabel]:
    """A judge's stored labels of a calibration set, by item id (empty: not calibrated, or an older warehouse)."""
    found = optional_rows(
        conn,
        "SELECT item_id, human_label, judge_label FROM judge_calibration_labels WHERE judge = ? "
        "AND calibration_set = ? ORDER BY item_id",
        [judge, calibration_set],
    )
    return [CalibrationLabel(str(r["item_id"]), str(r["human_label"]), r["judge_label"]) for r in found or []]


@dataclass(frozen=True)
class CalibrationMetric:
    """A judge's agreement on a calibration set: accuracy, kappa, per-class sensitivity/specificity, confusion."""

    judge: str
    calibration_set: str
    metric: str
    label: str | None
    judge_label: str | None
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


def _stored(value: object) -> float | None:
    """A stored DOUBLE as it is (NaN stays NaN: the calibration's own arithmetic reads it)."""
    return None if value is None else float(value)  # type: ignore[arg-type]


def _calibration_metric(r: dict[str, Any]) -> CalibrationMetric:
    return CalibrationMetric(
        str(r["judge"]), str(r["calibration_set"]), str(r["metric"]), r["label"], r["judge_label"],
        _stored(r["value"]), _stored(r["ci_low"]), _stored(r["ci_high"]), int(r["n"]),
    )  # fmt: skip


def calibration_metrics(
    conn: duckdb.DuckDBPyConnection, judge: str | None = None, calibration_set: str | None = None
) -> list[CalibrationMetric]:
    """Every stored calibration measure (of ``judge`` on ``calibration_set``), by judge, set, metric and label."""
    found = optional_rows(
        conn,
        "SELECT judge, calibration_set, metric, label, judge_label, value, ci_low, ci_high, n "
        "FROM judge_calibration_metrics WHERE (?::VARCHAR IS NULL OR judge = ?) "
        "AND (?::VARCHAR IS NULL OR calibration_set = ?) ORDER BY judge, calibration_set, metric, label, judge_label",
        [judge, judge, calibration_set, calibration_set],
    )
    return [_calibration_metric(r) for r in found or []]


def calibration_kappa(conn: duckdb.DuckDBPyConnection, judge: str, calibration_set: str) -> CalibrationMetric | None:
    """The judge's Cohen's kappa on the set with its CI (None: not calibrated)."""
    return next((m for m in calibration_metrics(conn, judge, calibration_set) if m.metric == "kappa"), None)


def calibrated_judges(conn: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """Every (judge, calibration set) with a stored calibration, by judge and set (empty: none, or older)."""
    found = optional_rows(
        conn, "SELECT DISTINCT judge, calibration_set FROM judge_calibration_metrics ORDER BY judge, calibration_set"
    )
    return [(str(r["judge"]), str(r["calibration_set"])) for r in found or []]


@dataclass(frozen=True)
class CalibrationMiss:
    """A calibration text the judge labelled otherwise than the human did (``judge_label`` None: unreadable)."""

    item_id: str
    context: str | None
    text: str
    human_label: str
    judge_label: str | None
    reply: str | None


def calibration_misses(
    conn: duckdb.DuckDBPyConnection,
    judge: str,
    calibration_set: str,
    *,
    unreadable: bool = False,
    limit: int = 50,
    offset: int = 0,
) -> tuple[int, list[CalibrationMiss]]:
    """How many texts the judge got wrong (``unreadable``: whose answer could not be read) and a page of them."""
    where = "FROM judge_calibration_labels WHERE judge = $judge AND calibration_set = $set AND " + (
        "judge_label IS NULL" if unreadable else "judge_label IS NOT NULL AND judge_label <> human_label"
    )
    params = {"judge": judge, "set": calibration_set}
    counted = optional_rows(conn, f"SELECT count(*) AS n {where}", params)
    found = optional_rows(
        conn,
        f"SELECT item_id, context, text, human_label, judge_label, reply {where} "
        "ORDER BY human_label, item_id LIMIT $limit OFFSET $offset",
        params | {"limit": max(1, min(limit, 500)), "offset": max(0, offset)},
    )
    misses = [
        CalibrationMiss(str(r["item_id"]), r["context"], str(r["text"]), str(r["human_label"]), r["judge_label"],
                        r["reply"])
        for r in found or []
    ]  # fmt: skip
    return (int(counted[0]["n"]) if counted else 0), misses


def judged_headline_table(conn: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every model's judged headline values with their judge, kappa (CI) and corrected value or note, by model,
    task and metric (``themis leaderboard`` prints them; empty: none, or an older warehouse)."""
    found = optional_rows(
        conn,
        "SELECT model, task, metric, round(value, 4) AS value, judge, calibration_set, round(kappa, 4) AS kappa, "
        "round(kappa_ci_low, 4) AS kappa_ci_low, round(kappa_ci_high, 4) AS kappa_ci_high, "
        "round(corrected, 4) AS corrected, round(corrected_ci_low, 4) AS corrected_ci_low, "
        "round(corrected_ci_high, 4) AS corrected_ci_high, note, n_calibration "
        "FROM judged_metrics WHERE subset IS NULL ORDER BY model, task, metric",
    )
    return found or []


def judged_by(conn: duckdb.DuckDBPyConnection, judge: str | None = None) -> list[dict[str, Any]]:
    """The headline values each judge counted (of ``judge``, or every judge): model, task, metric, judge, set,
    value, corrected value or note, by judge, model, task and metric (empty: none, or an older warehouse)."""
    found = optional_rows(
        conn,
        f"{_JUDGED.replace('SELECT ', 'SELECT value, ', 1)} WHERE subset IS NULL AND (?::VARCHAR IS NULL OR judge = ?) "
        "ORDER BY judge, model, task, metric",
        [judge, judge],
    )
    return [{"model": row["model"], "value": number(row["value"]), "row": _judged(row)} for row in found or []]
