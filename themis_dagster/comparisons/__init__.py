"""Paired comparisons of two models on the same items: lineage, tests, Holm, regression gates (docs/comparisons.md).

What a task declares to be compared (``PAIRED_METRICS`` and its measures) lives with the tasks
(``tasks/measures.py``): comparisons read task declarations, tasks never import comparisons.
"""
