"""The ``iat_weat`` table of docs/iat.md: a model's WEAT per stimulus set, without starting vLLM.

Run: ``python -m themis_dagster.tasks.iat.weat_figures [MODEL_ID]`` (default: the default model).
It resolves the model's weights as the engines do, embeds every word through
``engines/embeddings.py`` and judges with the task's own defaults.
"""

from __future__ import annotations

import sys

from themis_dagster.datasets import resolve_file
from themis_dagster.engines.embeddings import TransformersEmbedder
from themis_dagster.registry.models import DEFAULT_MODEL_ID, load_registry
from themis_dagster.registry.weights import resolve_weights
from themis_dagster.settings import Settings
from themis_dagster.tasks.iat import weat_utils
from themis_dagster.tasks.loader import load_task


def main(model_id: str) -> None:
    settings = Settings.from_env()
    spec = load_registry(settings.models_file, settings.discovered_models_file)[model_id]
    weights = resolve_weights(spec, settings.models_dir, settings.cache_dir)
    task = load_task("iat_weat")
    files = {
        name: resolve_file("iat", name, datasets_dir=settings.datasets_dir, cache_dir=settings.cache_dir).path
        for name in task.spec.files
    }
    items = task.module.load_items(files, task.params)
    requests = task.module.build_requests(items, task.params, task.templates)
    responses = TransformersEmbedder(weights.path).embed(requests)
    judged = task.module.judge(items, requests, responses, task.params)
    params = task.params
    assert isinstance(params, weat_utils.Params)
    kinds = params.representations
    print("| set | split words | " + " | ".join(f"{k} d [95% CI] | {k} p (partitions)" for k in kinds) + " |")
    print("|---|---|" + "---|---|" * len(kinds))
    for judgment in judged:
        cells = [judgment.subset or "", str(len(judgment.detail.get("split_words", {})))]
        for kind in kinds:
            result = judgment.detail.get("results", {}).get(kind)
            if result is None:
                cells += [judgment.outcome, ""]
                continue
            ci = "" if result["ci_low"] is None else f" [{result['ci_low']:.2f}, {result['ci_high']:.2f}]"
            mode = "exact" if result["exact"] else "sampled"
            cells += [f"{result['effect_size']:+.2f}{ci}", f"{result['p_value']:.3f} ({result['partitions']} {mode})"]
        print("| " + " | ".join(cells) + " |")
    for metric in task.module.compute_metrics(judged, task.params):
        if metric.metric == "weat_d" and metric.subset in kinds:
            print(
                f"\nmean d over sets, {metric.subset}: {metric.value:+.3f} [{metric.ci_low:.3f}, {metric.ci_high:.3f}]"
            )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_MODEL_ID)
