"""No import runs up the layers: every ``themis_dagster`` module imports only its own layer and those below.

``LAYERS`` lists them bottom to top; lazy imports inside functions count too. ``partitions`` and
``columnar`` (the evaluation chain's column-at-a-time plumbing) sit between the tasks and the assets;
``backfills`` (what ``themis backfill`` and the explorer both queue) sits on the definitions, and the
command line sits on the explorer (``themis ui`` serves it), so the explorer never imports the command line.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "themis_dagster"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "errors", "exchange", "provenance", "settings"),
    ("registry",),
    ("stats",),
    ("datasets",),
    ("judging",),
    ("runs",),
    ("engines",),
    ("warehouse",),
    ("mitigations",),
    ("perturbations",),
    ("tasks",),
    ("partitions",),
    ("columnar",),
    ("comparisons",),
    ("reports",),
    ("importers",),
    ("resources",),
    ("assets",),
    ("sensors", "schedules"),
    ("definitions",),
    ("backfills",),
    ("explorer",),
    ("cli",),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top(module: str) -> str:
    """The package (or top-level module) of ``themis_dagster`` a module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path: Path) -> list[tuple[str, int]]:
    """The ``themis_dagster`` modules ``path`` imports (anywhere in it, lazily too), with their lines."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                found.append((".".join([*base, *([node.module] if node.module else [])]), node.lineno))
            else:
                found.append((node.module or "", node.lineno))
    return [(name, line) for name, line in found if name.split(".")[0] == "themis_dagster"]


def test_every_package_has_a_layer() -> None:
    tops = {_top(_module(path)) for path in PACKAGE.rglob("*.py")}
    assert tops <= set(RANK), f"give these a layer: {sorted(tops - set(RANK))}"


def test_no_import_runs_up_the_layers() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _module(path)
        for target, line in imports(path):
            if RANK[_top(target)] > RANK[_top(source)]:
                upward.append(f"{source}:{line} imports {target}")
    assert upward == []


def test_the_top_level_holds_at_most_six_loose_modules() -> None:
    """Wiring, settings and the shared contract only; every other concern is a package (docs/dev/code-map.md)."""
    loose = sorted(path.stem for path in PACKAGE.glob("*.py"))
    assert loose == ["__init__", "definitions", "errors", "exchange", "provenance", "settings"]
