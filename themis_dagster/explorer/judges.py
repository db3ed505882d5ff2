"""Judges: every judge model's calibration against human labels, and the values it counted.

A judged number is only as good as its judge (docs/judges.md). Per calibration (a judge on a
human-labelled set): Cohen's kappa and accuracy with their CIs, how many answers could be read,
the confusion matrix (human label by the judge's, plus the answers it could not read), each class's
sensitivity and specificity, and the texts it got wrong, each with the human's label, the judge's
and its reply. A judge whose kappa CI reaches 0 is no better than chance: the values it counted get
no verdict ("judge failed calibration"); a judge never calibrated: "uncalibrated judge".
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from themis_dagster.explorer import ui
from themis_dagster.explorer.charts import Drawn
from themis_dagster.explorer.formatting import MISSING, count, percent, plain, value_text
from themis_dagster.reports.judged_text import corrected_text
from themis_dagster.warehouse.read import judged as judges
from themis_dagster.warehouse.read.verdicts import judge_withholds

PAGE = 25


def _ci(metric: judges.CalibrationMetric | None, as_percent: bool = False) -> str:
    if metric is None:
        return MISSING
    shown = percent if as_percent else plain
    value = shown(metric.value)
    if metric.ci_low is None or metric.ci_high is None or math.isnan(metric.ci_low) or math.isnan(metric.ci_high):
        return value
    return f"{value} ({shown(metric.ci_low)} – {shown(metric.ci_high)})"


def _verdict(kappa: judges.CalibrationMetric | None) -> str:
    if kappa is None or kappa.value is None or math.isnan(kappa.value):
        return "no kappa: no readable answer"
    if kappa.ci_low is not None and kappa.ci_low <= 0:
        return "failed: no better than chance (kappa CI reaches 0)"
    return "better than chance"


def overview(found: list[judges.CalibrationMetric], labels: dict[tuple[str, str], int]) -> pd.DataFrame:
    """One row per calibration: kappa and accuracy with CIs, readable answers of all, and the judge's standing."""
    rows = []
    for judge, calibration_set in sorted({(m.judge, m.calibration_set) for m in found}):
        mine = [m for m in found if (m.judge, m.calibration_set) == (judge, calibration_set)]
        kappa = next((m for m in mine if m.metric == "kappa"), None)
        accuracy = next((m for m in mine if m.metric == "accuracy"), None)
        unreadable = next((m for m in mine if m.metric == "unreadable_share"), None)
        rows.append(
            {
                "judge": judge,
                "calibration set": calibration_set,
                "kappa (95% CI)": _ci(kappa),
                "accuracy (95% CI)": _ci(accuracy, as_percent=True),
                "readable answers": f"{count(kappa.n if kappa else 0)} of "
                f"{count(labels.get((judge, calibration_set)))}",
                "unreadable": percent(unreadable.value if unreadable else None),
                "standing": _verdict(kappa),
            }
        )
    return pd.DataFrame(rows)


def confusion(found: list[judges.CalibrationMetric], labels: list[judges.CalibrationLabel]) -> pd.DataFrame:
    """Human label (rows) by the judge's label (columns), and the answers the judge could not read."""
    cells = [m for m in found if m.metric == "confusion"]
    humans = sorted({str(m.label) for m in cells} | {label.human_label for label in labels})
    judged = sorted({str(m.judge_label) for m in cells})
    unreadable = Counter(label.human_label for label in labels if label.judge_label is None)
    rows = []
    for human in humans:
        entry: dict[str, Any] = {"human label": human}
        for label in judged:
            found_cell = next((m for m in cells if m.label == human and m.judge_label == label), None)
            entry[f"judge: {label}"] = count(found_cell.value if found_cell else 0)
        entry["unreadable"] = count(unreadable.get(human, 0))
        rows.append(entry)
    return pd.DataFrame(rows)


def heatmap(found: list[judges.CalibrationMetric]) -> Drawn:
    cells = pd.DataFrame(
        [{"human": m.label, "judge": m.judge_label, "n": m.value} for m in found if m.metric == "confusion"]
    )
    base = alt.Chart(cells).encode(
        x=alt.X("judge:N", title="the judge's label"), y=alt.Y("human:N", title="the human label")
    )
    squares = base.mark_rect().encode(
        color=alt.Color("n:Q", scale=alt.Scale(scheme="blues"), legend=None), tooltip=["human:N", "judge:N", "n:Q"]
    )
    text = base.mark_text().encode(text=alt.Text("n:Q", format=".0f"))
    return alt.layer(squares, text).properties(width=300, height=60 + 40 * cells["human"].nunique())


