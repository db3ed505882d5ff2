"""SIGKILL while a stage's partition is being committed: the warehouse holds all of the old rows or all of the new.

A child process replaces a partition's judgments and their lineage row as ``replace_stage``
does (``replace_rows``, without importing Dagster so that it starts fast), announcing when
its COMMIT starts and ends and when the connection (which checkpoints the WAL into the
file) is closed. The test kills it at points spread over that window: during the commit,
just after it returned, and during and after the closing checkpoint. After each kill the
file passes the integrity check, the partition is whole (every row of one write), its
lineage row matches its rows, a commit that returned is kept, and the next write succeeds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from themis_dagster.warehouse.integrity import check_warehouse

pytestmark = pytest.mark.faults

ROWS = 40_000
CHILD = """
import sys, time
import duckdb
from themis_dagster.tasks.spec import Judgment
from themis_dagster.warehouse import generations
from themis_dagster.warehouse.partitions import Write, partition_scope, replace_rows
from themis_dagster.warehouse.schema import ensure_schema
from themis_dagster.warehouse.frames import to_frame

path, marker, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
judged = [Judgment(f"i{k}", marker, marker, float(k), True, {"pad": "x" * 200}) for k in range(rows)]
frame = to_frame("judgments", judged, model="m", task="t")
_, lineage = generations.record("judgments", "m", "t", None, run_id=marker)
scope = partition_scope("m", "t")


class Announcing:
    '''The real connection, saying on stdout when its COMMIT starts and ends.'''

    def __init__(self, conn):
        self._conn = conn

    def __getattr__(self, name):
        return getattr(self._conn, name)

    def execute(self, sql, *args):
        if sql == "COMMIT":
            print("commit", time.monotonic(), flush=True)
        result = self._conn.execute(sql, *args)
        if sql == "COMMIT":
            print("committed", time.monotonic(), flush=True)
        return result


conn = duckdb.connect(path)
ensure_schema(conn)
print("ready", time.monotonic(), flush=True)
# what evaluation.stage_io.replace_stage writes: the stage's rows and their lineage row, one transaction
lineage_write = Write("stage_generations", lineage, scope | {"stage": "judgments"})
replace_rows(Announcing(conn), [Write("judgments", frame, scope), lineage_write])
conn.close()
print("closed", time.monotonic(), flush=True)
"""


def _write(path: Path, marker: str, kill_at: tuple[str, float] | None = None) -> dict[str, float]:
    """Run the child; with ``kill_at`` (an announcement, seconds), SIGKILL it that long after that announcement."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), marker, str(ROWS)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    seen: dict[str, float] = {}
    for line in child.stdout:
        word, _, at = line.strip().partition(" ")
        if word not in ("ready", "commit", "committed", "closed"):
            continue  # anything else a library prints
        seen[word] = float(at)
        if kill_at is not None and word == kill_at[0]:
            time.sleep(kill_at[1])
            os.kill(child.pid, signal.SIGKILL)
            break
    child.wait(timeout=120)
    if kill_at is None:
        assert child.returncode == 0 and "closed" in seen
    return seen


def _partition(path: Path) -> tuple[set[str], int, str | None]:
    """The markers of the partition's rows, their count and the run its lineage row names."""
    check_warehouse(path)  # read-only: a damaged file is reported, never repaired by opening it
    with duckdb.connect(str(path), read_only=True) as conn:
        markers = {row[0] for row in conn.execute("SELECT DISTINCT outcome FROM judgments WHERE task = 't'").fetchall()}
        count = conn.execute("SELECT count(*) FROM judgments WHERE task = 't'").fetchone()
        lineage = conn.execute("SELECT run_id FROM stage_generations WHERE stage = 'judgments'").fetchone()
    return markers, int(count[0]) if count else 0, lineage[0] if lineage else None


def test_sigkill_at_any_point_of_a_commit_leaves_the_partition_old_or_new(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    timing = _write(path, "old")
    commit_s = timing["committed"] - timing["commit"]
    close_s = timing["closed"] - timing["committed"]  # closing checkpoints the WAL into the file
    kills = [
        ("commit", 0.0, "either"),
        ("commit", 0.5 * commit_s, "either"),
        ("commit", 0.9 * commit_s, "either"),
        ("committed", 0.0, "new"),  # a commit that returned is durable
        ("committed", 0.5 * close_s, "new"),
        ("closed", 0.0, "new"),
    ]
    current, outcomes = "old", []
    for trial, (event, delay, expected) in enumerate(kills):
        marker = f"new{trial}"
        _write(path, marker, kill_at=(event, delay))
        markers, count, lineage = _partition(path)
        assert len(markers) == 1 and count == ROWS, (event, delay, markers, count)  # never half old, half new
        (holds,) = markers
        assert holds in (current, marker), (event, delay, holds)
        assert lineage == holds  # the lineage row committed with the rows, never apart
        outcome = "new" if holds == marker else "old"
        assert expected in (outcome, "either"), (event, delay, outcome)
        outcomes.append(outcome)
        current = holds
    _write(path, "after")  # the next write succeeds on what the kills left
    assert _partition(path) == ({"after"}, ROWS, "after")
    print(f"commit {commit_s:.3f} s, close {close_s:.3f} s, outcomes {outcomes}")
