"""Model: one model's results by benchmark (as the HTML report), its charts, subsets, parse failures, refusals and
reproducibility record.

The header says the dtype the model's answers were computed in (``model_precision``) and why. The
charts come first: per benchmark family, each headline value with its CI against its ideal, and
per metric a forest plot of its subsets. A judged metric shows its judge, the judge's kappa and its
corrected value (or why there is none); a judge that is uncalibrated or no better than chance gives
it no verdict. Every value links to the items behind it (``?model=...``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st

from themis_dagster.explorer import browse, charts, data, ui
from themis_dagster.explorer.formatting import MISSING, percent
from themis_dagster.explorer.values import drawable, value_rows
from themis_dagster.reports.data import ReportData
from themis_dagster.reports.reply_outcomes import ReplyOutcomes, is_reply_outcome, reply_outcomes
from themis_dagster.reports.summary import FAMILIES, benchmark_family, is_mark
from themis_dagster.tasks.family import settings_metrics

LINK = ui.replies_link("items ↗", width=70)
SUMMARY_COLUMNS = ["task", "metric", "value", "95% CI", "ideal", "verdict", "rank", "n", "refused", "unfinished",
                   "replies"]  # fmt: skip
WIDTHS = {"task": 140, "metric": 200, "value": 80, "95% CI": 140, "ideal": 60, "verdict": 180, "rank": 100, "n": 60,
          "refused": 100, "unfinished": 100, "judge": 420, "corrected": 420, "subset": 180}  # fmt: skip


def _config(frame: pd.DataFrame) -> dict[str, Any]:
    config: dict[str, Any] = {name: st.column_config.TextColumn(name, width=w) for name, w in WIDTHS.items()}
    config["replies"] = LINK
    return {name: column for name, column in config.items() if name in frame.columns}


# value_rows' columns under the names the tables show them by (a comment: a page's bare string would be drawn)
SHOWN_AS = {"shown": "value", "ci": "95% CI", "ideal_shown": "ideal"}


def _table(
    rows: pd.DataFrame, columns: list[str], shares: Sequence[ReplyOutcomes | None], **after: Any
) -> pd.DataFrame:
    """``columns`` of ``rows`` as a table shows them, the ``refused`` and ``unfinished`` shares of each row's replies
    (``shares``, None: not known) beside them, then ``after``; the share columns dropped where no row has one (no
    generation task: no reply shares)."""
    frame = (
        rows[columns]
        .rename(columns=SHOWN_AS)
        .assign(
            refused=[share.refused_text if share else MISSING for share in shares],
            unfinished=[share.unfinished_text if share else MISSING for share in shares],
            **after,
        )
        .reset_index(drop=True)
    )
    if set(frame["refused"]) | set(frame["unfinished"]) == {MISSING}:
        return frame.drop(columns=["refused", "unfinished"])
    return frame


def summary_tables(report: ReportData, answered: bool = False) -> list[tuple[str, int, pd.DataFrame, pd.DataFrame]]:
    """Per benchmark family (in the report's order): (family, biased count, table with drill-down links, the judged
    values of the family with their judge and corrected value).

    A task's refusal and unfinished-reasoning shares stand beside each of its values (``refused``, ``unfinished``,
    as in the report), not among its metrics; the answered-only twins are left out unless ``answered``. The biased
    count is the read layer's, over every headline value of the family.
    """
    outcomes = reply_outcomes(report.headline, report.judged)
    rows = value_rows(report.headline, report.declared, report.judged, report.ranks)
    rows = rows[~rows["metric"].map(is_reply_outcome)]
    tables = []
    for family in FAMILIES:
        members = rows[rows["task"].map(benchmark_family) == family].sort_values(["task", "metric"])
        biased = int(members["verdict"].str.startswith("biased").sum())
        if not answered:
            members = members[~members["answered"]]
        if members.empty:
            continue
        shares = [outcomes.get((task, None)) for task in members["task"]]
        links = [
            ui.href("drilldown", model=report.model, task=t, metric=m)
            for t, m in zip(members["task"], members["metric"], strict=True)
        ]
        columns = ["task", "metric", "shown", "ci", "ideal_shown", "verdict", "rank", "n"]
        frame = _table(members, columns, shares, replies=links)
        judged = members[members["judge"].str.len() > 0]
        judges = pd.DataFrame(
            {"task": judged["task"], "metric": judged["metric"], "judge": judged["judge"],
             "corrected": judged["corrected"]}
        ).reset_index(drop=True)  # fmt: skip
        tables.append((family, biased, frame, judges))
    return tables


def subset_rows(report: ReportData, task: str) -> pd.DataFrame:
    """A task's subset values (not marks, departures or reply shares), with their verdicts and judges."""
    rows = [
        r
        for r in report.subsets
        if r.task == task
        and not is_mark(r.metric)
        and r.metric not in settings_metrics()
        and not is_reply_outcome(r.metric)
    ]
    return value_rows(rows, report.declared, report.judged)


