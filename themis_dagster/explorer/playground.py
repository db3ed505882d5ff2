"""playground (to be written)."""

from __future__ import annotations

import streamlit as st


def render() -> None:
    st.title("playground")


if __name__ == "__main__":
    render()
