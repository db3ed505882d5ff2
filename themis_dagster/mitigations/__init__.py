"""Mitigation variants: a registered model plus one bias mitigation at one stage.

A variant is its own model partition (``ModelSpec.mitigation``, with ``parent`` naming the
unmitigated model), so the paired comparisons against its parent give the mitigation's
effect. What a variant may declare is part of the model registry (``registry/mitigation.py``,
re-exported here); ``requests.py`` rewrites what is sent and what comes back, ``engine.py``
applies them around any engine (docs/mitigations.md).
"""

from themis_dagster.mitigations.engine import MitigatedEngine, mitigated
from themis_dagster.registry.mitigation import (
    InstructionTemplate,
    LogitBias,
    Mitigation,
    ReplyFilter,
    SystemPrompt,
    stage_of,
)

__all__ = [
    "InstructionTemplate",
    "LogitBias",
    "MitigatedEngine",
    "Mitigation",
    "ReplyFilter",
    "SystemPrompt",
    "mitigated",
    "stage_of",
]
