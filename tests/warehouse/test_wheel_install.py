"""The built wheel carries what a checkout has: installed on its own, ``themis sql`` reads the analyst views.

The views are package data (``themis_dagster/warehouse/sql``), as every family's ``family.yaml`` is
(the warehouse creates the tables a family declares there). The wheel is built from a copy
of the package (no network, no build isolation) and installed with ``--no-deps`` into a fresh
venv that sees the project's installed dependencies through one plain path line in a ``.pth``
file: that adds the dependencies' folder to ``sys.path`` without running the ``.pth`` files in
it, so the editable install's import hook (which points at the repository) stays off, and the
package imported is the installed one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Run by the fresh venv's Python: a small warehouse written through the installed package's own code.
BUILD_WAREHOUSE = """
import sys
from datetime import datetime

import duckdb

import themis_dagster
from themis_dagster.warehouse import generations, schema
from themis_dagster.warehouse.frames import rows_frame
from themis_dagster.warehouse.partitions import Write, partition_scope, replace_rows

model, task, now = "m", "crows_pairs", datetime(2024, 1, 1)
metrics = [
    {"model": model, "task": task, "subset": subset, "metric": "pct_stereotype", "value": value,
     "ci_low": value - 0.1, "ci_high": value + 0.1, "n": 10, "materialized_at": now, "run_id": "r1"}
    for subset, value in ((None, 0.6), ("age", 0.8))
]
with duckdb.connect(sys.argv[1]) as conn:
    schema.ensure_schema(conn)
    writes, upstream, scope = [], None, partition_scope(model, task)
    for stage in generations.STAGES:  # one complete chain: every stage empty but the metrics
        upstream, lineage = generations.record(stage, model, task, upstream, run_id="r1")
        frame = rows_frame(stage, metrics if stage == "metric_values" else [])
        writes += [Write(stage, frame, scope), Write("stage_generations", lineage, scope | {"stage": stage})]
    replace_rows(conn, writes)
print(themis_dagster.__file__)
print(*(str(view) for view in schema.view_files()), sep="\\n")
"""


def _run(command: list[str | Path], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_installed_wheel_serves_the_views(tmp_path: Path) -> None:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("PYTHON", "THEMIS_", "PIP_"))}
    env |= {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INDEX": "1"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    # The wheel, built from a copy so the build's folders (build/, *.egg-info) never land in the repository.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(REPO / "themis_dagster", source / "themis_dagster", ignore=shutil.ignore_patterns("__pycache__"))
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip"]
    _run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", wheels, source], elsewhere, env)
    (wheel,) = wheels.glob("themis_dagster-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert {"themis_dagster/warehouse/sql/views.sql", "themis_dagster/warehouse/sql/views_comparisons.sql"} <= set(
            archive.namelist()
        )
        declarations = {
            f"themis_dagster/tasks/{path.parent.name}/family.yaml"
            for path in (REPO / "themis_dagster" / "tasks").glob("*/family.yaml")
        }
        assert declarations and declarations <= set(archive.namelist()), "every family's family.yaml is package data"

    # A fresh venv (no pip of its own: this pip installs into it), then the dependencies made visible.
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], elsewhere, env)
    python = venv / "bin" / "python"
    _run([*pip, "--python", python, "install", "--no-deps", "--no-index", "-q", wheel], elsewhere, env)
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site_packages = Path(_run([python, "-c", purelib], elsewhere, env).strip())
    dependencies = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    # the project's own venv may sit inside the checkout (.venv): what matters is that it holds no copy of the
    # package (the editable install is a path hook, not processed from a plain .pth line)
    assert not any((Path(folder) / "themis_dagster").exists() for folder in dependencies)
    (site_packages / "themis_dependencies.pth").write_text("".join(f"{folder}\n" for folder in dependencies))

    warehouse = tmp_path / "warehouse.duckdb"
    package, *views = _run([python, "-c", BUILD_WAREHOUSE, warehouse], elsewhere, env).splitlines()
    assert Path(package).is_relative_to(site_packages), f"imported {package}, not the installed wheel"
    assert [Path(view).name for view in views] == ["views.sql", "views_comparisons.sql"]
    assert all(Path(view).is_relative_to(site_packages) for view in views)

    themis: list[str | Path] = [venv / "bin" / "themis", "sql", "--format", "csv"]
    env["THEMIS_WAREHOUSE"] = str(warehouse)
    count = _run([*themis, "SELECT count(*) AS n FROM metrics"], elsewhere, env)
    assert count.split() == ["n", "2"]
    status = _run([*themis, "SELECT model, task, complete, status FROM partition_status"], elsewhere, env)
    assert status.splitlines()[:2] == ["model,task,complete,status", "m,crows_pairs,True,complete"]
    comparisons = _run([*themis, "SELECT count(*) AS n FROM comparisons"], elsewhere, env)
    assert comparisons.split() == ["n", "0"]
    # a family's own table, declared in its shipped family.yaml, is created as the platform's are
    family_table = _run([*themis, "SELECT count(*) AS n FROM langbite_global_evaluation"], elsewhere, env)
    assert family_table.split() == ["n", "0"]
