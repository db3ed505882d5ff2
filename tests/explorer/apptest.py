"""Running the explorer's pages under Streamlit's own harness (AppTest) and reading what they show."""

from __future__ import annotations

import pandas as pd
from streamlit.testing.v1 import AppTest

from themis_dagster.explorer import APP
from themis_dagster.explorer.ui import PAGES

TIMEOUT = 90
OPENS_ON = PAGES["leaderboard"][0]  # the page the app opens on (app.py)


def app(script: str | None = None, /, **params: str) -> AppTest:
    """The app opened on ``script`` with the URL's query ``params``, as a browser opens a link: the page the app
    opens on reads them on its first run (run twice, its widgets would keep the first run's values); any other
    page is switched to after that first run."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    if script in (None, OPENS_ON):
        at.query_params.update(params)
        return at.run()
    at.run()
    at.switch_page(script)
    at.query_params.update(params)
    return at.run()


def problems(at: AppTest) -> list[str]:
    """Tracebacks and error messages on the page."""
    return [str(e.value) for e in at.exception] + [str(e.value) for e in at.error]


def frame(at: AppTest, *columns: str) -> pd.DataFrame:
    """The first table on the page (interactive or static) with these columns."""
    for element in [*at.dataframe, *at.table]:
        if set(columns) <= set(element.value.columns):
            return element.value
    raise AssertionError(f"no table with columns {columns}")


def texts(at: AppTest) -> str:
    """Every text the page shows (markdown, captions, code, infos, dataframes...), joined."""
    parts = [str(e.value) for kind in ("markdown", "caption", "code", "info", "warning", "error", "text", "title",
                                       "header", "subheader", "json") for e in at.get(kind)]  # fmt: skip
    parts += [e.value.to_string() for e in [*at.dataframe, *at.table]]
    return "\n".join(parts)
