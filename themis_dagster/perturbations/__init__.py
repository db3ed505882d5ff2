"""Counterfactual perturbations: a task's rendered prompts rewritten so that only who is spoken of changes.

Word-pair lists (WinoBias' gendered words, the IAT's first names and surnames, HolisticBias'
descriptors, a user's CSV) made bijections (``pairs.py``, ``sources.py``, ``descriptors.py``),
swapped in one pass with their case, possessives and pronoun roles kept (``swap.py``,
``pronouns.py``), declared and validated by name (``spec.py``, ``perturbations.yaml``) and
applied to a task's requests (``apply.py``). docs/counterfactuals.md defines each.
"""

from themis_dagster.perturbations.apply import PerturbedRequests, perturb_request, perturb_requests
from themis_dagster.perturbations.sources import Mirror
from themis_dagster.perturbations.spec import (
    Declaration,
    Perturbation,
    build,
    build_all,
    builtin_perturbations,
    parse_perturbations,
)

__all__ = [
    "Declaration",
    "Mirror",
    "Perturbation",
    "PerturbedRequests",
    "build",
    "build_all",
    "builtin_perturbations",
    "parse_perturbations",
    "perturb_request",
    "perturb_requests",
]
