"""Compare: a model against its baseline (by default its registry parent): comparisons, gates, trend, discordant items.

The comparisons are the ones the ``comparisons`` asset (or ``themis compare``) stored, with
Holm's adjusted p and the gates' verdicts; the discordant items are read from both models'
judgments, side by side with both replies.
"""

from __future__ import annotations

import math

import streamlit as st

from themis_dagster.explorer import data, ui


def render() -> None:
    ui.header(
        "Compare",
        "A model against its baseline on the same items: paired tests, Holm-adjusted p-values, "
        "regression gates, the checkpoint trend and the items they judged differently.",
    )
    registry = ui.registry()
    with ui.warehouse() as conn:
        models = data.evaluated_models(conn)
        wanted = ui.param("model")
        if wanted is not None:
            data.check_model(conn, ui.valid_model_id(wanted))
        cols = st.columns(2)
        with cols[0]:
            model = ui.choose("Model", models, wanted, key="model", name="model")
        spec = registry.get(model)
        default = data.default_baseline(conn, model, spec.parent if spec else None)
        wanted_baseline = ui.param("baseline") or default
        if wanted_baseline is not None:
            data.check_model(conn, ui.valid_model_id(wanted_baseline))
        others = [m for m in models if m != model] or models
        with cols[1]:
            baseline = ui.choose(
                "Baseline",
                others,
                wanted_baseline if wanted_baseline in others else None,
                key="baseline",
                name="baseline",
            )
        if wanted_baseline is not None and wanted_baseline not in others:
            st.info(f"{model} is its own baseline here: choose another model.")
        ui.set_params(model=model, baseline=baseline)
        rows = data.comparisons(conn, model, baseline)
        trend = data.checkpoint_trend(conn, model)
        tasks = data.common_tasks(conn, model, baseline)
        why = (
            "its registry parent"
            if spec and spec.parent == baseline
            else ("the checkpoint before it" if default == baseline else "chosen")
        )
        st.caption(f"Baseline **{baseline}** ({why}).")

        st.header("Paired comparisons")
        if rows is None:
            st.info("This warehouse has no comparison views yet: materialize the `comparisons` asset.")
        elif rows.empty:
            st.info(
                f"No comparison of {model} with {baseline} is stored. Run "
                f"`.venv/bin/themis compare {model} {baseline}` (or the `comparisons` asset) to compute one; "
                "this page only reads."
            )
        else:
            regressed = int((rows["regressed"] == True).sum())  # noqa: E712 - NULL (no gate) is not False
            st.caption(
                f"{len(rows)} comparisons; {regressed} gated regression(s). Holm's adjustment runs over every "
                "comparison of the pair."
            )
            first = ["task", "subset", "metric", "verdict", "difference", "ci_low", "ci_high", "p_adjusted", "p_value"]
            shown = rows[first + [c for c in rows.columns if c not in first]].assign(
                replies=[
                    ui.href("drilldown", model=model, task=t, metric=m, subset=s)
                    for t, m, s in zip(rows["task"], rows["metric"], rows["subset"], strict=True)
                ]
            )
            ui.linked_table(
                shown,
                "comparisons",
                column_config={
                    "replies": ui.replies_link(),
                    "p_value": st.column_config.NumberColumn("p", format="%.4f"),
                    "p_adjusted": st.column_config.NumberColumn("p (Holm)", format="%.4f"),
                },
            )

        st.header("Checkpoint trend")
        if trend is None or trend.empty:
            st.info(f"{model} is not part of a checkpoint family with a trend.")
        else:
            st.dataframe(trend, hide_index=True, width="stretch", key="trend")
            metric_keys = sorted({f"{t} · {m}" for t, m in zip(trend["task"], trend["metric"], strict=True)})
            chosen = st.selectbox("Plot", metric_keys, key="trend-metric")
            task_name, metric_name = str(chosen).split(" · ", 1)
            points = trend[(trend["task"] == task_name) & (trend["metric"] == metric_name)]
            st.line_chart(points.set_index("step")[["value", "ci_low", "ci_high"]])

        st.header("Discordant items")
        if not tasks:
            st.info(f"{model} and {baseline} have no task judged in common.")
            return
        task = ui.choose(
            "Task", tasks, ui.param("task") if ui.param("task") in tasks else None, key="task", name="task"
        )
        total, _ = data.discordant(conn, model, baseline, task, limit=1)
        pages = max(1, math.ceil(total / 25))
        page = int(st.number_input(f"Page (of {pages})", 1, pages, 1, key="discordant-page"))
        total, pairs = data.discordant(conn, model, baseline, task, limit=25, offset=(page - 1) * 25)
    st.caption(f"{total:,} items judged differently on {task}.")
    if pairs.empty:
        st.info("The two models judged every common item alike.")
        return
    st.dataframe(pairs, hide_index=True, width="stretch", key="discordant")
    for row in pairs.head(10).itertuples(index=False):
        with st.expander(f"{row.item_id} · {row.model_outcome} vs {row.baseline_outcome}"):
            left, right = st.columns(2)
            left.markdown(f"**{model}**: {row.model_outcome} (score {ui.fmt(row.model_score)})")
            left.code(str(row.model_reply or ""), language=None, wrap_lines=True)
            right.markdown(f"**{baseline}**: {row.baseline_outcome} (score {ui.fmt(row.baseline_score)})")
            right.code(str(row.baseline_reply or ""), language=None, wrap_lines=True)


if __name__ == "__main__":
    render()
