"""Running the explorer's pages under Streamlit's own harness (AppTest) and reading what they show."""

from __future__ import annotations

import pandas as pd
from streamlit.testing.v1 import AppTest

from themis_dagster.explorer import APP

TIMEOUT = 90


def app(script: str | None = None, /, **params: str) -> AppTest:
    """The app run once, then switched to ``script`` with the URL's query ``params``."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    if script is not None:
        at.switch_page(script)
        at.query_params.update(params)
        at.run()
    return at


def problems(at: AppTest) -> list[str]:
    """Tracebacks and error messages on the page."""
    return [str(e.value) for e in at.exception] + [str(e.value) for e in at.error]


def frame(at: AppTest, *columns: str) -> pd.DataFrame:
    """The first table on the page with these columns."""
    for element in at.dataframe:
        if set(columns) <= set(element.value.columns):
            return element.value
    raise AssertionError(f"no table with columns {columns}")


def texts(at: AppTest) -> str:
    """Every text the page shows (markdown, captions, code, infos, dataframes...), joined."""
    parts = [str(e.value) for kind in ("markdown", "caption", "code", "info", "warning", "error", "text", "title",
                                       "header", "subheader", "json") for e in at.get(kind)]  # fmt: skip
    parts += [e.value.to_string() for e in at.dataframe]
    return "\n".join(parts)
