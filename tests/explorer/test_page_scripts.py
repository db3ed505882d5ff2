"""Streamlit runs each page file as a script and writes any bare expression of it on the page ("magic"): a string
meant as a constant's docstring shows above the page's title. No page file holds one (docstrings aside)."""

from __future__ import annotations

import ast

import pytest

from themis_dagster.explorer import APP
from themis_dagster.explorer.ui import HERE, PAGES


def bare_expressions(source: str) -> list[str]:
    """The statements Streamlit's magic would write: expressions on their own that are no call and no docstring."""
    found = []
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        for index, statement in enumerate(body if isinstance(body, list) else []):
            if not isinstance(statement, ast.Expr) or isinstance(statement.value, ast.Call | ast.Await | ast.Yield):
                continue
            docstring = (
                index == 0 and isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str)
            )
            if not docstring:
                found.append(f"line {statement.lineno}: {ast.unparse(statement)[:80]}")
    return found


@pytest.mark.parametrize("script", [APP.name, *(source for source, _, _ in PAGES.values())])
def test_no_page_script_writes_a_bare_expression_on_its_page(script: str) -> None:
    assert bare_expressions((HERE / script).read_text()) == []


def test_a_bare_string_is_found() -> None:
    assert bare_expressions('"""doc"""\nX = 1\n"""not a docstring"""\n') == ["line 3: 'not a docstring'"]
