"""Figures: a model's results drawn as its benchmark families declare (``family.yaml``'s ``report.figures``).

Whose opinions does the model reflect, and which stereotypes does it prefer? A persona poll's
answer distribution per persona beside the reference's (``shares``), a metric per group sorted by
value with its CI and ideal (``ranked``: OpinionQA's representativeness per group, SHADES per bias
type), and one question's answers beside each group's (``distribution``). The page knows no family:
it draws what the task's family declares (``tasks/figures.py``), from the metric values and stored
items the read layer gives. ``?model=...&task=...`` and, for a distribution, ``&item=...``.
"""

from __future__ import annotations

import duckdb
import pandas as pd
import streamlit as st

from themis_dagster.explorer import browse, charts, ui
from themis_dagster.explorer.formatting import MISSING, ci_text, value_text
from themis_dagster.explorer.values import drawable, value_rows
from themis_dagster.reports.figures import ranked_rows, share_bars, share_groups
from themis_dagster.tasks.family import figures_of
from themis_dagster.tasks.figures import DistributionFigure, RankedFigure, SharesFigure, figure_metrics
from themis_dagster.warehouse.read.distributions import distribution_items, item_distribution
from themis_dagster.warehouse.read.ideals import Ideals, metric_ideals
from themis_dagster.warehouse.read.metrics import MetricRecord, metric_subsets, subset_values

CAPTION = (
    "What each benchmark family draws beyond a value and its CI, as its family.yaml declares: a distribution per "
    "persona beside the reference, a metric per group sorted by value, a question's answers beside each group's."
)


def ranked_frame(rows: list[MetricRecord], figure: RankedFigure, declared: Ideals) -> pd.DataFrame:
    """A ranked figure's rows as the forest chart draws them (largest first)."""
    return drawable(value_rows(ranked_rows(rows, figure), declared))


def shares_frame(rows: list[MetricRecord], figure: SharesFigure, group: str | None) -> pd.DataFrame:
    """A shares figure's segments of one panel group, as :func:`charts.shares` draws them."""
    bars = [bar for bar in share_bars(rows, figure) if bar.group == group]
    return pd.DataFrame(
        {
            "panel": [bar.member for bar in bars],
            "source": [bar.source for bar in bars],
            "category": [bar.category for bar in bars],
            "value": [bar.value for bar in bars],
            "shown": [value_text(bar.source, bar.value) for bar in bars],
            "ci": [ci_text(bar.source, bar.ci_low, bar.ci_high) for bar in bars],
        }
    )


def _ranked(rows: list[MetricRecord], figure: RankedFigure, task: str, declared: Ideals) -> None:
    frame = ranked_frame(rows, figure, declared)
    if frame.empty:
        st.info(f"No value of {figure.metric} on {task} matches this figure's subsets.")
        return
    st.altair_chart(
        charts.with_rows(charts.forest(frame, declared.ideal(task, figure.metric), figure.metric), len(frame))
    )
    plural = "s" if len(frame) != 1 else ""
    st.caption(
        f"{len(frame):,} subset{plural} of {figure.metric}, largest first; dot: the value (red: its CI excludes the "
        "ideal), bar: its 95% CI, dashed: the ideal."
    )


def _shares(rows: list[MetricRecord], figure: SharesFigure, key: str) -> None:
    groups = share_groups(share_bars(rows, figure))
    if not groups:
        st.info(f"No value of {figure.metric} reads as a panel and a category (<panel>|<category>).")
        return
    named = [group for group in groups if group is not None]
    group = None
    if named:
        group = ui.choose("Set", named, ui.param("set"), key=f"{key}-set", name="set")
        ui.set_params(set=group)
    frame = shares_frame(rows, figure, group)
    st.altair_chart(charts.shares(frame))
    sources = list(dict.fromkeys(frame["source"]))
    st.caption(
        "Each bar stacks one source's shares of the categories: "
        + " above ".join(f"{source}{' (paler)' if i else ''}" for i, source in enumerate(sources))
        + "."
    )
    with st.expander("The shares as a table"):
        wide = frame.pivot_table(index=["panel", "category"], columns="source", values="shown", aggfunc="first")
        st.dataframe(wide.reset_index().fillna(MISSING), hide_index=True, width="stretch")


def _distribution(conn: duckdb.DuckDBPyConnection, model: str, task: str, figure: DistributionFigure) -> None:
    items = distribution_items(conn, model, task, figure.model, figure.question)
    if not items:
        st.info(f"No item of {task} holds {figure.model!r}.")
        return
    ids = [item.item_id for item in items]
    wanted = ui.param("item")
    if wanted is not None and wanted not in ids:
        ui.fail(f"unknown item {wanted!r}: {model} has no item of {task} with {figure.model!r}")
    titles = {item.item_id: f"{item.item_id} · {item.question or item.subset or ''}"[:160] for item in items}
    chosen = str(
        st.selectbox(
            "Item", ids, index=ids.index(wanted) if wanted else 0, format_func=titles.__getitem__, key="figure-item"
        )
    )
    ui.set_params(item=chosen)
    keys = figure.model_dump(include={"model", "references", "labels", "question"})
    found = item_distribution(conn, model, task, chosen, keys)
    if found is None or not found.labels:
        st.info(f"{chosen} has no distribution to draw.")
        return
    if found.question:
        st.markdown(f"**{found.question}**")
    names = list(found.references)
    default = [name for name in figure.shown if name in names] or names[:1]
    shown = st.multiselect("Beside", names, default=default, key="figure-references")
    frame = pd.DataFrame(
        [
            {"label": label, "source": source, "value": value}
            for source, values in [(model, found.model), *((name, found.references[name]) for name in shown)]
            for label, value in zip(found.labels, values, strict=True)
            if value is not None
        ]
    )
    st.altair_chart(charts.distribution(frame))
    ui.page_link("drilldown", "The item in the drill-down", icon=":material/manage_search:", model=model, task=task,
                 item=chosen)  # fmt: skip


def render() -> None:
    ui.header("Figures", CAPTION)
    with ui.warehouse() as conn:
        model = browse.model(conn)
        tasks = browse.figure_tasks(conn, model)
        if not tasks:
            ui.set_params(model=model)
            st.info(f"No task of {model} has figures declared by its family (family.yaml's report.figures).")
            return
        task = ui.choose("Task", tasks, ui.param("task"), key="task", name="task with figures")
        ui.set_params(model=model, task=task)
        present = metric_subsets(conn, model, task)  # a family's figure is drawn for the tasks that have its metric
        declared = [f for f in figures_of(task) if all(m in present for m in figure_metrics(f)[:1])]
        rows = subset_values(conn, model, task, sorted({m for f in declared for m in figure_metrics(f)}))
        ideals = metric_ideals(conn)
        for index, figure in enumerate(declared):
            st.subheader(figure.title)
            if isinstance(figure, RankedFigure):
                _ranked(rows, figure, task, ideals)
            elif isinstance(figure, SharesFigure):
                _shares(rows, figure, f"figure-{index}")
            else:
                _distribution(conn, model, task, figure)
    ui.page_link("model", f"Every value of {model}", icon=":material/model_training:", model=model)


if __name__ == "__main__":
    render()