def subset_table(report: ReportData, task: str, answered: bool = False) -> pd.DataFrame:
    """A task's subset values as the page lists them (each linked to its items), beside its subset's refusal and
    unfinished-reasoning shares (as in the report); a judged metric's corrected value (its judge is in the summary)."""
    rows = subset_rows(report, task)
    if not answered:
        rows = rows[~rows["answered"]]
    outcomes = reply_outcomes(report.subsets, report.judged)
    shares = [outcomes.get((task, subset)) for subset in rows["subset"]]
    links = [
        ui.href("drilldown", model=report.model, task=task, metric=m, subset=s)
        for m, s in zip(rows["metric"], rows["subset"], strict=True)
    ]
    columns = ["metric", "subset", "shown", "ci", "verdict", "n"]
    frame = _table(rows, columns, shares, corrected=rows["corrected"], replies=links)
    if not frame["corrected"].str.len().any():
        frame = frame.drop(columns=["corrected"])
    return frame


def _header(conn: Any, model: str, report: ReportData) -> None:
    spec = ui.registry().get(model)
    precision = data.precisions(conn, model)
    facts = []
    if precision:
        dtypes = sorted({p.dtype for p in precision})
        why = next((p.reason for p in precision if p.reason), None)
        facts.append(f"dtype **{', '.join(dtypes)}**" + (f" ({why})" if why and len(dtypes) == 1 else ""))
    if spec is not None and spec.parent:
        facts.append(f"parent **{spec.parent}**")
    if spec is not None and spec.mitigation is not None:
        facts.append(f"mitigation **{spec.mitigation.kind}**")
    if len(report.family) > 1:
        facts.append(f"checkpoint family: {', '.join(report.family)}")
    if facts:
        st.markdown(" · ".join(facts))


def _charts(report: ReportData) -> None:
    rows = drawable(value_rows(report.headline, report.declared, report.judged))
    rows = rows[~rows["answered"] & ~rows["metric"].map(is_reply_outcome)]
    families = [f for f in FAMILIES if (rows["task"].map(benchmark_family) == f).any()]
    if not families:
        return
    st.header("Headline values against their ideals")
    st.caption(
        "Dot: the value (red: a bias metric whose CI excludes its ideal); bar: its 95% CI; blue tick: the "
        "ideal. Each metric has its own axis."
    )
    for tab, family in zip(st.tabs(families), families, strict=True):
        with tab:
            st.altair_chart(charts.dot_ci(rows[rows["task"].map(benchmark_family) == family]))


def _forest(report: ReportData) -> None:
    keys = sorted(
        {
            (r.task, r.metric)
            for r in report.subsets
            if not is_mark(r.metric)
            and r.metric not in settings_metrics()
            and not is_reply_outcome(r.metric)
            and not r.metric.endswith("_answered")
            and r.value is not None
        }
    )
    if not keys:
        return
    labels = [f"{t} · {m}" for t, m in keys]
    chosen = st.selectbox("Forest plot of a metric's subsets", labels, key="forest")
    task, metric = keys[labels.index(str(chosen))]
    rows = drawable(subset_rows(report, task))
    rows = rows[rows["metric"] == metric]
    st.altair_chart(charts.with_rows(charts.forest(rows, report.ideals.get((task, metric)), metric), len(rows)))


