"""Drill-down: from a metric (and subset) to its judgments, each with the prompts as sent and the raw replies.

Filters by item subset, outcome and parse status; a page at a time (``LIMIT``/``OFFSET`` in SQL,
bound parameters). Every request has a link that asks it again in the playground.
"""

from __future__ import annotations

import math

import streamlit as st

from themis_dagster.explorer import data, ui
from themis_dagster.warehouse.read.metrics import metric_subsets

ALL = "(every judgment of the task)"
HEADLINE = "(headline: no subset)"
ANY = "(any)"
PARSED = {"any": None, "parsed": True, "could not be interpreted": False}


def _parsed_param(value: str | None) -> bool | None:
    if value is None:
        return None
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    ui.fail(f"unknown parsed filter {value!r}: use true or false")


def render() -> None:
    ui.header("Drill-down", "The judgments behind a metric: each prompt as sent, the raw reply, the parsed outcome.")
    with ui.warehouse() as conn:
        wanted_model = ui.param("model")
        if wanted_model is not None:
            data.check_model(conn, ui.valid_model_id(wanted_model))
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
        where = data.slice_of(conn, model, task, subset)
        item_subsets, outcomes = data.drilldown_choices(conn, model, task, where)

        filters = st.columns(4)
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
            wanted_size = int(ui.param("size") or 25)
            sizes = list(data.PAGE_SIZES)
            size = int(
                st.selectbox(
                    "Per page", sizes, index=sizes.index(wanted_size) if wanted_size in sizes else 1, key="size"
                )
            )
        outcome = labels[str(outcome_label)]
        parsed = PARSED[str(parsed_label)]
        chosen_item_subset = None if item_subset == ANY else item_subset
        total = data.drilldown_total(
            conn, model, task, where, item_subset=chosen_item_subset, outcome=outcome, parsed=parsed
        )
        pages = max(1, math.ceil(total / size))
        try:
            wanted_page = int(ui.param("page") or 1)
        except ValueError:
            ui.fail(f"unknown page {ui.param('page')!r}: a page number is a whole number")
        page_number = int(
            st.number_input(
                f"Page (of {pages:,})", min_value=1, max_value=pages, value=min(max(wanted_page, 1), pages), key="page"
            )
        )
        page = data.drilldown_page(
            conn,
            model,
            task,
            where,
            item_subset=chosen_item_subset,
            outcome=outcome,
            parsed=parsed,
            limit=size,
            offset=(page_number - 1) * size,
        )
        value = None if metric == ALL else data.check_metric(conn, model, task, metric, subset)
    ui.set_params(
        model=model,
        task=task,
        metric=None if metric == ALL else metric,
        subset=subset,
        item_subset=chosen_item_subset,
        outcome=outcome,
        parsed=None if parsed is None else str(parsed).lower(),
        size=size if size != 25 else None,
        page=page_number if page_number > 1 else None,
    )

    if metric != ALL:
        st.markdown(f"**{task} · {metric}{f' · {subset}' if subset else ''}** = {ui.fmt(value)}")
    if page.note:
        st.info(page.note)
    if not page.items:
        st.info("No judgment matches these filters.")
        return
    start = page.offset + 1
    st.caption(f"Judgments {start:,}–{page.offset + len(page.items):,} of {page.total:,} (ordered by item id).")
    st.dataframe(
        page.frame(),
        hide_index=True,
        width="stretch",
        key="judgments",
        column_config={
            "prompt": st.column_config.TextColumn("prompt as sent", width="large"),
            "reply": st.column_config.TextColumn("raw reply", width="large"),
            "score": st.column_config.NumberColumn("score", format="%.3f"),
            "logprob": st.column_config.NumberColumn("logprob", format="%.3f"),
        },
    )
    has_reasoning = any(r.reasoning for item in page.items for r in item.requests)
    for item in page.items:
        title = f"{item.item_id} · {item.outcome or ui.MISSING} · score {ui.fmt(item.score)}"
        with st.expander(title + ("" if item.parsed else " · could not be interpreted")):
            st.caption(f"subset {item.subset or ui.MISSING} · {len(item.requests)} request(s)")
            for request in item.requests:
                kind = request.request_type or "request"
                st.markdown(
                    f"**{request.request_id}** · {kind}"
                    + (f" · template {request.template}" if request.template else "")
                )
                if request.request_type == "loglikelihood":
                    st.text("context:")
                    st.code(request.context or "(empty: after the prefix token)", language=None, wrap_lines=True)
                    st.text("continuation (scored):")
                    st.code(request.continuation or "", language=None, wrap_lines=True)
                    st.markdown(f"logprob **{ui.fmt(request.logprob)}**, greedy {request.is_greedy}")
                else:
                    st.text("prompt as sent:")
                    st.code(request.sent or "", language=None, wrap_lines=True)
                    if has_reasoning and request.reasoning:
                        st.text("reasoning:")
                        st.code(request.reasoning, language=None, wrap_lines=True)
                    st.text("raw reply:")
                    st.code(request.reply if request.reply is not None else "", language=None, wrap_lines=True)
                if request.error:
                    st.error(f"engine error: {request.error}")
                ui.page_link(
                    "playground",
                    "Ask again in the playground",
                    icon=":material/replay:",
                    model=model,
                    task=task,
                    request=request.request_id,
                )


if __name__ == "__main__":
    render()
