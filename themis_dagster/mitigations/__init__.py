"""Mitigation variants: a registered model plus one bias mitigation at one stage.

A variant is its own model partition (``ModelSpec.mitigation``, with ``parent`` naming the
unmitigated model), so the paired comparisons against its parent give the mitigation's
effect. What a variant may declare is part of the model registry (``registry/mitigation.py``:
``Mitigation``, ``SystemPrompt``, ``LogitBias``, ...; imported from there, one name in one place);
``requests.py`` rewrites what is sent and what comes back, ``engine.py`` applies them around any
engine (docs/mitigations.md).
"""

from themis_dagster.mitigations.engine import MitigatedEngine, mitigated

__all__ = ["MitigatedEngine", "mitigated"]
