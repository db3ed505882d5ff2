"""Which process owns a run, recorded as run tags, so a later process can tell whether it still lives.

Dagster's run monitoring cannot tell for ``themis run`` (an in-process execution that no
daemon launched) nor, with the default run launcher, for any run: that launcher does not
implement worker health checks. So every run records its host, pid and the process's start
time; a run on this host whose pid is gone, or now belongs to another process (another
start time, or another boot), is dead.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Literal

from themis_dagster.runs.processes import boot_id, pid_alive, proc_available, process_start_time

HOST_TAG = "themis/host"
PID_TAG = "themis/pid"
START_TAG = "themis/pid_start"  # "<boot id>:<start time in clock ticks since boot>"
# The run the owner tags were written for: Dagster copies a run's tags to its retries and
# re-executions, which are not owned by the dead process until their own worker tags them.
RUN_TAG = "themis/owner_of"

Liveness = Literal["alive", "gone", "unknown"]


def process_start(pid: int) -> str:
    """The process's identity beyond its pid ("" where /proc cannot say)."""
    start = process_start_time(pid)
    return f"{boot_id()}:{start}" if start is not None else ""


def owner_tags(run_id: str) -> dict[str, str]:
    """Run tags naming this process as the owner of run ``run_id``."""
    pid = os.getpid()
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(pid), START_TAG: process_start(pid), RUN_TAG: run_id}


def owner_liveness(tags: Mapping[str, str], run_id: str | None = None) -> Liveness:
    """Whether the process named by run ``run_id``'s owner tags still runs.

    "unknown" for another host, no tags, or tags written for another run (copied to a retry).
    """
    if tags.get(HOST_TAG) != socket.gethostname() or not tags.get(PID_TAG, "").isdigit():
        return "unknown"
    if run_id is not None and tags.get(RUN_TAG, run_id) != run_id:
        return "unknown"
    pid = int(tags[PID_TAG])
    if not proc_available():  # no /proc (not Linux): existence only, reuse undetected
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return "gone"
        except PermissionError:
            return "alive"
        return "alive"
    if not pid_alive(pid):
        return "gone"
    recorded = tags.get(START_TAG, "")
    if recorded and recorded != process_start(pid):
        return "gone"  # the pid now belongs to another process
    return "alive"
