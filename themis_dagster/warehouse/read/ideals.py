"""Each metric's ideal, the one definition: the value an unbiased model would get, and whether higher is better.

Where it comes from, in order (a later source wins): the task declarations the latest evaluation of
each task recorded (``evaluation_runs``: every declared metric), then the ``leaderboard`` table (the
task files' headline metrics as the leaderboard asset last read them), then ideals a caller gives.
A metric without a declared ideal has none: it is shown as :data:`NO_IDEAL`, never measured from 0,
never ranked and never called biased.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import duckdb

from themis_dagster.warehouse.read.query import number, rows
from themis_dagster.warehouse.read.runs import task_declarations

NO_IDEAL = "no ideal declared"
MetricKey = tuple[str, str]  # (task, metric)


@dataclass(frozen=True)
class Ideals:
    """Declared ideals (``values``) and directions (``higher_is_better``) by (task, metric)."""

    values: dict[MetricKey, float] = field(default_factory=dict)
    higher_is_better: dict[MetricKey, bool] = field(default_factory=dict)

    def ideal(self, task: str, metric: str) -> float | None:
        """The metric's ideal; None: none declared."""
        return self.values.get((task, metric))

    def distance(self, task: str, metric: str, value: float | None) -> float | None:
        """|value - ideal|; None without a value or a declared ideal (never measured from 0)."""
        ideal = self.ideal(task, metric)
        return None if ideal is None or value is None else abs(value - ideal)


def metric_ideals(conn: duckdb.DuckDBPyConnection, given: Mapping[MetricKey, float] | None = None) -> Ideals:
    """Every declared ideal of the warehouse's tasks (see the module's docstring for the order of sources)."""
    values: dict[MetricKey, float] = {}
    directions: dict[MetricKey, bool] = {}
    for task, metrics in task_declarations(conn).items():
        for metric in metrics:
            name, ideal, higher = metric.get("name"), number(metric.get("ideal")), metric.get("higher_is_better")
            if not isinstance(name, str):
                continue
            if ideal is not None:
                values[(task, name)] = ideal
            if isinstance(higher, bool):
                directions[(task, name)] = higher
    for row in rows(conn, "SELECT DISTINCT task, metric, ideal FROM leaderboard WHERE ideal IS NOT NULL"):
        ideal = number(row["ideal"])
        if ideal is not None:
            values[(str(row["task"]), str(row["metric"]))] = ideal
    for key, ideal in (given or {}).items():
        values[key] = float(ideal)
    return Ideals(values, directions)
