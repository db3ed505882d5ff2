"""Compare: two models on the same items (a checkpoint and its parent by default): paired differences with CIs,
Holm-adjusted p-values and the regression gates, as a table and a chart; the checkpoint trend; the items they
judged differently, side by side.

"Compare" runs the code ``themis compare A B`` runs (``comparisons/store.run_comparisons``: the
comparability checks, the paired tests, Holm over the pair's battery, the gates of
``data/gates.yaml``) on a read-only connection, storing its rows in a scratch database instead of
the warehouse: the explorer writes nothing. Comparisons already stored (by the ``comparisons``
asset or ``themis compare``) are shown at once. A model is never offered as its own baseline.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import pandas as pd
import streamlit as st

from themis_dagster.errors import ConfigError
from themis_dagster.explorer import charts, data, ui
from themis_dagster.explorer.formatting import plain
from themis_dagster.registry.models import ModelSpec


def default_pair(conn: duckdb.DuckDBPyConnection, models: list[str], registry: dict[str, ModelSpec]) -> str:
    """The model to show first: one whose baseline (registry parent, previous checkpoint) is evaluated too."""
    for model in models:
        spec = registry.get(model)
        baseline = data.default_baseline(conn, model, spec.parent if spec else None)
        if baseline in models and baseline != model:
            return model
    return models[0]


def run_compare(
    conn: duckdb.DuckDBPyConnection, model: str, baseline: str
) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """``themis compare model baseline`` on every task both have, its rows stored in a scratch database: the
    comparisons (with Holm's p), the gate verdicts and the notes."""
    from themis_dagster.comparisons.gates import load_gates
    from themis_dagster.comparisons.store import run_comparisons
    from themis_dagster.tasks.loader import load_overrides, load_task
    from themis_dagster.warehouse.schema import ensure_schema

    overrides = load_overrides(ui.settings().task_overrides_file)
    tasks = [load_task(name, overrides.get(name)) for name in data.common_tasks(conn, model, baseline)]
    with duckdb.connect(":memory:") as scratch:
        ensure_schema(scratch)
        view, verdicts, notes = run_comparisons(
            conn, tasks, model, baseline, load_gates(), origin="requested", run_id="explorer", into=scratch
        )
    rows = view.to_pandas()
    gates = verdicts.to_pandas()
    if not gates.empty:
        rows = rows.merge(gates[["task", "metric", "margin", "alpha", "regressed"]], on=["task", "metric"], how="left")
        rows.loc[rows["subset"].notna(), ["margin", "alpha", "regressed"]] = None
    return rows, gates, notes


def verdict_text(row: dict[str, Any]) -> str:
    """A gated regression, a change Holm's p calls significant, or none."""
    if row.get("regressed") is True:
        return "regressed (gate fails)"
    if row.get("regressed") is False:
        return "within gate"
    p = row.get("p_adjusted")
    return "significant change" if isinstance(p, float) and not math.isnan(p) and p <= 0.05 else "no significant change"


def shown_rows(rows: pd.DataFrame, model: str, subsets: bool) -> pd.DataFrame:
    """The comparisons as the page lists them: formatted numbers, a verdict, a link to the model's items."""
    kept = rows if subsets else rows[rows["subset"].isna()]
    records = kept.to_dict("records")
    return pd.DataFrame(
        {
            "task": kept["task"],
            "metric": kept["metric"],
            "subset": kept["subset"].fillna("—"),
            "verdict": [verdict_text(r) for r in records],
            "difference": [plain(r["difference"], 4) for r in records],
            "95% CI": [f"{plain(r['ci_low'], 4)} – {plain(r['ci_high'], 4)}" for r in records],
            "p (Holm)": [plain(r["p_adjusted"], 4) for r in records],
            "p": [plain(r["p_value"], 4) for r in records],
            "model": [plain(r["value"]) for r in records],
            "baseline": [plain(r["baseline_value"]) for r in records],
            "pairs": [f"{int(r['n_pairs']):,}" for r in records],
            "test": kept["test"],
            "items": [
                ui.href(
                    "drilldown",
                    model=model,
                    task=r["task"],
                    metric=r["metric"],
                    subset=None if pd.isna(r["subset"]) else r["subset"],
                )
                for r in records
            ],
        }
    ).reset_index(drop=True)


def chart_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The headline differences a chart draws."""
    kept = rows[rows["subset"].isna() & rows["difference"].notna()]
    return pd.DataFrame(
        {
            "label": kept["task"] + " · " + kept["metric"],
            "difference": kept["difference"].astype(float),
            "ci_low": kept["ci_low"].astype(float),
            "ci_high": kept["ci_high"].astype(float),
            "p_adjusted": kept["p_adjusted"].astype(float),
            "significant": ["yes" if p <= 0.05 else "no" for p in kept["p_adjusted"].fillna(1.0)],
            "test": kept["test"],
            "n_pairs": kept["n_pairs"],
        }
    )


def _pick(conn: duckdb.DuckDBPyConnection, registry: dict[str, ModelSpec]) -> tuple[str, str, str]:
    models = data.evaluated_models(conn)
    if len(models) < 2:
        ui.fail("Only one model has results: there is nothing to compare it with.", data.FILL_HINT)
    wanted = ui.evaluated_model_param(conn)
    cols = st.columns(2)
    with cols[0]:
        model = ui.choose("Model", models, wanted or default_pair(conn, models, registry), key="model", name="model")
    spec = registry.get(model)
    default = data.default_baseline(conn, model, spec.parent if spec else None)
    wanted_baseline = ui.evaluated_model_param(conn, "baseline")
    if wanted_baseline == model:
        ui.fail(f"{model} cannot be compared with itself: choose another baseline.")
    others = [m for m in models if m != model]
    preset = wanted_baseline or (default if default in others else None)
    with cols[1]:
        baseline = ui.choose("Baseline", others, preset, key="baseline", name="baseline")
    why = (
        "its registry parent"
        if spec and spec.parent == baseline
        else "the checkpoint before it"
        if default == baseline
        else "chosen"
    )
    return model, baseline, why


def render() -> None:
    ui.header(
        "Compare",
        "Two models on the same items: paired differences with CIs, Holm-adjusted p-values, "
        "regression gates, the checkpoint trend and the items they judged differently.",
    )
    registry = ui.registry()
    with ui.warehouse() as conn:
        model, baseline, why = _pick(conn, registry)
        ui.set_params(model=model, baseline=baseline)
        st.caption(f"Baseline **{baseline}** ({why}).")
        stored = data.comparisons(conn, model, baseline)
        key = f"compared:{model}:{baseline}"
        label = "Compare again" if stored is not None and not stored.empty else "Compare"
        if st.button(
            label,
            type="primary",
            key="compare-go",
            help=f"runs `themis compare {model} {baseline}` here, without storing anything",
        ):
            try:
                with st.spinner(f"Comparing {model} with {baseline} on every task both have..."):
                    st.session_state[key] = run_compare(conn, model, baseline)
            except (ConfigError, ValueError) as error:
                st.error(f"The comparison cannot run: {error}")
        computed = st.session_state.get(key)
        trend = data.checkpoint_trend(conn, model)
        tasks = data.common_tasks(conn, model, baseline)
        _comparisons(model, baseline, stored, computed)
        _trend(trend, model)
        _discordant(conn, model, baseline, tasks)


def _comparisons(model: str, baseline: str, stored: pd.DataFrame | None, computed: Any) -> None:
    st.header("Paired comparisons")
    if computed is not None:
        rows, _, notes = computed
        st.caption("Computed here, as `themis compare` computes (nothing stored).")
        for note in notes:
            st.info(note)
    elif stored is not None and not stored.empty:
        rows = stored
        st.caption("As stored by the `comparisons` asset or `themis compare`.")
    else:
        st.info(f"No comparison of {model} with {baseline} is stored yet: press Compare.")
        return
    if rows.empty:
        st.info("No metric of these tasks is compared (no task declares a paired measure for them).")
        return
    drawn = chart_rows(rows)
    if not drawn.empty:
        st.altair_chart(charts.with_rows(charts.differences(drawn), len(drawn)))
        st.caption(
            "Dot: the difference (model − baseline); bar: its 95% CI (paired bootstrap); red: Holm-adjusted "
            "p ≤ 0.05 over every comparison of the pair."
        )
    regressed = int((rows.get("regressed") == True).sum()) if "regressed" in rows else 0  # noqa: E712 - NULL: no gate
    st.caption(f"{len(rows):,} comparisons; {regressed} gated regression(s).")
    subsets = st.toggle("Subsets too", key="compare-subsets")
    ui.linked_table(
        shown_rows(rows, model, subsets),
        "comparisons",
        "items",
        column_config={"items": ui.replies_link("items ↗", width=70)},
    )


def _trend(trend: pd.DataFrame | None, model: str) -> None:
    st.header("Checkpoint trend")
    if trend is None or trend.empty:
        st.info(f"{model} is not part of a checkpoint family with a trend.")
        return
    keys = sorted({f"{t} · {m}" for t, m in zip(trend["task"], trend["metric"], strict=True)})
    chosen = st.selectbox("Metric", keys, key="trend-metric")
    task, metric = str(chosen).split(" · ", 1)
    points = trend[(trend["task"] == task) & (trend["metric"] == metric)]
    st.altair_chart(charts.trend(points, None))
    st.dataframe(
        pd.DataFrame(
            {
                "step": points["step"],
                "model": points["model"],
                "value": points["value"].map(plain),
                "95% CI": [
                    f"{plain(a)} – {plain(b)}" for a, b in zip(points["ci_low"], points["ci_high"], strict=True)
                ],
                "change": points["change_vs_previous"].map(lambda v: plain(v, 4)),
                "p (Holm) vs previous": points["p_adjusted_vs_previous"].map(lambda v: plain(v, 4)),
            }
        ),
        hide_index=True,
        key="trend",
    )


def _discordant(conn: duckdb.DuckDBPyConnection, model: str, baseline: str, tasks: list[str]) -> None:
    st.header("Items judged differently")
    if not tasks:
        st.info(f"{model} and {baseline} have no task judged in common.")
        return
    wanted = ui.param("task")
    task = ui.choose("Task", tasks, wanted if wanted in tasks else None, key="task", name="task")
    total, _ = data.discordant(conn, model, baseline, task, limit=1)
    pages = max(1, math.ceil(total / 25))
    page = int(st.number_input(f"Page (of {pages})", 1, pages, 1, key="discordant-page"))
    total, pairs = data.discordant(conn, model, baseline, task, limit=25, offset=(page - 1) * 25)
    st.caption(f"{total:,} items judged differently on {task}.")
    if pairs.empty:
        st.info("The two models judged every common item alike.")
        return
    shown = pairs.assign(model_score=pairs["model_score"].map(plain), baseline_score=pairs["baseline_score"].map(plain))
    st.dataframe(shown.fillna("—"), hide_index=True, width="stretch", key="discordant")
    for row in pairs.head(10).itertuples(index=False):
        with st.expander(f"{row.item_id} · {row.model_outcome} vs {row.baseline_outcome}"):
            left, right = st.columns(2)
            left.markdown(f"**{model}**: {row.model_outcome} (score {plain(row.model_score)})")
            left.code(str(row.model_reply or ""), language=None, wrap_lines=True)
            right.markdown(f"**{baseline}**: {row.baseline_outcome} (score {plain(row.baseline_score)})")
            right.code(str(row.baseline_reply or ""), language=None, wrap_lines=True)


if __name__ == "__main__":
    render()
