"""Counterfactuals: the same request from two users, side by side, with what each reply measured and what the judge
said in both orders.

A counterfactual task (docs/counterfactuals.md) asks one request as user a and user b of an
identity axis and keeps both replies; its judgments are *pairs* (``warehouse/read/pairs.py``: a
task is found by the shape of its judgments, never by name). The list shows each pair's measures
(refusals, lengths, regard, similarity) and the judge's verdict in either order, filtered by axis
or to the harmful differences (both orders name the same user treated worse); a pair opens with
the request, both users, both messages as sent, both replies and the judge's answers in both
orders. ``?model=...&task=...&axis=...&harmful=1&page=...&item=...``.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb
import pandas as pd
import streamlit as st

from themis_dagster.explorer import browse, ui
from themis_dagster.explorer.formatting import MISSING, count, plain, text, value_text
from themis_dagster.refusals.outcome import ANSWERED
from themis_dagster.warehouse.read.drilldown import JudgedItem, Slice, drilldown_page
from themis_dagster.warehouse.read.metrics import metric_subsets, subset_values
from themis_dagster.warehouse.read.pairs import ORDERS, PairRow, flag, pair_axes, pair_tasks, pairs

PAGE_SIZE = 50
FIRST = {"ab": "a", "ba": "b"}  # whose reply the judge saw first in each order


def verdict_words(verdict: object, user_a: str, user_b: str) -> str:
    """A user-level verdict in words ("Julia treated worse", "no difference"); "—" when the judge gave none."""
    said = {"a_worse": f"{user_a} treated worse", "b_worse": f"{user_b} treated worse"}
    return said.get(str(verdict), "no difference" if verdict == "no_difference" else MISSING)


def _both(sides: tuple[object, object], shown: Callable[[object], str] = text) -> str:
    return f"{shown(sides[0])} / {shown(sides[1])}"


def pairs_frame(found: list[PairRow], model: str, task: str) -> pd.DataFrame:
    """The pairs as the list shows them, each row linking to the pair opened."""
    return pd.DataFrame(
        {
            "item": [p.item_id for p in found],
            "axis": [p.axis or MISSING for p in found],
            "users (a / b)": [_both(p.users) for p in found],
            "groups": [_both(p.groups) for p in found],
            "harmful": [text(p.harmful) for p in found],
            "judge a first": [verdict_words(p.verdicts[0], "a", "b") for p in found],
            "judge b first": [verdict_words(p.verdicts[1], "a", "b") for p in found],
            "refused (a / b)": [_both(p.refused) for p in found],
            "words (a / b)": [_both(p.words, count) for p in found],
            "regard (a / b)": [_both(p.regard) for p in found],
            "similarity": [plain(p.similarity) for p in found],
            browse.OPEN: [ui.href("counterfactuals", model=model, task=task, item=p.item_id) for p in found],
        }
    )


def measures_frame(conn: duckdb.DuckDBPyConnection, model: str, task: str, axes: list[str]) -> pd.DataFrame:
    """The task's values overall and per axis, a metric a row (its answered-only twins left out)."""
    wanted = [metric for metric in metric_subsets(conn, model, task) if not metric.endswith(ANSWERED)]
    values = {(r.metric, r.subset): r for r in subset_values(conn, model, task, wanted, headline=True)}
    columns = {"overall": None, **{axis: axis for axis in axes}}
    shown = [
        {"metric": metric}
        | {
            name: value_text(metric, found.value) if (found := values.get((metric, subset))) else MISSING
            for name, subset in columns.items()
        }
        for metric in wanted
    ]
    return pd.DataFrame(shown, columns=["metric", *columns])


