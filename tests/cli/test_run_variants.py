"""``themis run`` with variants: each runs right after its task, rewritten, keyed apart, measured and printed.

A separate process (the fake engine), as ``make run`` starts one: the task dimension holds the
variants of the overrides file it is started with (``THEMIS_TASK_OVERRIDES``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import yaml

from tests.conftest import requires_mirror

MODEL = "smollm2-135m-instruct"
ITEMS = 6


def themis_run(folder: Path, overrides: dict[str, object], tasks: tuple[str, ...], engine: str) -> str:
    """``themis run --task ...`` in a process of its own on ``folder``'s Dagster home and warehouse (w.duckdb), with
    ``overrides`` as its task overrides file; its output, once it has exited 0."""
    path = folder / "overrides.yaml"
    path.write_text(yaml.safe_dump(overrides))
    (folder / "home").mkdir()
    env = dict(os.environ) | {
        "DAGSTER_HOME": str(folder / "home"),
        "THEMIS_WAREHOUSE": str(folder / "w.duckdb"),
        "THEMIS_DISCOVERED_MODELS_FILE": str(folder / "discovered.yaml"),
        "THEMIS_TASK_OVERRIDES": str(path),
        "THEMIS_ENGINE": engine,
    }
    command = [sys.executable, "-m", "themis_dagster.cli", "run", "--skip-reports", "--no-calibrate-judges"]
    for task in tasks:
        command += ["--task", task]
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, check=False)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-4000:]
    return output


@requires_mirror
def test_variants_run_after_their_task_and_their_effects_are_printed(tmp_path: Path) -> None:
    overrides = {"winogender": {"limit": ITEMS, "perturbations": ["gender_swap", "identity"]}}
    output = themis_run(tmp_path, overrides, ("winogender", "winogender__gender_swap", "winogender__identity"), "fake")
    done = [line.split("|")[1].split(":")[0] for line in output.splitlines() if line.startswith(f"[themis] {MODEL}|")]
    assert done == ["winogender", "winogender__gender_swap", "winogender__identity"], output[-3000:]
    assert f"perturbation effects of {MODEL}" in output and "winogender__identity" in output
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as conn:
        texts = dict(conn.execute(
            "SELECT task, list(context ORDER BY request_id) FROM prompts GROUP BY task"
        ).fetchall())  # fmt: skip
        records = dict(conn.execute("SELECT task, config FROM evaluation_runs").fetchall())
        identity = conn.execute(
            "SELECT scope, metric, difference, p_value, n_changed, n_unchanged FROM perturbation_effects "
            "WHERE task = 'winogender__identity' AND subset IS NULL ORDER BY metric"
        ).fetchall()
        swapped = conn.execute(
            "SELECT DISTINCT n_changed, n_unchanged FROM perturbation_effects WHERE task = 'winogender__gender_swap'"
        ).fetchall()
    assert texts["winogender__identity"] == texts["winogender"] != texts["winogender__gender_swap"]
    assert " she " in " ".join(texts["winogender__gender_swap"]) and " he " in " ".join(texts["winogender"])
    perturbation = json.loads(records["winogender__gender_swap"])["perturbation"]
    assert perturbation["name"] == "gender_swap" and len(perturbation["list_sha256"]) == 64
    assert "perturbation" not in json.loads(records["winogender"])
    # the identity changes nothing: no `changed` rows; every item unchanged, each metric's difference 0, p 1
    assert identity and {row[0] for row in identity} == {"all"}
    assert all(row[2] == 0 and row[3] == 1 and row[4:] == (0, ITEMS) for row in identity), identity
    assert swapped == [(4, 2)]  # the male and female sentences rewritten, the neutral ones left
