"""Run bookkeeping Dagster does not do for in-process runs: who owns a run, and failing dead ones."""
