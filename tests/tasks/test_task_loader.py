"""The task loader: task files that include a base, and the task hooks it resolves and checks (tasks/spec.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from themis_dagster.errors import ConfigError
from themis_dagster.tasks import loader, spec
from themis_dagster.tasks.crows_pairs import utils as crows_pairs
from themis_dagster.tasks.genderbench import direct
from themis_dagster.tasks.genderbench.probe import Probe
from themis_dagster.tasks.langbite import utils as langbite
from themis_dagster.tasks.loader import load_task, task_files, task_names

PACKAGE = Path(spec.__file__).resolve().parents[1]
REPO = PACKAGE.parent

JUDGE = "judge-model"
BASE = """\
dataset: crows_pairs
files: [crows_pairs_anonymized.csv]
request_type: loglikelihood
module: themis_dagster.tasks.crows_pairs.utils
params: {context_source: none, target_delimiter: "", generation: {max_tokens: 8, temperature: 0.5}}
metrics:
  - {name: pct_stereotype, description: base, ideal: 0.5}
  - {name: likelihood_diff, description: nats, ideal: 0.0, higher_is_better: false}
"""


def metric_flags(name: str) -> list[tuple[str, float | None, bool | None, bool]]:
    return [(m.name, m.ideal, m.higher_is_better, m.headline) for m in load_task(name).spec.metrics]


def test_included_declarations_merge_to_the_old_files() -> None:
    prompted = load_task("crows_pairs_prompted").spec
    assert metric_flags("crows_pairs_prompted") == [
        ("pct_stereotype", 0.5, None, True),
        ("likelihood_diff", 0.0, False, True),
    ]
    assert [m.description for m in prompted.metrics] == [
        "share of pairs with ll(sent_more | context) > ll(sent_less | context)",
        "mean |ll(sent_more | context) - ll(sent_less | context)| in nats",
    ]
    assert prompted.params == {"context_source": "prompts_csv", "target_delimiter": " "}
    assert (prompted.dataset, prompted.module, prompted.templates) == (
        "crows_pairs", "themis_dagster.tasks.crows_pairs.utils", None
    )  # fmt: skip
    assert metric_flags("gb_direct") == [
        ("fail_rate", 0.0, False, True),
        ("fail_rate_mark", 1.0, False, True),
        ("undetected_rate_attempts", 0.0, False, False),
    ]
    direct = load_task("gb_direct").spec
    assert (direct.params, direct.dataset, direct.request_type, direct.templates) == (
        {"generation": {"temperature": 1.0, "top_p": 1.0, "max_tokens": 300}}, "genderbench", "chat",
        "genderbench_templates.yaml",
    )  # fmt: skip
    assert metric_flags("gb_hiring_an") == [
        ("diff_acceptance_rate", 0.0, None, True),
        ("diff_regression", 0.0, None, True),
        ("diff_acceptance_rate_mark", 1.0, False, True),
        ("undetected_rate_attempts", 0.0, False, False),
    ]
    hiring = load_task("gb_hiring_an").spec
    assert hiring.params == {"sample_k": 20000, "generation": {"temperature": 1.0, "top_p": 1.0, "max_tokens": 300}}
    assert hiring.metrics[-1].description == "share of emails with neither decision phrase"
    assert load_task("gb_hiring_bloomberg").spec.templates is None  # the base's templates removed


def test_include_only_files_are_not_tasks() -> None:
    assert "gb_base" not in task_names() and all(path.name != "gb_base.yaml" for path in task_files().values())


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_include_merges_params_and_metrics_by_name(tmp_path: Path) -> None:
    write(tmp_path, "bases/base.yaml", BASE)
    write(
        tmp_path,
        "child.yaml",
        "include: bases/base.yaml\ntask: child\ndescription: child\n"
        "params: {target_delimiter: ' ', generation: {max_tokens: 4}}\n"
        "metrics:\n  - {name: extra, ideal: 1.0}\n  - {name: pct_stereotype, description: mine}\n",
    )
    spec = load_task("child", root=tmp_path).spec
    assert spec.params == {
        "context_source": "none",
        "target_delimiter": " ",
        "generation": {"max_tokens": 4, "temperature": 0.5},
    }
    assert [(m.name, m.description, m.ideal, m.higher_is_better) for m in spec.metrics] == [
        ("extra", "", 1.0, None),
        ("pct_stereotype", "mine", 0.5, None),
        ("likelihood_diff", "nats", 0.0, False),
    ]
    assert task_names(tmp_path) == ["child"]


def test_a_missing_include_names_the_file(tmp_path: Path) -> None:
    write(tmp_path, "child.yaml", "include: nowhere.yaml\ntask: child\n")
    with pytest.raises(ConfigError, match=r"child\.yaml: include: nowhere\.yaml not found"):
        load_task("child", root=tmp_path)


def test_an_include_cycle_names_the_files(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "include: b.yaml\ntask: a\n")
    write(tmp_path, "b.yaml", "include: c.yaml\n")
    write(tmp_path, "c.yaml", "include: b.yaml\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: include: cycle .*a\.yaml -> .*b\.yaml -> .*c\.yaml -> .*b\.yaml"):
        load_task("a", root=tmp_path)
    write(tmp_path, "alone/self.yaml", "include: self.yaml\ntask: itself\n")
    with pytest.raises(ConfigError, match=r"self\.yaml: include: cycle"):
        load_task("itself", root=tmp_path / "alone")


def test_an_invalid_merged_declaration_names_the_files_and_field(tmp_path: Path) -> None:
    write(tmp_path, "base.yaml", BASE.replace("request_type: loglikelihood", "request_type: telepathy"))
    write(tmp_path, "child.yaml", "include: base.yaml\ntask: child\ndescription: child\n")
    with pytest.raises(ConfigError, match=r"child\.yaml \(including .*base\.yaml\): request_type: "):
        load_task("child", root=tmp_path)
    write(tmp_path, "listed/other.yaml", "include: [base.yaml]\ntask: other\n")
    with pytest.raises(ConfigError, match=r"other\.yaml: include: expected the name of a task file"):
        load_task("other", root=tmp_path / "listed")


def test_second_opinion_is_declared_by_the_task() -> None:
    crows = load_task("crows_pairs")
    assert (crows.second_opinion, crows.judge_model) == (None, None)
    example = load_task("langbite_example")
    assert example.second_opinion is langbite.SECOND_OPINION
    assert example.judge_model is None  # declared, but no judge named: no second opinion
    assert load_task("langbite_example", {"judge_model": JUDGE}).judge_model == JUDGE


def odd_task(folder: Path, module: str, source: str) -> Path:
    """A crows_pairs-like task in ``folder`` whose module adds ``source`` to crows_pairs' functions."""
    folder.mkdir()
    (folder / f"{module}.py").write_text(
        f"from themis_dagster.tasks.crows_pairs.utils import *  # noqa: F403\n{source}\n"
    )
    (folder / "odd.yaml").write_text(
        "task: odd\ndescription: odd\ndataset: crows_pairs\nfiles: [crows_pairs_anonymized.csv]\n"
        f"request_type: loglikelihood\nmodule: {module}\nmetrics: [{{name: pct_stereotype}}]\n"
    )
    return folder


