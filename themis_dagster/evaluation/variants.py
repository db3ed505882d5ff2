"""A variant partition in the chain: its prompts rewritten by its perturbation, its answers keyed apart.

A task override's ``perturbations`` declare variants ``<task>__<perturbation>`` (``tasks/variants.py``):
the task's items, parameters and ids, with every text the engine sees rewritten
(``perturbations/frames.py``). The prompts stage renders the task's requests and rewrites them
here; the responses stage answers them through the one answering path under the model's
fingerprint folded with the perturbation's key (its name, direction and its list's sha256), so
an answer of the original, of another perturbation or of another version of the word list is
never reused for a variant, and the identity perturbation is answered by the engine again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import polars as pl

from themis_dagster.evaluation.answering import Answerer
from themis_dagster.perturbations import Mirror, Perturbation, build
from themis_dagster.perturbations.frames import keyed_fingerprint, perturb_frame
from themis_dagster.tasks.loader import LoadedTask


def variant_perturbation(task: LoadedTask) -> Perturbation | None:
    """The built perturbation of a variant (its lists read from the task's inputs); None for a task's own partition."""
    if task.perturbation is None:
        return None
    datasets_dir, cache_dir = task.inputs.directories()
    return build(task.perturbation, Mirror(datasets_dir, cache_dir, task.inputs.allow_downloads), f"task {task.name}")


def perturbed_prompts(task: LoadedTask, prompts: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, int] | None]:
    """A variant's prompts (the task's, every text rewritten) and what changed; the task's own unchanged, None."""
    perturbation = variant_perturbation(task)
    if perturbation is None:
        return prompts, None
    return perturb_frame(prompts, perturbation)


def variant_answerer(task: LoadedTask, answerer: Answerer) -> Answerer:
    """``answerer`` with a variant's answers cached under their own key (the module docstring)."""
    perturbation = variant_perturbation(task)
    if perturbation is None or answerer.model_fingerprint is None:
        return answerer
    return replace(answerer, model_fingerprint=keyed_fingerprint(answerer.model_fingerprint, perturbation.key))


def perturbation_record(task: LoadedTask) -> dict[str, Any] | None:
    """What a variant's run record says of its perturbation: name, direction, its list's sha256 and key."""
    perturbation = variant_perturbation(task)
    if perturbation is None:
        return None
    return {
        "name": perturbation.name,
        "to": perturbation.direction,
        "list_sha256": perturbation.list_sha256,
        "key": perturbation.key,
    }
