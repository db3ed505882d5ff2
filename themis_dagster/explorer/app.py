"""The explorer's entry point (``streamlit run``): the pages, their URLs and the navigation menu."""

from __future__ import annotations

import streamlit as st

from themis_dagster.explorer.ui import PAGES

WIDE = '[data-testid="stMainBlockContainer"] { padding-left: 2rem; padding-right: 2rem; max-width: 100%; }'


def main() -> None:
    st.set_page_config(page_title="THEMIS explorer", page_icon=":material/balance:", layout="wide")
    pages = [
        st.Page(source, title=title, icon=icon, url_path=url_path, default=url_path == "leaderboard")
        for url_path, (source, title, icon) in PAGES.items()
    ]
    # the whole width for the tables: navigation on top, narrow margins (1400 px: no column off-screen)
    st.html(f"<style>{WIDE}</style>")
    st.navigation(pages, position="top").run()


if __name__ == "__main__":
    main()
