"""What every page shares: the pages and their links, query parameters, the warehouse door and error messages.

Links carry their state in query parameters (``model``, ``task``, ``metric``, ``subset``...),
so a link copied from one page opens the same view elsewhere. A value read from a URL is
checked (:mod:`themis_dagster.explorer.data`) before it reaches SQL or an engine.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlencode

import duckdb
import pandas as pd
import streamlit as st

from themis_dagster.errors import ConfigError
from themis_dagster.explorer import data
from themis_dagster.registry.models import ModelSpec, load_registry
from themis_dagster.settings import Settings
from themis_dagster.warehouse.readonly import WarehouseBusy

HERE = Path(__file__).resolve().parent
# url path -> (page file beside app.py, title, icon)
PAGES: dict[str, tuple[str, str, str]] = {
    "leaderboard": ("leaderboard.py", "Leaderboard", ":material/leaderboard:"),
    "model": ("model.py", "Model", ":material/model_training:"),
    "drilldown": ("drilldown.py", "Drill-down", ":material/manage_search:"),
    "judges": ("judges.py", "Judges", ":material/gavel:"),
    "refusals": ("refusals.py", "Refusals", ":material/block:"),
    "figures": ("figures.py", "Figures", ":material/bar_chart:"),
    "counterfactuals": ("counterfactuals.py", "Counterfactuals", ":material/people:"),
    "perturbations": ("perturbations.py", "Perturbations", ":material/swap_horiz:"),
    "compare": ("compare.py", "Compare", ":material/compare_arrows:"),
    "playground": ("playground.py", "Playground", ":material/chat:"),
    "runs": ("runs.py", "Runs", ":material/play_circle:"),
}
MISSING = "—"


def settings() -> Settings:
    """The deployment's settings (``THEMIS_*``), read on every page run: a changed variable needs no restart."""
    return Settings.from_env()


def param(name: str) -> str | None:
    """A query parameter's value; absent or empty reads as None."""
    value = st.query_params.get(name)
    return value if value else None


def href(page: str, **params: object) -> str:
    """A link to ``page`` (relative, so it works behind any base path) with its query parameters."""
    if page not in PAGES:
        raise KeyError(f"unknown page {page!r}")
    shown = {key: str(value) for key, value in params.items() if value is not None and value != ""}
    return f"{page}?{urlencode(shown)}" if shown else page


def page_link(page: str, label: str, *, icon: str | None = None, **params: object) -> None:
    """A link to another page of the app that keeps the query parameters (``st.page_link``)."""
    query = {key: str(value) for key, value in params.items() if value is not None and value != ""}
    st.page_link(PAGES[page][0], label=label, icon=icon, query_params=query or None)


def fail(message: str, hint: str | None = None) -> NoReturn:
    """Show ``message`` as the page's error (and what to do) and stop the page."""
    st.error(message)
    if hint:
        st.markdown(hint)
    st.stop()
    raise AssertionError("st.stop returned")  # pragma: no cover - st.stop raises


def valid_model_id(model: str) -> str:
    """``model`` if it is a valid model id (registry/model_id.py); else the page stops naming it."""
    try:
        return data.check_model_id(model)
    except data.ExplorerError as error:
        fail(str(error))


def evaluated_model_param(conn: duckdb.DuckDBPyConnection, name: str = "model") -> str | None:
    """The query parameter ``name`` (a model id), checked: a malformed id or a model the warehouse has no results for
    stops the page naming it (None: not given)."""
    wanted = param(name)
    if wanted is not None:
        data.check_model(conn, valid_model_id(wanted))
    return wanted


def registered_model_param(models: Mapping[str, ModelSpec]) -> str | None:
    """The ``model`` query parameter, checked: a malformed id or a model not in the registry ``models`` stops the
    page naming it (None: not given)."""
    wanted = param("model")
    if wanted is not None:
        valid_model_id(wanted)
        if wanted not in models:
            fail(f"unknown model {wanted!r}: it is not in the model registry ({', '.join(list(models)[:20])})")
    return wanted


