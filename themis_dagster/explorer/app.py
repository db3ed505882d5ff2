"""The explorer's entry point (``streamlit run``): the pages, their URLs and the navigation menu."""

from __future__ import annotations

import streamlit as st

from themis_dagster.explorer.ui import PAGES


def main() -> None:
    st.set_page_config(page_title="THEMIS explorer", page_icon=":material/balance:", layout="wide")
    pages = [
        st.Page(source, title=title, icon=icon, url_path=url_path, default=url_path == "leaderboard")
        for url_path, (source, title, icon) in PAGES.items()
    ]
    st.navigation(pages, position="top").run()  # the whole width for the tables (1400 px: no column off-screen)


if __name__ == "__main__":
    main()
