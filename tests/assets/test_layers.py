"""No import runs up the layers: every ``themis_dagster`` module imports only its own layer and those below.

``LAYERS`` lists them bottom to top; lazy imports inside functions count too. ``tasks`` is the task
contract (``tasks/*.py``: what a family implements, and the loader that finds families); the services
the families share (refusal detection, the lm-eval bridge) sit on it, the task kinds a family may declare
its ``TASK`` as (``kinds``: multiple choice, lettered chat) on those, and the families
(``tasks/<family>/``) on top. ``judging`` (calibration sets, corrections for a judge's errors) is data and
arithmetic below them all. A family's modules named after a platform role (``assets.py``,
``importer.py``, ``report.py``: ``FAMILY_ROLES``) sit in that role's layer, so a family's Dagster assets
may use the asset factory as the platform's own do, while the platform reaches them only through the
family declarations (``tasks/family.py``). ``evaluation`` (the chain's stages as plain functions over a
task, frames and an answerer) sits on the families, below Dagster's ``partitions`` (which turn the running
key into its typed key) and every reader of its rows, so the assets above only wire it;
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
    ("lm_eval_bridge", "refusals"),
    ("kinds",),
    ("families",),
    ("evaluation",),
    ("partitions",),
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
FAMILY_ROLES = {"assets": "assets", "importer": "importers", "report": "reports"}
"""A family module named after a platform role, and the layer it sits in."""


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top(module: str) -> str:
    """The layer name of a ``themis_dagster`` module: its package (or top-level module), ``families`` for a
    family's folder, a platform role's layer for a family module named after the role."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "tasks" and (PACKAGE / "tasks" / parts[2] / "family.yaml").is_file():
        return FAMILY_ROLES.get(parts[3], "families") if len(parts) > 3 else "families"
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