def require_warehouse() -> Path:
    """The warehouse path if it holds results; otherwise a page that says what is wrong and how to fill it."""
    target = settings().warehouse
    status = data.warehouse_status(target)
    if not status.ready:
        st.title("THEMIS explorer")
        st.warning(status.title)
        st.markdown(status.detail)
        st.stop()
    return target


@contextmanager
def warehouse() -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection for one page; a page naming an unknown model or task stops with the error."""
    target = require_warehouse()
    try:
        with data.read_only(target) as conn:
            yield conn
    except WarehouseBusy as error:
        fail("The warehouse is busy: a run is storing results.", f"{error}")
    except data.ExplorerError as error:
        fail(str(error))
    except data.OlderSchemaError as error:
        fail(f"The warehouse {target} is from an older schema.", str(error).replace("WAREHOUSE", str(target)))


def registry() -> dict[str, ModelSpec]:
    """The registered models (models.yaml and discovered checkpoints); an invalid file is shown, not raised."""
    current = settings()
    try:
        return load_registry(current.models_file, current.discovered_models_file)
    except ConfigError as error:
        st.warning(f"The model registry could not be read: {error}")
        return {}


def fmt(value: Any, digits: int = 3) -> str:
    number = data.number(value)
    if number is None:
        return MISSING
    return f"{number:.{digits}f}" if abs(number) >= 10 ** (-digits) or number == 0 else f"{number:.2e}"


def fmt_ci(low: Any, high: Any) -> str:
    if data.number(low) is None or data.number(high) is None:
        return MISSING
    return f"{fmt(low)} – {fmt(high)}"


def choose(label: str, options: list[str], wanted: str | None, *, key: str, name: str) -> str:
    """A selectbox preset from a query parameter; an unknown value in the URL stops the page naming it."""
    if not options:
        fail(f"No {name} to choose from.")
    if wanted is not None and wanted not in options:
        fail(f"unknown {name} {wanted!r}: the warehouse has no results for it ({', '.join(options[:20])})")
    index = options.index(wanted) if wanted in options else 0
    return str(st.selectbox(label, options, index=index, key=key))


def set_params(**params: object) -> None:
    """Mirror the page's state into its URL (links stay shareable); None removes a parameter."""
    for key, value in params.items():
        if value is None or value == "":
            if key in st.query_params:
                del st.query_params[key]
        elif st.query_params.get(key) != str(value):
            st.query_params[key] = str(value)


def open_href(link: str) -> None:
    """Switch to the page an :func:`href` names, with its query parameters."""
    from urllib.parse import parse_qsl

    page, _, query = link.partition("?")
    if page in PAGES:
        st.switch_page(PAGES[page][0], query_params=dict(parse_qsl(query)) or None)


def replies_link(text: str = "replies ↗", **options: Any) -> Any:
    """The ``replies`` column: each row's link to the judgments behind it in the drill-down, shown as ``text``."""
    return st.column_config.LinkColumn("replies", display_text=text, **options)


def linked_table(frame: pd.DataFrame, key: str, link_column: str = "replies", **options: Any) -> None:
    """A table whose rows each link somewhere (``link_column``, an :func:`href`): a click on any cell follows it."""
    event = st.dataframe(
        frame, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-cell", key=key, **options
    )
    cells = getattr(getattr(event, "selection", None), "cells", None) or []
    if cells and 0 <= int(cells[0][0]) < len(frame):
        link = frame.iloc[int(cells[0][0])][link_column]
        if isinstance(link, str):
            open_href(link)


def header(title: str, caption: str | None = None) -> None:
    st.title(title)
    if caption:
        st.caption(caption)


def as_params(mapping: Mapping[str, object]) -> dict[str, str]:
    return {key: str(value) for key, value in mapping.items() if value is not None}
