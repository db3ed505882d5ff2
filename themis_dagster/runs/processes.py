"""What /proc says about a process: whether it runs, and whether it is still the process a pid once named.

A pid alone does not name a process: after it exits the kernel hands the number out again. The
start time (clock ticks since boot, field 22 of ``/proc/<pid>/stat``) and the boot id together
do. Used by ``runs.owner`` (which process owns a run) and ``engines.vllm`` (the ``vllm serve``
supervisors a state file names). Without /proc (``proc_available``), ``pid_alive`` reads every
process as gone.
"""

from __future__ import annotations

from pathlib import Path

ENDED = ("Z", "X")  # a zombie or a dead process: not running


def proc_available() -> bool:
    """Whether this system has /proc to ask (Linux); elsewhere only a pid's existence can be checked."""
    return Path("/proc/self/stat").exists()


def boot_id() -> str:
    """This boot of the host ("" where /proc cannot say)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state is [0], pgrp [2], start time [19])."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()


def process_start_time(pid: int) -> int | None:
    """When the process started, in clock ticks since boot (None: no such process)."""
    fields = proc_stat(pid)
    return int(fields[19]) if fields else None


def pid_alive(pid: int | None, start_time: int | None = None) -> bool:
    """True for a running (not zombie) process; with ``start_time``, only if it is the same process."""
    if not pid:
        return False
    fields = proc_stat(pid)
    if fields is None or fields[0] in ENDED:
        return False
    return start_time is None or int(fields[19]) == start_time


def group_members(pgid: int) -> list[int]:
    """Live processes of a process group."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = proc_stat(int(entry.name))
            if fields and fields[0] not in ENDED and int(fields[2]) == pgid:
                members.append(int(entry.name))
    return members
