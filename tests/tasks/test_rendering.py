"""Task prompts: one strict Jinja2 environment (tasks/rendering.py), used by every family."""

from __future__ import annotations

import re

import jinja2
import pytest
import yaml

from themis_dagster.tasks import rendering
from themis_dagster.tasks.loader import TASKS_DIR

# LangBiTe still builds its own (same settings but Jinja2's default keep_trailing_newline=False) until
# the branch that reroutes its second opinion lands; then these two call rendering.compile_template too.
NOT_YET_SHARED: set[str] = set()


def test_one_strict_environment() -> None:
    env = rendering.environment()
    assert env is rendering.environment()
    assert env.undefined is jinja2.StrictUndefined
    assert env.keep_trailing_newline and not env.autoescape
    assert rendering.compile_template("{{ x }}") is rendering.compile_template("{{ x }}")
    assert rendering.compile_template("a {{ x }}\n").render(x="<b>") == "a <b>\n"  # as written, unescaped
    with pytest.raises(jinja2.UndefinedError, match="'x' is undefined"):
        rendering.render({"t": "{{ x }}"}, "t")
    with pytest.raises(KeyError, match="template 'u' not found; known: t"):
        rendering.template_text({"t": "{{ x }}"}, "u")


def test_no_other_environment_renders_task_prompts() -> None:
    """Only tasks/rendering.py builds a Jinja2 environment under tasks/ (reports/, and a family's own HTML report,
    ``<family>/report.py`` in the reports' layer, keep their HTML ones)."""
    builders = {
        path.relative_to(TASKS_DIR).as_posix()
        for path in TASKS_DIR.rglob("*.py")
        if path.name != "report.py"
        and re.search(r"\bEnvironment\(|jinja2\.Template\(", path.read_text(encoding="utf-8"))
    }
    assert builders == {"rendering.py"} | NOT_YET_SHARED


def task_templates() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted(TASKS_DIR.rglob("*templates.yaml")):
        for name, text in yaml.safe_load(path.read_text(encoding="utf-8")).items():
            found.append((path.relative_to(TASKS_DIR).as_posix(), str(name), str(text)))
    return found


@pytest.mark.parametrize(("file", "name", "text"), task_templates())
def test_no_task_template_ends_with_a_newline(file: str, name: str, text: str) -> None:
    """So keep_trailing_newline=True renders what Jinja2's default (and LangBiTe's environments) render."""
    assert not text.endswith(("\n", "\r")), f"{file}: {name} ends with a newline"


def test_template_sha256_is_the_text_digest() -> None:
    assert rendering.template_sha256("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
