"""A warehouse as large as a full evaluation makes: every declared task and metric, for a family and its peers.

The model report's size is dominated by its figures, one per task with subsets, and by its
tables; this fixture gives each of them the size a complete ``make run`` gives: every task the
project declares with all its metrics (ideals from the task files), subsets in the numbers the
benchmarks have (BBQ's 11 categories, BOLD's groups, HolisticBias's descriptors), four
checkpoints of one family, a dozen other models and three materializations of each value.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

from themis_dagster.tasks.loader import _load_spec, task_files, task_names
from themis_dagster.warehouse.schema import ensure_schema

MODEL = "fam-step-400"
FAMILY = ["fam-step-100", "fam-step-200", "fam-step-300", MODEL]
PEERS = [f"peer-{i:02d}" for i in range(12)]
SUBSETS = {"holistic_bias": 300, "bold": 40, "iat": 20, "iat_weat": 10, "discrim_eval": 9, "stereoset": 4}
DEFAULT_SUBSETS = 11  # BBQ's categories
AT = datetime(2026, 11, 1, 12, 0)
METRIC_COLUMNS = "model, task, subset, metric, value, ci_low, ci_high, n, materialized_at, run_id"


def declared_metrics() -> dict[str, list[tuple[str, float | None]]]:
    """Every declared task's metrics and their ideals, read from the task files."""
    files = task_files()
    return {task: [(m.name, m.ideal) for m in _load_spec(files[task]).metrics] for task in task_names()}


def _row(rng: random.Random, model: str, task: str, subset: str | None, metric: str, ideal: float | None,
         at: datetime) -> tuple[object, ...]:  # fmt: skip
    center = ideal if ideal is not None else 0.5
    value = center + rng.uniform(-0.3, 0.3) * (abs(center) or 1.0)
    half = rng.uniform(0.02, 0.12) * (abs(center) or 1.0)
    return (model, task, subset, metric, value, value - half, value + half, rng.randint(50, 2000), at, f"run-{task}")


def build_full_warehouse(path: Path, seed: int = 0) -> Path:
    """Write the warehouse at ``path`` (the report's model is :data:`MODEL`) and return ``path``."""
    rng = random.Random(seed)
    metrics = declared_metrics()
    current: list[tuple[object, ...]] = []
    history: list[tuple[object, ...]] = []
    for task, declared in metrics.items():
        for model in [*FAMILY, *PEERS]:
            for metric, ideal in declared:
                for step in range(3 if model == MODEL else 1):
                    row = _row(rng, model, task, None, metric, ideal, AT + timedelta(days=step))
                    history.append(row)
                current.append(row)
        for i in range(SUBSETS.get(task, DEFAULT_SUBSETS)):
            for metric, ideal in declared:
                row = _row(rng, MODEL, task, f"{task}-group-{i:03d}", metric, ideal, AT)
                current.append(row)
                history.append(row)
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        for table, rows in (("metric_values", current), ("metric_history", history)):
            conn.executemany(f"INSERT INTO {table} ({METRIC_COLUMNS}) VALUES ({', '.join('?' * 10)})", rows)
        ideals = [(task, metric, ideal) for task, declared in metrics.items() for metric, ideal in declared
                  if ideal is not None]  # fmt: skip
        conn.execute("CREATE TEMP TABLE ideals (task VARCHAR, metric VARCHAR, ideal DOUBLE)")
        conn.executemany("INSERT INTO ideals VALUES (?, ?, ?)", ideals)
        conn.execute(
            """
            INSERT INTO leaderboard (task, metric, rank, model, value, ci_low, ci_high, n, ideal, materialized_at)
            SELECT task, metric, rank() OVER (PARTITION BY task, metric ORDER BY abs(value - ideal)),
                   model, value, ci_low, ci_high, n, ideal, materialized_at
            FROM metric_values JOIN ideals USING (task, metric) WHERE subset IS NULL
            """
        )
        for task, declared in metrics.items():
            config = {"task": {"metrics": [{"name": m, "ideal": i} for m, i in declared]},
                      "task_params": {"seed": 1234, "confidence": 0.95, "bootstrap_resamples": 1000}}  # fmt: skip
            conn.execute(
                "INSERT INTO evaluation_runs (model, task, run_id, materialized_at, config) VALUES (?, ?, ?, ?, ?)",
                [MODEL, task, f"run-{task}", AT, json.dumps(config)],
            )
    return path
