"""Columnar helpers of the evaluation stages: work a partition does per row, done a column at a time."""
