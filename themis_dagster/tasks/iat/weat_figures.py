"""The ``iat_weat`` table of docs/iat.md: a model's WEAT per stimulus set, without starting vLLM.

Run: ``python bench/iat_weat_figures.py [MODEL_ID]`` (default: the default model), which resolves
the model's weights as the engines do and the task's files as the assets do; here every word is
embedded through ``engines/embeddings.py`` and judged with the task's own defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from themis_dagster.engines.embeddings import TransformersEmbedder
from themis_dagster.tasks.iat import weat_utils
from themis_dagster.tasks.loader import load_task


def print_table(weights: str, files: Mapping[str, Path]) -> None:
    """Print the table for the model whose weights are at the path ``weights``; ``files``: the task's files."""
    task = load_task("iat_weat")
    items = task.module.load_items(dict(files), task.params)
    requests = task.module.build_requests(items, task.params, task.templates)
    responses = TransformersEmbedder(weights).embed(requests)
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
