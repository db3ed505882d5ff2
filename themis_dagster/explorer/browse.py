"""What the Figures, Counterfactuals and Perturbations pages pick from their URL and how they list: the model, a
page of a long list, a yes/no filter, a table whose rows open one entry.

Each value read from the URL is checked before any query takes it; a bad one stops the page with a
message that names it (``ui.fail``), never a traceback.
"""

from __future__ import annotations

import math

import duckdb
import pandas as pd
import streamlit as st

from themis_dagster.explorer import data, ui
from themis_dagster.tasks.family import figures_of
from themis_dagster.warehouse.read.pairs import pair_tasks
from themis_dagster.warehouse.read.perturbed import variants

OPEN = "open"


def model(conn: duckdb.DuckDBPyConnection) -> str:
    """The model the page shows: the URL's ``model`` (a valid id the warehouse has results for), else the first."""
    wanted = ui.param("model")
    if wanted is not None:
        data.check_model(conn, ui.valid_model_id(wanted))
    return ui.choose("Model", data.evaluated_models(conn), wanted, key="model", name="model")


def figure_tasks(conn: duckdb.DuckDBPyConnection, model: str) -> list[str]:
    """The model's tasks whose family declares figures for them (``tasks/figures.py``)."""
    return [task for task in data.evaluated_tasks(conn, model) if figures_of(task)]


def related(conn: duckdb.DuckDBPyConnection, model: str) -> list[tuple[str, str, str]]:
    """(page, label, icon) of each of these pages that has something of ``model`` to show, for the Model page."""
    found = []
    if figure_tasks(conn, model):
        found.append(("figures", "Its figures", ":material/bar_chart:"))
    if pair_tasks(conn, model):
        found.append(("counterfactuals", "Its counterfactual pairs", ":material/people:"))
    if variants(conn, model):
        found.append(("perturbations", "Its perturbed variants", ":material/swap_horiz:"))
    return found


def page_number(total: int, size: int) -> int:
    """The URL's ``page`` (1 by default) among the pages of ``total`` rows, ``size`` a page."""
    wanted = ui.param("page") or "1"
    pages = max(1, math.ceil(total / size))
    if not wanted.isdigit() or not 1 <= int(wanted) <= pages:
        ui.fail(f"unknown page {wanted!r}: pages 1 to {pages}")
    return int(wanted)


def switch(name: str, label: str, key: str, default: bool = False) -> bool:
    """A yes/no filter preset from the URL's ``name`` (1 or 0)."""
    wanted = ui.param(name)
    if wanted not in (None, "0", "1"):
        ui.fail(f"unknown {name} filter {wanted!r}: 1 or 0")
    return bool(st.toggle(label, value=default if wanted is None else wanted == "1", key=key))


def counted(total: int, number: int, size: int, noun: str) -> None:
    """How many rows the filters keep, and which page of them this is."""
    st.markdown(f"**{total:,} {noun}**" + (f" · page {number} of {math.ceil(total / size)}" if total else ""))


def openable(frame: pd.DataFrame, key: str) -> None:
    """A table whose rows each open their entry (the ``open`` column, an ``ui.href``), by a click on any cell."""
    config = {OPEN: st.column_config.LinkColumn(OPEN, display_text="open ↗", width=70)}
    ui.linked_table(frame, key, link_column=OPEN, column_config=config)
