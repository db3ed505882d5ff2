"""The ``leaderboard`` table (each headline metric with a declared ideal, ranked by distance from it) and its
``leaderboard_view``; the table ``themis leaderboard`` prints."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import duckdb
import pandas as pd

from themis_dagster.warehouse.read.ideals import Ideals
from themis_dagster.warehouse.read.judged import JudgedRow
from themis_dagster.warehouse.read.metrics import MetricRecord
from themis_dagster.warehouse.read.query import number, rows, table
from themis_dagster.warehouse.read.verdicts import judge_withholds
from themis_dagster.warehouse.reads import table_exists

RankKey = tuple[str, str, str]  # (model, task, metric)


@dataclass(frozen=True)
class Rank:
    """1: closest to the ideal (ties share a rank), of ``of`` ranked models."""

    rank: int
    of: int


def ranks(conn: duckdb.DuckDBPyConnection, model: str | None = None) -> dict[RankKey, Rank]:
    """The leaderboard's ranks (of ``model``, or of every model) by (model, task, metric); a row without an ideal
    (stored before metrics without one were left unranked) has none."""
    found = rows(
        conn,
        "SELECT model, task, metric, rank, of FROM (SELECT model, task, metric, rank, "
        "count(*) OVER (PARTITION BY task, metric) AS of FROM leaderboard WHERE ideal IS NOT NULL) "
        "WHERE ?::VARCHAR IS NULL OR model = ?",
        [model, model],
    )
    return {(str(r["model"]), str(r["task"]), str(r["metric"])): Rank(int(r["rank"]), int(r["of"])) for r in found}


def ranked_like_the_leaderboard(model: str, values: Iterable[MetricRecord], ideals: Ideals) -> dict[RankKey, Rank]:
    """``model``'s ranks among ``values`` (every model's headline values) computed as the leaderboard asset ranks:
    by |value - ideal|, ties sharing a rank; metrics without a declared ideal are not ranked."""
    by_metric: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for row in values:
        distance = ideals.distance(row.task, row.metric, row.value)
        if distance is not None:
            by_metric.setdefault((row.task, row.metric), []).append((row.model, distance))
    found = {}
    for (task, metric), distances in by_metric.items():
        mine = next((d for m, d in distances if m == model), None)
        if mine is not None:
            found[(model, task, metric)] = Rank(sum(1 for _, d in distances if d < mine) + 1, len(distances))
    return found


_PRINTED = (
    "SELECT task, metric, rank, model, round(value, 4) AS value, round(ci_low, 4) AS ci_low, "
    "round(ci_high, 4) AS ci_high, n, ideal FROM leaderboard WHERE ideal IS NOT NULL ORDER BY task, metric, rank, model"
)
_PRINTED_JUDGED = (
    "SELECT l.task, l.metric, l.rank, l.model, round(l.value, 4) AS value, round(l.ci_low, 4) AS ci_low, "
    "round(l.ci_high, 4) AS ci_high, l.n, l.ideal, j.judge, round(j.corrected, 4) AS corrected, "
    "round(j.corrected_ci_low, 4) AS corrected_ci_low, round(j.corrected_ci_high, 4) AS corrected_ci_high, "
    "j.note AS judge_note, round(j.kappa, 4) AS kappa, round(j.kappa_ci_low, 4) AS kappa_ci_low, "
    "round(j.kappa_ci_high, 4) AS kappa_ci_high, j.calibration_set FROM leaderboard l LEFT JOIN judged_metrics j "
    "ON j.model = l.model AND j.task = l.task AND j.metric = l.metric AND j.subset IS NULL "
    "WHERE l.ideal IS NOT NULL ORDER BY l.task, l.metric, l.rank, l.model"
)
JUDGED_COLUMNS = ["judge", "corrected", "corrected_ci_low", "corrected_ci_high", "judge_note", "kappa", "kappa_ci_low",
                  "kappa_ci_high", "calibration_set", "apart"]  # fmt: skip


def printed_leaderboard(conn: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """The leaderboard as ``themis leaderboard`` prints it, values rounded to 4 digits; a ranked value a judge
    counted gets its judge, corrected value (or the note why none) and the judge's kappa with its CI in
    :data:`JUDGED_COLUMNS`, present only when some ranked metric is judged. ``apart`` says why a value is ranked
    apart from the others (its judge is uncalibrated or no better than chance: no verdict)."""
    judged = table_exists(conn, "judged_metrics")
    frame = table(conn, _PRINTED_JUDGED if judged else _PRINTED)
    if judged and frame["judge"].isna().all():  # no ranked metric is judged: the table as before
        return frame.drop(columns=[c for c in JUDGED_COLUMNS if c in frame.columns])
    if judged:
        frame["apart"] = [_withheld(row) for row in frame.to_dict("records")]
    return frame


def _withheld(row: dict[str, object]) -> str | None:
    """The read layer's reason a judged row gets no verdict (``verdicts.judge_withholds``), from a printed row."""
    if not isinstance(row.get("judge"), str):
        return None
    calibration_set = row.get("calibration_set")
    judged = JudgedRow(
        str(row["task"]), None, str(row["metric"]), str(row["judge"]),
        calibration_set if isinstance(calibration_set, str) else None, number(row.get("kappa")),
        number(row.get("kappa_ci_low")), number(row.get("kappa_ci_high")), None, None, None, None,
    )  # fmt: skip
    return judge_withholds(judged)
