"""The files that describe one model's ``vllm serve`` (see ``server``): their names, the state, the lock.

``<model>.json`` is the state (written whole, by an atomic replace), ``<model>.lock`` the flock
taken to start, attach to or retire the server, ``<model>.last_used`` the mtime of the last use,
``<model>.log`` the supervisor's and vLLM's output and ``<model>.starts`` one line per start.
A state names processes of one host and boot (``host_fields``); ``usable_state`` refuses
another host's and drops an earlier boot's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themis_dagster.runs.processes import boot_id


class ServerStartError(RuntimeError):
    """The server did not become healthy; the message ends with the tail of its log."""


class ServerStateHostError(ServerStartError):
    """The state folder holds a server of another host (servers are per host); the message names the setting."""


def host_fields() -> dict[str, str]:
    """What a state records about the host whose processes it names."""
    return {"host": socket.gethostname(), "boot_id": boot_id()}


def usable_state(state: dict[str, Any] | None, paths: ServerPaths) -> dict[str, Any] | None:
    """The state if it describes this host's current boot; None if stale (an earlier boot: its pids are
    not this boot's processes); ``ServerStateHostError`` if another host wrote it. States without
    host fields (written before they existed) are taken as this host's."""
    if state is None or "host" not in state:
        return state
    here = host_fields()
    if state["host"] != here["host"]:
        raise ServerStateHostError(
            f"THEMIS_SERVER_STATE_DIR={paths.state_dir}: {paths.model_id}'s server state was written by host "
            f"{state['host']!r}, this is {here['host']!r}. vllm-server servers are per host (the state names "
            "local processes and a loopback URL): give every host its own, local THEMIS_SERVER_STATE_DIR"
        )
    return state if state.get("boot_id") == here["boot_id"] else None


class _ModelFile:
    """One of the files a model's server keeps: ``<state_dir>/<model_id><suffix>``, read as an attribute."""

    def __init__(self, suffix: str) -> None:
        self.suffix = suffix

    def __get__(self, paths: ServerPaths, owner: type[ServerPaths] | None = None) -> Path:
        return paths.state_dir / f"{paths.model_id}{self.suffix}"


@dataclass(frozen=True)
class ServerPaths:
    """The files that describe one model's server."""

    state_dir: Path
    model_id: str

    state = _ModelFile(".json")
    lock = _ModelFile(".lock")
    last_used = _ModelFile(".last_used")
    log = _ModelFile(".log")
    starts = _ModelFile(".starts")

    @classmethod
    def of_state(cls, state_file: Path) -> ServerPaths:
        return cls(state_file.parent, state_file.name.removesuffix(".json"))


def read_state(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Atomic replace, so a reader never sees half a file."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    temporary.write_text(json.dumps(state, indent=2, sort_keys=True))
    os.replace(temporary, path)


def remove_state_if_owned(path: Path, pid: int) -> None:
    state = read_state(path)
    if state is not None and state.get("pid") == pid:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@contextlib.contextmanager
def file_lock(path: Path, timeout_s: float | None = None) -> Iterator[bool]:
    """Exclusive flock; yields False (not held) if ``timeout_s`` passes first (0: a single try)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (fcntl.LOCK_NB if deadline is not None else 0))
                break
            except BlockingIOError:
                if deadline is None or time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.2)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def modified_at(path: Path) -> float:
    """The file's mtime; 0.0 where it is missing."""
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def log_tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return "(no log)"
