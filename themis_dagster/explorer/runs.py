"""Runs: recent runs and materializations with links into Dagster's UI; launch an evaluation and follow it.

A launch queues the same asset backfill ``themis backfill`` submits (the evaluation chain of
one registered model on the chosen tasks, one run per partition), for the Dagster daemon
(``make dev``) to run; nothing is written to the warehouse here. Dagster's UI is linked at
``THEMIS_DAGSTER_URL`` (default http://127.0.0.1:3000).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import pandas as pd
import streamlit as st

from themis_dagster.explorer import ui
from themis_dagster.explorer.engine_slot import dagster_instance

DEFAULT_DAGSTER_URL = "http://127.0.0.1:3000"
BACKFILL_TAG = "dagster/backfill"
PARTITION_TAG = "dagster/partition"


def dagster_url() -> str:
    return (os.environ.get("THEMIS_DAGSTER_URL") or DEFAULT_DAGSTER_URL).rstrip("/")


def _when(timestamp: float | None) -> str | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S")


def recent_runs(instance: Any, limit: int = 25, backfill: str | None = None) -> pd.DataFrame:
    """The latest runs (of one backfill), each with a link to its page in Dagster's UI."""
    from dagster import RunsFilter

    filters = RunsFilter(tags={BACKFILL_TAG: backfill}) if backfill else None
    rows = []
    for record in instance.get_run_records(filters=filters, limit=limit):
        run = record.dagster_run
        rows.append(
            {
                "run": f"{dagster_url()}/runs/{run.run_id}",
                "status": run.status.value,
                "job": run.job_name,
                "partition": run.tags.get(PARTITION_TAG),
                "backfill": run.tags.get(BACKFILL_TAG),
                "started": _when(record.start_time),
                "ended": _when(record.end_time),
            }
        )
    return pd.DataFrame(rows, columns=["run", "status", "job", "partition", "backfill", "started", "ended"])


def recent_materializations(instance: Any, asset: str = "bias_metrics", limit: int = 25) -> pd.DataFrame:
    """The latest materializations of an asset, linked to the asset's partition and run in Dagster's UI."""
    from dagster import AssetKey

    rows = []
    for record in instance.fetch_materializations(AssetKey(asset), limit=limit).records:
        partition = record.partition_key
        rows.append(
            {
                "partition": partition,
                "when": _when(record.timestamp),
                "asset": f"{dagster_url()}/assets/{asset}" + (f"?partition={quote(partition)}" if partition else ""),
                "run": f"{dagster_url()}/runs/{record.run_id}",
                "model": ui.href("model", model=partition.split("|")[0]) if partition and "|" in partition else None,
            }
        )
    return pd.DataFrame(rows, columns=["partition", "when", "asset", "run", "model"])


def launch(instance: Any, model: str, tasks: list[str]) -> str:
    """Validate, register the model partition and queue the backfill ``themis backfill`` queues; its id."""
    from themis_dagster.backfills import queue_evaluation
    from themis_dagster.tasks.loader import validate_plan

    ui.valid_model_id(model)
    validate_plan(ui.settings(), model, tasks)
    return queue_evaluation(instance, model, tasks, title=f"evaluate {model} on {len(tasks)} task(s) (explorer)")


def progress(instance: Any, backfill_id: str) -> tuple[str, pd.DataFrame]:
    """The backfill's status and its runs so far."""
    backfill = instance.get_backfill(backfill_id)
    status = "unknown backfill" if backfill is None else str(backfill.status.value)
    return status, recent_runs(instance, limit=200, backfill=backfill_id)


LINKS = {
    "run": st.column_config.LinkColumn("run", display_text=r"/runs/(.{8})"),
    "asset": st.column_config.LinkColumn("asset", display_text="in Dagster ↗"),
    "model": st.column_config.LinkColumn("model", display_text=r"model=(.*)$"),
}


@st.fragment(run_every=5)
def follow(backfill_id: str, planned: int) -> None:
    instance = dagster_instance()
    status, runs = progress(instance, backfill_id)
    finished = int(runs["status"].isin(["SUCCESS", "FAILURE", "CANCELED"]).sum()) if not runs.empty else 0
    st.markdown(f"Backfill [{backfill_id}]({dagster_url()}/runs/b/{backfill_id}?tab=runs): **{status}**")
    st.progress(min(finished / planned, 1.0) if planned else 0.0, text=f"{finished} of {planned} partition run(s) done")
    if runs.empty:
        st.caption("No run launched yet: the Dagster daemon launches them (`make dev` starts it).")
    else:
        st.dataframe(runs, hide_index=True, width="stretch", column_config=LINKS)


def render() -> None:
    ui.header("Runs", f"Recent runs and materializations, with links into Dagster's UI ({dagster_url()}).")
    try:
        instance = dagster_instance()
    except Exception as error:  # noqa: BLE001 - no instance is a message, not a crash
        ui.fail(f"The Dagster instance could not be opened: {type(error).__name__}: {error}")
    st.header("Launch an evaluation")
    models = ui.registry()
    from themis_dagster.tasks.loader import task_names

    wanted = ui.registered_model_param(models)
    with st.form("launch"):
        model = ui.choose("Registered model", list(models), wanted, key="launch-model", name="model")
        tasks = st.multiselect("Tasks", task_names(), key="launch-tasks")
        submitted = st.form_submit_button("Queue the backfill", type="primary")
    if submitted:
        if not tasks:
            st.warning("Choose at least one task.")
        else:
            try:
                st.session_state["backfill"] = (launch(instance, model, list(tasks)), len(tasks))
            except Exception as error:  # noqa: BLE001 - a bad plan is named to the reader
                st.error(f"Not launched: {error}")
    if "backfill" in st.session_state:
        backfill_id, planned = st.session_state["backfill"]
        follow(backfill_id, planned)

    st.header("Recent runs")
    st.dataframe(recent_runs(instance), hide_index=True, width="stretch", column_config=LINKS, key="runs")
    st.header("Recent materializations of bias_metrics")
    st.dataframe(
        recent_materializations(instance), hide_index=True, width="stretch", column_config=LINKS, key="materializations"
    )


if __name__ == "__main__":
    render()