def render() -> None:
    ui.header("Model")
    with ui.warehouse() as conn:
        models = data.evaluated_models(conn)
        model = ui.choose("Model", models, ui.evaluated_model_param(conn), key="model", name="model")
        ui.set_params(model=model)
        report = data.model_report(conn, model)
        refusals = data.refusals(conn, model)
        runs = data.evaluation_runs(conn, model)
        _header(conn, model, report)
        related = browse.related(conn, model)  # the Figures, Counterfactuals and Perturbations pages, where they apply
    links = st.columns(5 + len(related))
    for column, (page, label, icon) in zip(
        links,
        (
            ("compare", "Compare with its baseline", ":material/compare_arrows:"),
            ("playground", "Try it in the playground", ":material/chat:"),
            ("leaderboard", "On the leaderboard", ":material/leaderboard:"),
            ("refusals", "Its refused replies", ":material/block:"),
            ("judges", "The judges", ":material/gavel:"),
            *related,
        ),
        strict=True,
    ):
        with column:
            ui.page_link(page, label, icon=icon, model=model)

    judged = sum(entry.judged for entry in report.parse_failures)
    failed = sum(entry.failed for entry in report.parse_failures)
    cards = st.columns(4)
    cards[0].metric("Tasks", len({r.task for r in report.headline}))
    cards[1].metric(
        "Biased",
        data.bias_of(report).text,
        help="bias metrics whose CI excludes the ideal (a judged value counts only where its judge passed calibration)",
    )
    cards[2].metric("Parse failures", f"{failed:,} of {judged:,}")
    cards[3].metric("Evaluations recorded", f"{len(runs):,}")

    _charts(report)
    st.header("Summary by benchmark")
    answered = st.toggle(
        "Answered-only variants",
        key="answered",
        help="each metric recomputed over the replies not refused (<metric>_answered)",
    )
    for family, biased, frame, judges in summary_tables(report, answered):
        st.subheader(f"{family}" + (f" · {biased} biased" if biased else ""))
        ui.linked_table(frame, f"family-{family}", column_config=_config(frame))
        if not judges.empty:
            st.caption(
                f"Values of {family} a judge model counted: the judge, its kappa on its calibration set, and the "
                "value corrected for its errors or why there is none (the Judges page has its calibration)."
            )
            st.dataframe(
                judges, hide_index=True, width="stretch", key=f"judges-{family}", column_config=_config(judges)
            )

    st.header("Subsets")
    tasks = sorted({r.task for r in report.subsets})
    if not tasks:
        st.info("No subset values for this model.")
    else:
        _forest(report)
    for task in tasks:
        frame = subset_table(report, task, answered)
        if frame.empty:
            continue
        with st.expander(f"{task}: {len(frame):,} subset values", expanded=len(tasks) == 1):
            ui.linked_table(frame, f"subsets-{task}", column_config=_config(frame))

    _failures(model, report)
    st.header("Refusals")
    if refusals.empty:
        st.info("No refusal metric and no refused judgment for this model.")
    else:
        st.dataframe(refusals, hide_index=True, width="stretch", key="refusals")
        ui.page_link("refusals", "Read the refused replies, with the phrase that flagged each", model=model)
    _runs(runs)


def _failures(model: str, report: ReportData) -> None:
    st.header("Parse failures")
    entries = report.parse_failures
    failures = pd.DataFrame(
        {
            "task": [e.task for e in entries],
            "judged": [f"{e.judged:,}" for e in entries],
            "failed": [f"{e.failed:,}" for e in entries],
            "share": [percent(e.failed / e.judged) if e.judged else "—" for e in entries],
            "outcomes": [", ".join(f"{o} ({n:,})" for o, n in e.outcomes) or "—" for e in entries],
            "replies": [ui.href("drilldown", model=model, task=e.task, parsed="false") for e in entries],
        }
    )
    ui.linked_table(failures, "failures", column_config={"replies": ui.replies_link("failed replies ↗")})
    for entry in entries:
        if entry.examples:
            with st.expander(f"{entry.task}: examples of replies that could not be interpreted"):
                shown = pd.DataFrame(entry.examples).drop(columns=["task"], errors="ignore")
                st.dataframe(shown.fillna("—").astype(str), hide_index=True, width="stretch")


def _runs(runs: list[dict[str, Any]]) -> None:
    st.header("Reproducibility record")
    st.caption("The latest materialized evaluation of each task (evaluation_runs); secrets are never shown.")
    if not runs:
        st.info("No evaluation_runs record (an imported model has none).")
        return
    latest: dict[str, dict[str, Any]] = {}
    for run in runs:
        latest.setdefault(str(run["task"]), run)
    shown = pd.DataFrame(
        [
            {
                "task": task,
                "evaluated": str(run["materialized_at"])[:19],
                "engine": run["engine"] or "—",
                "device": run["device"] or "—",
                "dtype": run["dtype"] or "—",
                "weights sha256": str(run["weights_sha256"] or "—")[:12],
                "code version": run["code_version"] or "—",
            }
            for task, run in sorted(latest.items())
        ]
    )
    st.dataframe(shown, hide_index=True, width="stretch", key="runs")
    task = st.selectbox("Every setting of one task's evaluation", sorted(latest), key="run-task")
    st.dataframe(
        data.settings_list(latest[str(task)]["config"]),
        hide_index=True,
        width="stretch",
        key="run-settings",
        column_config={
            "setting": st.column_config.TextColumn("setting", width=340),
            "value": st.column_config.TextColumn("value", width="large"),
        },
    )


if __name__ == "__main__":
    render()
