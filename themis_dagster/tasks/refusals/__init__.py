"""The task-independent refusal detector, its declared phrase lists and its calibration (docs/refusals.md)."""

from themis_dagster.tasks.refusals.detector import RefusalVerdict, detect_refusal, known_languages

__all__ = ["RefusalVerdict", "detect_refusal", "known_languages"]