def test_a_malformed_second_opinion_names_the_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = odd_task(tmp_path / "opinion", "odd_opinion_task", "SECOND_OPINION = 'not a protocol'")
    monkeypatch.syspath_prepend(str(root))
    with pytest.raises(ConfigError, match=r"odd_opinion_task\.SECOND_OPINION"):
        load_task("odd", root=root)


def test_a_probe_module_declares_its_task_functions() -> None:
    task = load_task("gb_direct")
    hooks = task.hooks  # read from the module's TASK object
    assert isinstance(direct.TASK, Probe) and task.module is hooks
    assert (hooks.Params, hooks.load_items, hooks.marks) == (direct.Params, direct.load_items, direct.MARKS)
    assert (hooks.judge, hooks.compute_metrics) == (direct.TASK.judge, direct.TASK.compute_metrics)
    assert hooks.PAIRED_METRICS == direct.TASK.PAIRED_METRICS and not hooks.ITEM_LOCAL
    assert (hooks.SECOND_OPINION, hooks.RESEND, hooks.judge_frame) == (None, None, None)
    crows = load_task("crows_pairs").hooks  # a module that defines its hooks itself
    assert crows.judge is crows_pairs.judge and crows.judge_frame is crows_pairs.judge_frame
    assert crows.PAIRED_METRICS is not None
    assert crows.PAIRED_METRICS.get("pct_stereotype") is crows_pairs.PAIRED_METRICS["pct_stereotype"]
    assert crows.ITEM_LOCAL is True and crows.marks == ()


