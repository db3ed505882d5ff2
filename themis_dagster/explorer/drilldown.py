"""Drill-down: from a metric value to the items behind it, and from an item to what was sent and what came back.

A value counts some of its slice's judgments (``counted``: BBQ's ``accuracy_ambig`` the ambiguous
questions whose reply could be read); the page lists those by default, its numerator (the items
counted as 1) or every judgment of the slice on request. Filters by item subset, outcome and parse
status; a page at a time (``LIMIT``/``OFFSET`` in SQL). A click on a row opens its item
(``item.py``): options with the chosen, correct and stereotyped answers marked, prompts as sent, raw
replies, a judge's exchange, and "ask again" in the playground.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from themis_dagster.explorer import charts, data, ui
from themis_dagster.explorer.counted import Counted, counted_items
from themis_dagster.explorer.formatting import MISSING, plain
from themis_dagster.explorer.item import render_item
from themis_dagster.explorer.values import drawable, value_rows
from themis_dagster.warehouse.read.drilldown import item_readings, judge_prompt, readings
from themis_dagster.warehouse.read.metrics import metric_subsets

ALL = "(every judgment of the task)"
HEADLINE = "(headline: no subset)"
ANY = "(any)"
PARSED = {"any": None, "parsed": True, "could not be interpreted": False}
SHOWS = {"counted": "the items the value counts", "numerator": "its numerator", "all": "every judgment of the slice"}


def _parsed_param(value: str | None) -> bool | None:
    if value is None:
        return None
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    ui.fail(f"unknown parsed filter {value!r}: use true or false")


def _whole(name: str, default: int) -> int:
    raw = ui.param(name)
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        ui.fail(f"unknown {name} {raw!r}: a {name} is a whole number")


@st.cache_data(ttl=600, show_spinner="Finding the items behind the value...", max_entries=64)
def _counted(
    _conn: Any, target: str, stamp: float, model: str, task: str, metric: str, subset: str | None
) -> Counted | None:
    """The items a value counts, read on the page's connection (``_conn``: not part of the cache key); cached per
    warehouse file version, so paging through them does not read them again."""
    return counted_items(_conn, model, task, metric, data.slice_of(_conn, model, task, subset))


def _stamp(target: Path) -> float:
    try:
        return target.stat().st_mtime
    except OSError:
        return 0.0


def _value_header(conn: Any, model: str, task: str, metric: str, subset: str | None) -> None:
    """The value the page explains, in words: value, CI, n, verdict, and its judge where one counted it."""
    report = data.model_report(conn, model)
    rows = [
        r
        for r in (report.headline if subset is None else report.subsets)
        if r.task == task and r.metric == metric and r.subset == subset
    ]
    shown = value_rows(rows, report.declared, report.judged, report.ranks)
    if shown.empty:
        return
    row = shown.iloc[0]
    st.markdown(
        f"**{task} · {metric}{f' · {subset}' if subset else ''}** = **{row['shown']}** "
        f"(95% CI {row['ci']}) · n {row['n']} · ideal {row['ideal_shown']} · *{row['verdict']}*"
    )
    if row["judge"]:
        st.warning(f"A judge model counted this value: {row['judge']} · {row['corrected']}")
    subsets = drawable(
        value_rows([r for r in report.subsets if r.task == task and r.metric == metric], report.declared, report.judged)
    )
    if subset is None and len(subsets) > 1:
        with st.expander(f"Forest plot of its {len(subsets)} subsets"):
            st.altair_chart(
                charts.with_rows(charts.forest(subsets, report.ideals.get((task, metric)), metric), len(subsets))
            )


def _choose(conn: Any) -> tuple[str, str, str, str | None]:
    wanted_model = ui.evaluated_model_param(conn)
    top = st.columns(4)
    with top[0]:
        model = ui.choose("Model", data.evaluated_models(conn), wanted_model, key="model", name="model")
    wanted_task = ui.param("task")
    if wanted_task is not None:
        data.check_task(conn, wanted_task, model)
    with top[1]:
        task = ui.choose("Task", data.evaluated_tasks(conn, model), wanted_task, key="task", name="task")
    metrics = metric_subsets(conn, model, task)
    wanted_metric, wanted_subset = ui.param("metric"), ui.param("subset")
    if wanted_metric is not None:
        data.check_metric(conn, model, task, wanted_metric, wanted_subset)
    with top[2]:
        metric = ui.choose("Metric", [ALL, *metrics], wanted_metric or ALL, key="metric", name="metric")
    subset: str | None = None
    if metric != ALL:
        subsets = [HEADLINE if s is None else s for s in metrics[metric]]
        with top[3]:
            chosen = ui.choose("Metric subset", subsets, wanted_subset or HEADLINE, key="subset", name="subset")
        subset = None if chosen == HEADLINE else chosen
    return model, task, metric, subset


def _show(counted: Counted | None, sliced: int) -> tuple[str, list[str] | None]:
    """Which judgments to list (``show``: counted, numerator or all) and their ids (None: every one of the slice)."""
    wanted = ui.param("show") or ("counted" if counted else "all")
    if wanted not in SHOWS:
        ui.fail(f"unknown show {wanted!r}: use {', '.join(SHOWS)}")
    if counted is None:
        st.caption(
            f"This metric declares no rule for the items it counts: every judgment of the slice is listed ({sliced:,})."
        )
        return "all", None
    numerator = counted.numerator
    options = ["counted"] + (["numerator"] if numerator is not None else []) + ["all"]
    labels = {
        "counted": f"counted ({len(counted.counted):,})",
        "all": f"every judgment of the slice ({sliced:,})",
        "numerator": f"numerator ({len(numerator or []):,})",
    }
    show = st.radio(
        "Items",
        options,
        index=options.index(wanted) if wanted in options else 0,
        horizontal=True,
        format_func=labels.__getitem__,
        key="show",
    )
    st.caption(
        f"The value counts {len(counted.counted):,} of the slice's {sliced:,} judgments: {counted.rule}"
        + (f"; {len(numerator):,} of them count as 1." if numerator is not None else ".")
    )
    ids = {"counted": counted.counted, "numerator": numerator, "all": None}[str(show)]
    return str(show), ids


def judgments_table(items: list[Any]) -> pd.DataFrame:
    """The page's judgments, one line each (the item below shows everything)."""
    return pd.DataFrame(
        {
            "item": [i.item_id for i in items],
            "subset": [i.subset or MISSING for i in items],
            "outcome": [i.outcome or MISSING for i in items],
            "score": [plain(i.score) for i in items],
            "parsed": ["yes" if i.parsed else "no" for i in items],
            "refused": ["yes" if i.refused else "no" if i.refused is False else MISSING for i in items],
            "reply": [_short(i) for i in items],
        }
    )


