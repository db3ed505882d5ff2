"""Paired comparisons of two models on the same items: lineage, tests, Holm, regression gates (docs/comparisons.md).

Kept import-light: task modules import ``comparisons.measures`` to declare their paired metrics.
"""