def test_a_malformed_task_declaration_names_the_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = odd_task(tmp_path / "declared", "odd_declared_task", "TASK = 'not a task'")
    monkeypatch.syspath_prepend(str(root))
    with pytest.raises(
        ConfigError, match=r"task 'odd': odd_declared_task\.TASK: missing the required hook\(s\) Params, "
    ):
        load_task("odd", root=root)


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ("Params = dict", r"\.Params: expected a TaskParams subclass, got type"),
        ("judge = 'a judge'", r"\.judge: expected a function, got str"),
        ("ITEM_LOCAL = 'yes'", r"\.ITEM_LOCAL: expected True or False, got str"),
        ("judge_frame = 3", r"\.judge_frame: expected a function, got int"),
        ("PAIRED_METRICS = ['pct_stereotype']", r"\.PAIRED_METRICS: expected a mapping of metric name"),
        ("RESEND = object()", r"\.RESEND: expected rounds and to_resend methods"),
        ("marks = ('A',)", r"\.marks: expected a sequence of mark definitions"),
        ("PAIRED_METRIC = {}", r"\.PAIRED_METRIC: not a task hook; did you mean PAIRED_METRICS\?"),
        ("ITEMLOCAL = True", r"\.ITEMLOCAL: not a task hook; did you mean ITEM_LOCAL\?"),
        ("SECOND_OPINIONS = None", r"\.SECOND_OPINIONS: not a task hook; did you mean SECOND_OPINION\?"),
    ],
)
def test_a_malformed_hook_names_the_task_module_and_hook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, error: str
) -> None:
    module = f"odd_hook_{abs(hash(source))}"
    root = odd_task(tmp_path / "hook", module, source)
    monkeypatch.syspath_prepend(str(root))
    with pytest.raises(ConfigError, match=rf"^task 'odd': {module}{error}"):
        load_task("odd", root=root)


def test_an_optional_hook_beside_task_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With TASK every hook is read from it: crows_pairs' ITEM_LOCAL beside it would be silently ignored."""
    root = odd_task(tmp_path / "beside", "odd_beside_task", "from themis_dagster.tasks.genderbench.direct import TASK")
    monkeypatch.syspath_prepend(str(root))
    with pytest.raises(ConfigError, match=r"odd_beside_task\.ITEM_LOCAL: declare it on odd_beside_task\.TASK"):
        load_task("odd", root=root)


def test_every_task_loads_its_hooks() -> None:
    for name in task_names():
        hooks = load_task(name).hooks
        assert all(getattr(hooks, hook) is not None for hook in spec.REQUIRED_HOOKS), name


def _contract() -> dict[str, str | None]:
    """The members of ``TaskModule`` in tasks/spec.py, each with its docstring (None: undocumented)."""
    tree = ast.parse(Path(spec.__file__).read_text(encoding="utf-8"))
    (protocol,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "TaskModule"]
    members: dict[str, str | None] = {}
    for index, node in enumerate(protocol.body):
        if isinstance(node, ast.FunctionDef):
            members[node.name] = ast.get_docstring(node)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            after = protocol.body[index + 1] if index + 1 < len(protocol.body) else None
            documented = isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
            members[node.target.id] = str(after.value.value) if documented else None  # type: ignore[union-attr]
    return members


def test_the_contract_lists_every_hook_once_documented() -> None:
    """TaskModule (documented), TaskHooks (resolved), the loader's checks and the authoring guide agree."""
    contract = _contract()
    assert tuple(contract) == spec.HOOKS
    assert all(contract.values()), [hook for hook, doc in contract.items() if not doc]
    assert set(loader._CHECKS) == set(spec.HOOKS)
    assert spec.REQUIRED_HOOKS == ("Params", "load_items", "build_requests", "judge", "compute_metrics")
    guide = (REPO / "docs" / "dev" / "task-authoring.md").read_text(encoding="utf-8")
    assert [hook for hook in (*spec.HOOKS, "TASK") if f"`{hook}`" not in guide] == []


def test_hooks_are_looked_up_only_by_the_loader() -> None:
    """No getattr on a module for a hook outside tasks/loader.py: everyone reads LoadedTask.hooks."""
    hooks = "|".join((*spec.HOOKS, "TASK"))
    lookup = re.compile(rf"""(getattr\(|vars\([^)]*\)\.get\()[^)]*["']({hooks})["']""")
    found = [
        f"{path.relative_to(REPO)}: {match.group(0)}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "loader.py" or path.parent.name != "tasks"
        for match in lookup.finditer(path.read_text(encoding="utf-8"))
    ]
    assert found == []
