"""Refusals: every reply marked refused, with what marked it (the detector's phrase and rule, or a judge model).

Per task of a model: how many of its judgments were refused and its ``refused_rate`` (with the
refusal judge's kappa and corrected rate where a judge decided them, docs/judges.md); then the
refused replies a page at a time, each with the phrase and rule of the phrase-list detector
(docs/refusals.md) or the judge that called it a refusal, and a link to its item.
"""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from themis_dagster.explorer import data, ui
from themis_dagster.explorer.formatting import MISSING
from themis_dagster.warehouse.read.judged import judged_rows
from themis_dagster.warehouse.read.judgments import RefusedReply, refusal_tasks, refused_replies

PAGE = 25
EVERY_TASK = "(every task)"


def detector(reply: RefusedReply, judges: dict[str, str]) -> str:
    """What marked the reply refused: the phrase list (its rule and language) or the task's refusal judge."""
    if reply.phrase:
        return f"phrase list · {reply.rule or 'rule not recorded'} · {reply.language or '?'}"
    judge = judges.get(reply.task)
    return f"refusal judge {judge}" if judge else "refusal judge"


def replies_table(model: str, replies: list[RefusedReply], judges: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "task": [r.task for r in replies],
            "item": [r.item_id for r in replies],
            "phrase": [r.phrase or MISSING for r in replies],
            "detector": [detector(r, judges) for r in replies],
            "reply": [r.text or MISSING for r in replies],
            "outcome": [r.outcome or MISSING for r in replies],
            "items": [ui.href("drilldown", model=model, task=r.task, item=r.item_id) for r in replies],
        }
    )


def render() -> None:
    ui.header("Refusals", "Every reply the refusal detector (or a task's refusal judge) marked refused, and why.")
    with ui.warehouse() as conn:
        models = data.evaluated_models(conn)
        model = ui.choose("Model", models, ui.evaluated_model_param(conn), key="model", name="model")
        tasks = refusal_tasks(conn, model)
        rates = data.refusals(conn, model)
        judges = {
            task: row.judge
            for (task, metric, subset), row in judged_rows(conn, model).items()
            if metric == "refused_rate" and subset is None
        }
        wanted_task = ui.param("task")
        names = [task for task, _ in tasks]
        if wanted_task is not None and wanted_task not in names:
            ui.fail(
                f"unknown task {wanted_task!r}: {model} has no refused reply on it "
                f"(tasks with refusals: {', '.join(names) or 'none'})"
            )
        ui.set_params(model=model)
        if not rates.empty:
            st.subheader("Refusal rates")
            st.table(rates[rates["metric"] != MISSING], hide_index=True)
        if not tasks:
            st.info(f"No reply of {model} was marked refused.")
            return
        labels = [EVERY_TASK] + [f"{task} ({n:,})" for task, n in tasks]
        index = names.index(wanted_task) + 1 if wanted_task in names else 0
        chosen = st.selectbox("Task", labels, index=index, key="task")
        task = None if chosen == EVERY_TASK else names[labels.index(str(chosen)) - 1]
        ui.set_params(task=task)
        total, _ = refused_replies(conn, model, task, limit=1)
        pages = max(1, math.ceil(total / PAGE))
        page = int(st.number_input(f"Page (of {pages:,})", 1, pages, 1, key="refusals-page"))
        total, replies = refused_replies(conn, model, task, limit=PAGE, offset=(page - 1) * PAGE)
    st.caption(f"{total:,} refused replies" + (f" on {task}" if task else "") + ". A click on a row opens its item.")
    ui.linked_table(
        replies_table(model, replies, judges),
        "refused",
        "items",
        column_config={
            "items": ui.replies_link("item ↗", width=60),
            "reply": st.column_config.TextColumn("reply", width="large"),
        },
    )


if __name__ == "__main__":
    render()
