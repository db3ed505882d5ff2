"""Metric values as the explorer's pages show them: each with its CI, ideal, verdict, rank and judge, in words.

One function builds the rows every page's table and chart reads, so the Model page, the
drill-down and the charts agree with each other and with the reports: the verdict is the read
layer's (``warehouse/read/verdicts.py``, with the value's judge), the judge's text the report's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from themis_dagster.explorer.formatting import MISSING, ci_text, ideal_text, value_text
from themis_dagster.refusals.outcome import ANSWERED
from themis_dagster.reports.judged_text import corrected_text, judge_text
from themis_dagster.reports.summary import is_mark, mark_letter, ranked_apart, verdict
from themis_dagster.warehouse.read.ideals import Ideals
from themis_dagster.warehouse.read.judged import JudgedKey, JudgedRow
from themis_dagster.warehouse.read.leaderboard import Rank
from themis_dagster.warehouse.read.metrics import MetricRecord

COLUMNS = [
    "task",
    "metric",
    "subset",
    "value",
    "ci_low",
    "ci_high",
    "ideal",
    "verdict",
    "tone",
    "rank",
    "n",
    "judge",
    "corrected",
    "apart",
    "answered",
    "shown",
    "ci",
    "ideal_shown",
    "label",
]


def value_rows(
    rows: Sequence[MetricRecord],
    declared: Ideals,
    judged: Mapping[JudgedKey, JudgedRow] | None = None,
    ranks: Mapping[tuple[str, str], Rank] | None = None,
) -> pd.DataFrame:
    """One row per value (see :data:`COLUMNS`): raw numbers for sorting and charts, their text for tables."""
    found = []
    for row in rows:
        key = (row.task, row.metric)
        judged_by = (judged or {}).get((row.task, row.metric, row.subset))
        said = verdict(row, declared.values.get(key), declared.higher_is_better.get(key), judged_by)
        apart = ranked_apart(judged_by)
        rank = None if row.subset is not None else (ranks or {}).get(key)
        letter = mark_letter(row.value) if is_mark(row.metric) else None
        found.append(
            {
                "task": row.task,
                "metric": row.metric,
                "subset": row.subset,
                "value": row.value,
                "ci_low": row.ci_low,
                "ci_high": row.ci_high,
                "ideal": declared.values.get(key),
                "verdict": said.text,
                "tone": said.tone,
                "rank": apart.removeprefix("ranked ") if apart else (f"{rank.rank} of {rank.of}" if rank else MISSING),
                "n": f"{row.n:,}",
                "judge": judge_text(judged_by) or "",
                "corrected": corrected_text(judged_by) or "",
                "apart": apart,
                "answered": row.metric.endswith(ANSWERED),
                "shown": f"{letter[0]} ({letter[1]})" if letter else value_text(row.metric, row.value),
                "ci": ci_text(row.metric, row.ci_low, row.ci_high),
                "ideal_shown": ideal_text(row.metric, declared.values.get(key)),
                "label": f"{row.task} · {row.metric}" + (f" · {row.subset}" if row.subset else ""),
            }
        )
    return pd.DataFrame(found, columns=COLUMNS)


def drawable(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows a chart can draw: a number (marks are letters, drawn nowhere), as floats."""
    kept = frame[frame["value"].notna() & ~frame["metric"].map(is_mark)].copy()
    for column in ("value", "ci_low", "ci_high", "ideal"):
        kept[column] = pd.to_numeric(kept[column], errors="coerce")
    return kept
