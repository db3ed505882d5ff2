"""Write ``data/run_profiles/costs.yaml`` from a whole ``make run``: each task's seconds on this host.

``themis run --budget-minutes`` (``themis_dagster/tasks/budget.py``) plans a run's sizes from these
reference seconds and the speed it measures on the host it runs on. Measure them on a quiet machine:

    make run 2>&1 | tee run.log      # with THEMIS_RUN_BUDGET_MINUTES= (empty): the whole profile
    .venv/bin/python bench/run_costs.py run.log --warehouse data/warehouse.duckdb --host "..."

The log's lines ``[themis] <model>|<task>: ok in X s (engine: load L s, inference I s)`` give a task's
inference seconds (I) and the rest (X - L - I); ``judge <model> on calibration set <set>: ok in X s (engine: load L s)``
the calibration's (X - L); tasks whose profile entry names no size get their item count from the warehouse.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import duckdb
import yaml

from themis_dagster.tasks.budget import COSTS_FILE, KNOBS
from themis_dagster.tasks.family import sizes

TASK_LINE = re.compile(
    r"^\[themis\] (?P<model>[^|\s]+)\|(?P<task>\S+): ok in (?P<total>[\d.]+) s"
    r"(?: \(engine: load (?P<load>[\d.]+) s, inference (?P<inference>[\d.]+) s\))?"
)
CALIBRATION_LINE = re.compile(
    r"^\[themis\] judge \S+ on calibration set (?P<set>\S+): ok in (?P<total>[\d.]+) s"
    r"(?: \(engine: load (?P<load>[\d.]+) s\))?"
)
REPORTS_LINE = re.compile(r"^\[themis\] reports: ok in (?P<total>[\d.]+) s")


def parse(log: str) -> tuple[dict[str, dict[str, float]], dict[str, float], float, str]:
    """(task: {inference_s, other_s}, calibration set: seconds, the reports' seconds, model) from a run's log."""
    tasks: dict[str, dict[str, float]] = {}
    calibrations: dict[str, float] = {}
    reports = 0.0
    model = ""
    for line in log.splitlines():
        if found := TASK_LINE.match(line):
            total, load = float(found["total"]), float(found["load"] or 0)
            inference = float(found["inference"] or 0)
            model = found["model"]
            tasks[found["task"]] = {"inference_s": inference, "other_s": round(max(total - load - inference, 0.0), 2)}
        elif found := CALIBRATION_LINE.match(line):
            calibrations[found["set"]] = round(float(found["total"]) - float(found["load"] or 0), 2)
        elif found := REPORTS_LINE.match(line):
            reports = float(found["total"])
    return tasks, calibrations, reports, model


def item_counts(warehouse: Path, model: str, tasks: list[str]) -> dict[str, int]:
    """The items a task's judgments hold (for the tasks whose profile entry names no size)."""
    query = "SELECT count(DISTINCT item_id) FROM judgments WHERE model = ? AND task = ?"
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        counts = {task: conn.execute(query, [model, task]).fetchone() for task in tasks}
    return {task: int(found[0]) for task, found in counts.items() if found is not None and found[0]}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", type=Path)
    parser.add_argument("--warehouse", type=Path, required=True)
    parser.add_argument("--host", required=True, help="the host, its instruction sets and dtype, the commit")
    parser.add_argument("--reports-s", type=float, help="seconds the reports took, where the log does not say")
    parser.add_argument("--out", type=Path, default=COSTS_FILE)
    args = parser.parse_args(argv)
    tasks, calibrations, reports, model = parse(args.log.read_text(encoding="utf-8", errors="replace"))
    if not tasks:
        print(f"{args.log}: no '[themis] <model>|<task>: ok in ...' lines", file=sys.stderr)
        return 1
    profile = sizes("run")
    unsized = [task for task in tasks if task in profile and not any(knob in profile[task] for knob in KNOBS)]
    for task, count in item_counts(args.warehouse, model, unsized).items():
        tasks[task]["items"] = count
    document = {
        "host": args.host,
        "command": "make run (the whole profile), then bench/run_costs.py on its log",
        "calibrations": calibrations,
        "reports_s": args.reports_s if args.reports_s is not None else reports,
        "tasks": dict(sorted(tasks.items())),
    }
    header = "# Written by bench/run_costs.py: make run's seconds per task on a reference host (tasks/budget.py).\n"
    args.out.write_text(header + yaml.safe_dump(document, sort_keys=False, width=120), encoding="utf-8")
    print(f"{args.out}: {len(tasks)} tasks, {len(calibrations)} calibrations")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
