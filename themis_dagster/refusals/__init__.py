"""The task-independent refusal detector, its declared phrase lists, its calibration, and refusals as an outcome.

docs/refusals.md describes them.
"""

from themis_dagster.refusals.detector import RefusalVerdict, detect_refusal, known_languages
from themis_dagster.refusals.outcome import mark_refusal, mark_refusals, refusal_metrics, replies_by

__all__ = [
    "RefusalVerdict",
    "detect_refusal",
    "known_languages",
    "mark_refusal",
    "mark_refusals",
    "refusal_metrics",
    "replies_by",
]
