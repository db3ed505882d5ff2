"""docs/iat.md's ``iat_weat`` table: a model's WEAT per stimulus set, without starting vLLM.

    .venv/bin/python bench/iat_weat_figures.py [MODEL_ID]

MODEL_ID defaults to the default model. Its weights are resolved as the engines resolve them and
the task's files as the assets do (``THEMIS_*``); ``tasks/iat/weat_figures.py`` embeds every word
through ``engines/embeddings.py`` and judges with the task's own defaults. No peer and no target: the
table goes to ``bench/results/iat_weat_figures-<isa>.json`` (bench/results.py), as printed.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import write_result  # noqa: E402
from themis_dagster.datasets import resolve_file  # noqa: E402
from themis_dagster.registry.models import DEFAULT_MODEL_ID, load_registry  # noqa: E402
from themis_dagster.registry.weights import resolve_weights  # noqa: E402
from themis_dagster.settings import Settings  # noqa: E402
from themis_dagster.tasks.iat.weat_figures import print_table  # noqa: E402
from themis_dagster.tasks.loader import load_task  # noqa: E402


def main(model_id: str) -> None:
    settings = Settings.from_env()
    spec = load_registry(settings.models_file, settings.discovered_models_file)[model_id]
    weights = resolve_weights(spec, settings.models_dir, settings.cache_dir)
    files = {
        name: resolve_file("iat", name, datasets_dir=settings.datasets_dir, cache_dir=settings.cache_dir).path
        for name in load_task("iat_weat").spec.files
    }
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        print_table(weights.path, files)
    text = printed.getvalue()
    print(text, end="")
    rows, means = parse(text)
    write_result(
        "iat_weat_figures",
        {"model": model_id, "sets": rows, "mean_d": means},
        summary=f"{model_id}, {len(rows)} sets: mean d over sets "
        + ", ".join(f"{kind} {m['d']:+.3f} [{m['ci_low']:.3f}, {m['ci_high']:.3f}]" for kind, m in means.items()),
    )


MEAN = re.compile(r"mean d over sets, (\S+): ([-+\d.]+) \[([-+\d.]+), ([-+\d.]+)\]")


def parse(text: str) -> tuple[list[dict[str, str]], dict[str, dict[str, float]]]:
    """The printed table's rows (cells by column) and the mean d per representation."""
    table = [line.strip().strip("|").split("|") for line in text.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in table[0]]
    rows = [dict(zip(header, (cell.strip() for cell in row), strict=True)) for row in table[2:]]
    means = {
        match[1]: {"d": float(match[2]), "ci_low": float(match[3]), "ci_high": float(match[4])}
        for match in MEAN.finditer(text)
    }
    return rows, means


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_MODEL_ID)
