"""Model: one model's results by benchmark (as the HTML report), subsets, parse failures, refusals, reproducibility.

A judged metric shows its judge, the judge's kappa on its calibration set and its corrected value
(or "uncalibrated judge"), as in the report.

Every value links to the drill-down of the judgments behind it (``?model=...``).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from themis_dagster.explorer import data, ui
from themis_dagster.reports.data import ReportData
from themis_dagster.reports.formatting import MISSING
from themis_dagster.reports.judged_text import corrected_text, judge_text
from themis_dagster.reports.reply_outcomes import is_reply_outcome, reply_outcomes
from themis_dagster.reports.summary import family_sections, is_mark
from themis_dagster.tasks.genderbench.core import DEPARTURE_METRIC

LINK = ui.replies_link(width=80)


def summary_tables(report: ReportData) -> list[tuple[str, int, pd.DataFrame]]:
    """Per benchmark family (in the report's order): (family, biased count, table with drill-down links).

    A task's refusal and unfinished-reasoning shares stand beside each of its values (columns
    ``refused`` and ``unfinished``, as in the report), not among its metrics.
    """
    ranks = {key: f"{rank.rank} of {rank.of}" for key, rank in report.ranks.items()}
    outcomes = reply_outcomes(report.headline)
    tables = []
    for section in family_sections(
        report.headline, report.ideals, ranks, report.judged, outcomes, report.higher_is_better
    ):
        rows: list[dict[str, Any]] = list(section["rows"])  # type: ignore[call-overload]
        frame = pd.DataFrame(
            {
                "task": [r["task"] for r in rows],
                "metric": [r["metric"] for r in rows],
                "value": [r["value"] for r in rows],
                "95% CI": [r["ci"] for r in rows],
                "ideal": [r["ideal"] for r in rows],
                "verdict": [r["verdict"] for r in rows],
                "mark": [f"{r['mark']} ({r['mark_name']})" if r["mark"] else None for r in rows],
                "rank": [r["rank"] for r in rows],
                "n": [r["n"] for r in rows],
                "refused": [r["refused"] for r in rows],  # the task's share of refused replies, of how many
                "unfinished": [r["unfinished"] for r in rows],  # reasoning unfinished and truncated answers
                "judge": [r["judge"] for r in rows],  # judged metrics: the judge and its kappa, or "uncalibrated judge"
                "corrected": [r["corrected"] for r in rows],  # corrected for the judge's errors, or why not
                "replies": [ui.href("drilldown", model=report.model, task=r["task"], metric=r["metric"]) for r in rows],
            }
        )
        tables.append((str(section["family"]), int(section["biased"]), frame))  # type: ignore[call-overload]
    return tables


def subset_table(report: ReportData, task: str) -> pd.DataFrame:
    """A task's subset values, each beside its subset's refusal and unfinished-reasoning shares (as in the report)."""
    rows = [
        r
        for r in report.subsets
        if r.task == task and not is_mark(r.metric) and r.metric != DEPARTURE_METRIC and not is_reply_outcome(r.metric)
    ]
    judged = [report.judged.get((task, r.metric, r.subset)) for r in rows]
    outcomes = reply_outcomes(report.subsets)
    shares = [outcomes.get((task, r.subset)) for r in rows]
    return pd.DataFrame(
        {
            "metric": [r.metric for r in rows],
            "subset": [r.subset for r in rows],
            "value": [r.value for r in rows],
            "95% CI": [ui.fmt_ci(r.ci_low, r.ci_high) for r in rows],
            "n": [r.n for r in rows],
            "refused": [share.refused_text if share else MISSING for share in shares],
            "unfinished": [share.unfinished_text if share else MISSING for share in shares],
            "judge": [judge_text(j) for j in judged],
            "corrected": [corrected_text(j) for j in judged],
            "replies": [
                ui.href("drilldown", model=report.model, task=task, metric=r.metric, subset=r.subset) for r in rows
            ],
        }
    )


def render() -> None:
    ui.header("Model")
    with ui.warehouse() as conn:
        models = data.evaluated_models(conn)
        wanted = ui.param("model")
        if wanted is not None:
            data.check_model(conn, ui.valid_model_id(wanted))
        model = ui.choose("Model", models, wanted, key="model", name="model")
        ui.set_params(model=model)
        report = data.model_report(conn, model)
        refusals = data.refusals(conn, model)
        runs = data.evaluation_runs(conn, model)
    spec = ui.registry().get(model)
    facts = []
    if spec is not None and spec.parent:
        facts.append(f"parent **{spec.parent}**")
    if spec is not None and spec.mitigation is not None:
        facts.append(f"mitigation **{spec.mitigation.kind}**")
    if len(report.family) > 1:
        facts.append(f"checkpoint family: {', '.join(report.family)}")
    if facts:
        st.markdown(" · ".join(facts))
    links = st.columns(3)
    with links[0]:
        ui.page_link("compare", "Compare with its baseline", icon=":material/compare_arrows:", model=model)
    with links[1]:
        ui.page_link("playground", "Try it in the playground", icon=":material/chat:", model=model)
    with links[2]:
        ui.page_link("leaderboard", "On the leaderboard", icon=":material/leaderboard:", model=model)

    judged = sum(entry.judged for entry in report.parse_failures)
    failed = sum(entry.failed for entry in report.parse_failures)
    cards = st.columns(4)
    cards[0].metric("Tasks", len({r.task for r in report.headline}))
    cards[1].metric("Biased", data.bias_of(report).text, help="bias metrics whose CI excludes the ideal")
    cards[2].metric("Parse failures", f"{failed:,} of {judged:,}")
    cards[3].metric("Evaluations recorded", len(runs))

    st.header("Summary by benchmark")
    for family, biased, frame in summary_tables(report):
        st.subheader(f"{family}" + (f" · {biased} biased" if biased else ""))
        ui.linked_table(frame, f"family-{family}", column_config={"replies": LINK})

    st.header("Subsets")
    tasks = sorted({r.task for r in report.subsets})
    if not tasks:
        st.info("No subset values for this model.")
    for task in tasks:
        frame = subset_table(report, task)
        if frame.empty:
            continue
        with st.expander(f"{task}: {len(frame)} subset values", expanded=len(tasks) == 1):
            ui.linked_table(frame, f"subsets-{task}", column_config={"replies": LINK})

    st.header("Parse failures")
    failures = pd.DataFrame(
        {
            "task": [e.task for e in report.parse_failures],
            "judged": [e.judged for e in report.parse_failures],
            "failed": [e.failed for e in report.parse_failures],
            "share": [e.failed / e.judged if e.judged else None for e in report.parse_failures],
            "outcomes": [", ".join(f"{o} ({n:,})" for o, n in e.outcomes) for e in report.parse_failures],
            "replies": [ui.href("drilldown", model=model, task=e.task, parsed="false") for e in report.parse_failures],
        }
    )
    ui.linked_table(
        failures,
        "failures",
        column_config={
            "share": st.column_config.NumberColumn("share", format="percent"),
            "replies": ui.replies_link("failed replies ↗"),
        },
    )
    for entry in report.parse_failures:
        if entry.examples:
            with st.expander(f"{entry.task}: examples of replies that could not be interpreted"):
                st.dataframe(pd.DataFrame(entry.examples), hide_index=True, width="stretch")

    st.header("Refusals")
    if refusals.empty:
        st.info("No refusal metric and no refused judgment for this model.")
    else:
        st.dataframe(refusals, hide_index=True, width="stretch", key="refusals")

    st.header("Reproducibility record")
    st.caption("One row per materialized evaluation (evaluation_runs), newest first; secrets are never shown.")
    if not runs:
        st.info("No evaluation_runs record (an imported model has none).")
    else:
        shown = pd.DataFrame([{k: v for k, v in run.items() if k != "config"} for run in runs])
        st.dataframe(shown, hide_index=True, width="stretch", key="runs")
        for run in runs[:20]:
            with st.expander(f"{run['task']} · run {str(run['run_id'])[:8]} · {run['materialized_at']}"):
                st.json(run["config"], expanded=False)


if __name__ == "__main__":
    render()
