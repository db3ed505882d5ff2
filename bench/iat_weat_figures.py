"""docs/iat.md's ``iat_weat`` table: a model's WEAT per stimulus set, without starting vLLM.

    .venv/bin/python bench/iat_weat_figures.py [MODEL_ID]

MODEL_ID defaults to the default model. Its weights are resolved as the engines resolve them and
the task's files as the assets do (``THEMIS_*``); ``tasks/iat/weat_figures.py`` embeds every word
through ``engines/embeddings.py`` and judges with the task's own defaults.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

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
    print_table(weights.path, files)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_MODEL_ID)
