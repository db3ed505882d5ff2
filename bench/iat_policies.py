"""docs/iat.md's table of the two IAT scoring policies on the same replies, per stimulus set.

    .venv/bin/python bench/iat_policies.py /work/shared/datasets/iat/reference_results/gpt4o/*.csv

The replies go through the importer (``tasks/iat/importer.py``), as ``themis import`` stores them, then
through the task's ``judge`` under ``scoring: project`` and ``scoring: reference``
(``tasks/iat/policies.py``); the dataset files are found as the assets find them (``THEMIS_*``).
No peer and no target: the two policies are compared with each other. The table goes to
``bench/results/iat_policies-<isa>.json`` (bench/results.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import write_result  # noqa: E402
from themis_dagster.datasets import resolve_file  # noqa: E402
from themis_dagster.settings import Settings  # noqa: E402
from themis_dagster.tasks.iat.importer import import_replies  # noqa: E402
from themis_dagster.tasks.iat.policies import compare_policies  # noqa: E402
from themis_dagster.tasks.iat.stimuli import MAIN_FILE, SYNONYM_FILE  # noqa: E402
from themis_dagster.tasks.spec import TaskInputs  # noqa: E402


def main(argv: list[str]) -> None:
    settings = Settings.from_env()
    inputs = TaskInputs(datasets_dir=settings.datasets_dir, cache_dir=settings.cache_dir)
    files = {
        name: resolve_file("iat", name, datasets_dir=settings.datasets_dir, cache_dir=settings.cache_dir).path
        for name in (MAIN_FILE, SYNONYM_FILE)
    }
    imported = import_replies([Path(arg) for arg in argv], files)
    table = compare_policies(imported.items, imported.requests, imported.responses, inputs)
    print(table.to_markdown(floatfmt=".3f"))
    rows = json.loads(table.rename_axis("set").reset_index().to_json(orient="records"))  # NaN as null
    every = next(row for row in rows if row["set"] == "all")
    write_result(
        "iat_policies",
        {"files": len(argv), "sets": rows},
        summary=f"{every['replies']:,} replies in {len(rows) - 1} sets: mean D {every['project_mean_d']:.3f} under "
        f"scoring: project, {every['reference_mean_d']:.3f} under scoring: reference "
        f"(n {every['project_n']:,} and {every['reference_n']:,})",
    )


if __name__ == "__main__":
    main(sys.argv[1:])