def per_class(found: list[judges.CalibrationMetric]) -> pd.DataFrame:
    """Each class's sensitivity (of the texts people gave it, the share the judge gave it too) and specificity."""
    classes = sorted({str(m.label) for m in found if m.metric in ("sensitivity", "specificity")})

    def get(kind: str, label: str) -> judges.CalibrationMetric | None:
        return next((m for m in found if m.metric == kind and m.label == label), None)

    return pd.DataFrame(
        [
            {
                "class": label,
                "sensitivity (95% CI)": _ci(get("sensitivity", label), as_percent=True),
                "of texts": count(get("sensitivity", label).n if get("sensitivity", label) else None),  # type: ignore[union-attr]
                "specificity (95% CI)": _ci(get("specificity", label), as_percent=True),
                "of other texts": count(get("specificity", label).n if get("specificity", label) else None),  # type: ignore[union-attr]
            }
            for label in classes
        ]
    )


def counted_values(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The headline values judges counted, each with what the judge's calibration allows."""
    return pd.DataFrame(
        [
            {
                "judge": r["row"].judge,
                "model": r["model"],
                "task": r["row"].task,
                "metric": r["row"].metric,
                "value": value_text(r["row"].metric, r["value"]),
                "calibration set": r["row"].calibration_set or MISSING,
                "verdict": judge_withholds(r["row"]) or "the judge passed calibration",
                "corrected": corrected_text(r["row"]),
                "items": ui.href("drilldown", model=r["model"], task=r["row"].task, metric=r["row"].metric),
            }
            for r in rows
        ]
    )


def render() -> None:
    ui.header("Judges", "Every judge model measured against human labels, and the values it counted.")
    with ui.warehouse() as conn:
        found = judges.calibration_metrics(conn)
        pairs = judges.calibrated_judges(conn)
        labels = {pair: len(judges.calibration_labels(conn, *pair)) for pair in pairs}
        counted = judges.judged_by(conn)
        wanted_judge, wanted_set = ui.param("judge"), ui.param("set")
        if wanted_judge is not None:
            ui.valid_model_id(wanted_judge)
        if (wanted_judge or wanted_set) and (wanted_judge, wanted_set) not in pairs:
            known = ", ".join(f"{j} on {s}" for j, s in pairs) or "none"
            ui.fail(f"unknown calibration: judge {wanted_judge!r} on set {wanted_set!r} (calibrations: {known})")
        st.header("Values counted by a judge")
        if counted:
            ui.linked_table(
                counted_values(counted),
                "judged-values",
                "items",
                column_config={
                    "items": ui.replies_link("items ↗", width=70),
                    "corrected": st.column_config.TextColumn("corrected", width="large"),
                },
            )
        else:
            st.info("No metric in this warehouse was counted by a judge model.")
        st.header("Calibrations")
        if not pairs:
            st.info(
                "No judge has been calibrated yet: `themis run` calibrates every judge its tasks name "
                '(docs/judges.md); until then every judged value reads "uncalibrated judge".'
            )
            return
        st.table(overview(found, labels), hide_index=True)
        names = [f"{j} on {s}" for j, s in pairs]
        index = next((i for i, pair in enumerate(pairs) if pair == (wanted_judge, wanted_set)), 0)
        chosen = pairs[names.index(str(st.selectbox("Calibration", names, index=index, key="calibration")))]
        ui.set_params(judge=chosen[0], set=chosen[1])
        mine = [m for m in found if (m.judge, m.calibration_set) == chosen]
        all_labels = judges.calibration_labels(conn, *chosen)
        left, right = st.columns([3, 2])
        with left:
            st.subheader("Confusion matrix")
            st.table(confusion(mine, all_labels), hide_index=True)
            st.subheader("Per class")
            st.table(per_class(mine), hide_index=True)
        with right:
            st.altair_chart(heatmap(mine))
        st.subheader("Texts the judge got wrong")
        unreadable = st.toggle("Its answers that could not be read instead", key="unreadable")
        total, _ = judges.calibration_misses(conn, *chosen, unreadable=unreadable, limit=1)
        pages = max(1, math.ceil(total / PAGE))
        page = int(st.number_input(f"Page (of {pages:,})", 1, pages, 1, key="misses-page"))
        total, misses = judges.calibration_misses(
            conn, *chosen, unreadable=unreadable, limit=PAGE, offset=(page - 1) * PAGE
        )
    st.caption(
        f"{total:,} texts "
        + ("whose answer could not be read." if unreadable else "labelled otherwise than people labelled them.")
    )
    if misses:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "human": m.human_label,
                        "judge": m.judge_label or "unreadable",
                        "text": m.text,
                        "the judge's reply": m.reply or MISSING,
                    }
                    for m in misses
                ]
            ),
            hide_index=True,
            width="stretch",
            key="misses",
            column_config={"text": st.column_config.TextColumn("text", width="large")},
        )


if __name__ == "__main__":
    render()