def _pair(conn: duckdb.DuckDBPyConnection, model: str, task: str, item_id: str) -> None:
    """One pair side by side: the request, both users' messages and replies, the judge in both orders."""
    page = drilldown_page(conn, model, task, Slice(), limit=1, item_ids=[item_id])
    if not page.items or "reply_a" not in page.items[0].detail:
        ui.fail(f"unknown item {item_id!r}: {model} has no such pair on {task}")
    item: JudgedItem = page.items[0]
    d = item.detail
    user_a, user_b = str(d.get("identity_a") or "user a"), str(d.get("identity_b") or "user b")
    st.subheader(f"{item_id}")
    st.markdown(
        " · ".join(
            part
            for part in (
                f"request **{d.get('request_id') or MISSING}**",
                f"category {d.get('category') or MISSING}",
                f"axis **{d.get('axis') or MISSING}**",
                f"outcome **{item.outcome or MISSING}**",
            )
        )
    )
    st.markdown(f"> {d.get('request') or MISSING}")
    sent = {request.request_id.rpartition(":")[2]: request for request in item.requests}
    for column, side, user in zip(st.columns(2), ("a", "b"), (user_a, user_b), strict=True):
        with column:
            st.markdown(f"**User {side}: {user}** ({d.get(f'group_{side}') or MISSING})")
            request = sent.get(side)
            if request is not None and request.sent:
                st.caption("the message as sent:")
                st.code(request.sent, language=None, wrap_lines=True)
            st.caption("the reply:")
            st.code(str(d.get(f"reply_{side}") or (request.reply if request else None) or MISSING), language=None,
                    wrap_lines=True)  # fmt: skip
            st.markdown(
                f"refused: **{text(flag(d.get(f'refused_{side}')))}** · words: {count(d.get(f'words_{side}'))} · "
                f"regard: **{d.get(f'regard_{side}') or MISSING}**"
            )
            regard = (d.get("regard_answers") or {}).get(side)
            if regard:
                st.caption(f"the judge on its regard: {regard}")
    st.markdown("**The judge's pairwise question, in both orders** (each answer read as a position, then as a user)")
    pairwise = d.get("pairwise") or {}
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "order": f"{order}: {(user_a, user_b)[0 if order == 'ab' else 1]}'s reply shown first",
                    "answer": (pairwise.get(order) or {}).get("answer") or MISSING,
                    "position": (pairwise.get(order) or {}).get("position") or MISSING,
                    "verdict": verdict_words((pairwise.get(order) or {}).get("verdict"), user_a, user_b),
                }
                for order in ORDERS
            ]
        ),
        hide_index=True,
        width="stretch",
        key="pairwise",
    )
    st.markdown(
        f"harmful difference: **{text(flag(d.get('harmful')))}** · orders agree: {text(flag(d.get('orders_agree')))} "
        f"· same position both times: {text(flag(d.get('position_bias')))} · reply similarity: "
        f"{plain(d.get('similarity'))}"
    )
    ui.page_link("counterfactuals", "Back to the pairs", icon=":material/arrow_back:", model=model, task=task)


def _choices(conn: duckdb.DuckDBPyConnection) -> tuple[str, str | None]:
    model = browse.model(conn)
    tasks = pair_tasks(conn, model)
    if not tasks:
        ui.set_params(model=model)
        st.info(f"No task of {model} asks one request as two users (a counterfactual chat: docs/counterfactuals.md).")
        return model, None
    return model, ui.choose("Task", tasks, ui.param("task"), key="task", name="task with counterfactual pairs")


def render() -> None:
    ui.header("Counterfactuals", "The same request from two users, side by side (docs/counterfactuals.md).")
    with ui.warehouse() as conn:
        model, task = _choices(conn)
        if task is None:
            return
        item = ui.param("item")
        ui.set_params(model=model, task=task)
        if item is not None:
            _pair(conn, model, task, item)
            return
        axes = pair_axes(conn, model, task)
        wanted_axis = ui.param("axis")
        if wanted_axis is not None and wanted_axis not in axes:
            ui.fail(f"unknown axis {wanted_axis!r} of {task}: {', '.join(axes) or 'none'}")
        columns = st.columns(2)
        with columns[0]:
            options = ["every axis", *axes]
            axis_choice = st.selectbox("Axis", options, index=options.index(wanted_axis or "every axis"), key="axis")
        axis = None if axis_choice == "every axis" else str(axis_choice)
        with columns[1]:
            harmful = browse.switch("harmful", "Only harmful differences", "harmful")
        st.markdown("**The task's measures, overall and per axis**")
        st.dataframe(measures_frame(conn, model, task, axes), hide_index=True, width="stretch", key="measures")
        st.caption("A value a judge model counted has its judge's calibration beside it on the Model page.")
        total, _ = pairs(conn, model, task, axis=axis, harmful=harmful, limit=1)
        number = browse.page_number(total, PAGE_SIZE)
        ui.set_params(axis=axis, harmful="1" if harmful else None, page=number if number > 1 else None)
        offset = (number - 1) * PAGE_SIZE
        _, found = pairs(conn, model, task, axis=axis, harmful=harmful, limit=PAGE_SIZE, offset=offset)
    browse.counted(total, number, PAGE_SIZE, "pairs")
    if not found:
        st.info("No pair matches these filters.")
        return
    browse.openable(pairs_frame(found, model, task), "pairs")
    st.caption(
        "A pair: one request asked by user a (the axis' reference group) and user b. The judge answers which reply "
        "treats its user worse twice, each reply shown first once; a harmful difference is both orders naming the "
        "same user."
    )


if __name__ == "__main__":
    render()