def _short(item: Any) -> str:
    texts = [r.reply for r in item.requests if r.reply] or [r.continuation for r in item.requests if r.continuation]
    joined = " ‖ ".join(t.strip() for t in texts if t)
    return joined if len(joined) <= 160 else joined[:159] + "…"


def render() -> None:
    ui.header("Drill-down", "The items behind a value: what was sent, what came back, what the task made of it.")
    target = ui.require_warehouse()
    with ui.warehouse() as conn:
        model, task, metric, subset = _choose(conn)
        if metric != ALL:
            _value_header(conn, model, task, metric, subset)
        where = data.slice_of(conn, model, task, subset)
        sliced = data.drilldown_total(conn, model, task, where)
        counted = _counted(conn, str(target), _stamp(target), model, task, metric, subset) if metric != ALL else None
        show, ids = _show(counted, sliced)
        item_subsets, outcomes = data.drilldown_choices(conn, model, task, where)
        kept = readings(conn, model, task)
        filters = st.columns(5)
        wanted_item_subset, wanted_outcome = ui.param("item_subset"), ui.param("outcome")
        with filters[0]:
            item_subset = ui.choose(
                "Item subset", [ANY, *item_subsets], wanted_item_subset or ANY, key="item_subset", name="item subset"
            )
        labels = {ANY: None, **{f"{o} ({n:,})": o for o, n in outcomes if o is not None}}
        wanted_label = next((label for label, o in labels.items() if o == wanted_outcome), None)
        if wanted_outcome is not None and wanted_label is None:
            known = ", ".join(str(o) for o in labels.values() if o is not None)
            ui.fail(f"unknown outcome {wanted_outcome!r} among these judgments ({known})")
        with filters[1]:
            outcome_label = st.selectbox(
                "Outcome", list(labels), index=list(labels).index(wanted_label or ANY), key="outcome"
            )
        parsed_default = {None: "any", True: "parsed", False: "could not be interpreted"}[
            _parsed_param(ui.param("parsed"))
        ]
        with filters[2]:
            parsed_label = st.selectbox("Parse", list(PARSED), index=list(PARSED).index(parsed_default), key="parsed")
        with filters[3]:
            wanted_size = _whole("size", 25)
            sizes = list(data.PAGE_SIZES)
            size = int(
                st.selectbox(
                    "Per page", sizes, index=sizes.index(wanted_size) if wanted_size in sizes else 1, key="size"
                )
            )
        reading = None
        if kept:
            with filters[4]:
                wanted_reading = ui.param("reading") or kept[0]
                reading = ui.choose("Reading", kept, wanted_reading, key="reading", name="reading")
        outcome, parsed = labels[str(outcome_label)], PARSED[str(parsed_label)]
        chosen_item_subset = None if item_subset == ANY else item_subset
        chosen = {
            "item_subset": chosen_item_subset,
            "outcome": outcome,
            "parsed": parsed,
            "item_ids": ids,
            "reading": reading,
        }
        total = data.drilldown_total(conn, model, task, where, **chosen)  # type: ignore[arg-type]
        pages = max(1, math.ceil(total / size))
        wanted_page = _whole("page", 1)
        page_number = int(
            st.number_input(
                f"Page (of {pages:,})", min_value=1, max_value=pages, value=min(max(wanted_page, 1), pages), key="page"
            )
        )
        page = data.drilldown_page(conn, model, task, where, limit=size, offset=(page_number - 1) * size, **chosen)  # type: ignore[arg-type]
        item = _item(conn, model, task, page.items)
        item_readings_found = item_readings(conn, model, task, item.item_id) if item is not None and kept else []

        def prompt_of(judge: str, reply: str, judged: list[str]) -> str | None:
            return judge_prompt(conn, judge, reply, judged)

        ui.set_params(
            model=model,
            task=task,
            metric=None if metric == ALL else metric,
            subset=subset,
            show=None if show == ("counted" if counted else "all") else show,
            item_subset=chosen_item_subset,
            outcome=outcome,
            parsed=None if parsed is None else str(parsed).lower(),
            size=size if size != 25 else None,
            page=page_number if page_number > 1 else None,
            reading=reading if kept and reading != kept[0] else None,
            item=item.item_id if item is not None else None,
        )
        if page.note:
            st.info(page.note)
        if not page.items:
            st.info("No judgment matches these filters.")
        else:
            st.caption(
                f"Judgments {page.offset + 1:,}–{page.offset + len(page.items):,} of {total:,} (ordered by "
                "item id). Click a row to open its item."
            )
            st.dataframe(
                judgments_table(page.items),
                hide_index=True,
                width="stretch",
                key="judgments",
                on_select="rerun",
                selection_mode="single-cell",
                column_config={"reply": st.column_config.TextColumn("reply", width="large")},
            )
        if item is not None:
            st.subheader(f"Item {item.item_id}")
            render_item(item, model, task, prompt_of, item_readings_found)


def _item(conn: Any, model: str, task: str, items: list[Any]) -> Any:
    """The item to open: the clicked row (any of its cells), else the one the URL names (``item``), else none."""
    cells = getattr(getattr(st.session_state.get("judgments"), "selection", None), "cells", None) or []
    if cells and 0 <= int(cells[0][0]) < len(items):
        return items[int(cells[0][0])]
    wanted = ui.param("item")
    if wanted is None:
        return None
    found = next((i for i in items if i.item_id == wanted), None)
    if found is not None:
        return found
    single = data.drilldown_page(conn, model, task, data.Slice(), limit=1, item_ids=[wanted])
    if not single.items:
        ui.fail(f"unknown item {wanted!r}: {model} has no judgment with that id on {task}")
    return single.items[0]


if __name__ == "__main__":
    render()
