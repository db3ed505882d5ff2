"""The detached process that owns one ``vllm serve`` (``python -m themis_dagster.engines.vllm.server supervise``).

It runs the server as its child in its own process group (with PDEATHSIG, so vLLM dies with
it) and every few seconds compares the last use with ``idle_shutdown_s`` (re-read from the
state, so the latest attach's value wins), treating a server that reports requests in flight
(GET /load) as busy. When idle it deletes the state under the lock, then stops vLLM; if vLLM
dies on its own it cleans up and exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from themis_dagster.engines.vllm.server_health import server_load
from themis_dagster.engines.vllm.server_state import (
    ServerPaths,
    file_lock,
    modified_at,
    read_state,
    remove_state_if_owned,
)

STOP_GRACE_S = 60.0


def _say(message: str) -> None:
    print(f"[supervisor {os.getpid()} {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _die_with_parent() -> None:
    """In the vLLM child: receive SIGTERM when the supervisor dies (Linux prctl PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM))


def _retire_if_idle(paths: ServerPaths, last_busy: float) -> bool:
    """Under the lock (never waiting for it: an attach in progress means "in use"), drop the state if idle."""
    with file_lock(paths.lock, timeout_s=0) as held:
        if not held:
            return False
        state = read_state(paths.state)
        if state is None or state.get("pid") != os.getpid():
            return True
        last = max(modified_at(paths.last_used), last_busy, float(state.get("ready_at") or 0.0))
        if time.time() - last < float(state["idle_shutdown_s"]):
            return False
        paths.state.unlink(missing_ok=True)
        return True


def supervise(state_file: Path) -> int:
    """Run ``vllm serve`` from the state file; stop it when idle, clean up when it dies."""
    paths = ServerPaths.of_state(state_file)
    state = read_state(state_file)
    if state is None:
        _say(f"no state file {state_file}")
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    child = subprocess.Popen(state["argv"], stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    _say(f"vllm serve pid {child.pid} on {state['base_url']}")
    last_busy = time.time()
    reason = "stop requested"
    while not stop.is_set():
        current = read_state(state_file)
        limit = float((current or state).get("idle_shutdown_s") or 600.0)
        try:
            child.wait(timeout=min(1.0, max(0.2, limit / 5)))
        except subprocess.TimeoutExpired:
            pass
        else:
            reason = f"vllm exited with code {child.returncode}"
            break
        if stop.is_set():
            break
        current = read_state(state_file)
        if current is None or current.get("pid") not in (None, os.getpid()):
            reason = "the state file no longer names this server"
            break
        if current.get("status") != "ready":
            continue
        if server_load(str(current["base_url"])):
            last_busy = time.time()
        last = max(modified_at(paths.last_used), last_busy, float(current.get("ready_at") or 0.0))
        if time.time() - last >= float(current["idle_shutdown_s"]) and _retire_if_idle(paths, last_busy):
            reason = f"idle for {time.time() - last:.0f} s"
            break
    if stop.is_set():
        reason = "stop requested"  # the group got SIGTERM: vLLM may have exited first
    _say(f"shutting down: {reason}")
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    current = read_state(state_file)
    # A stopper, or the process waiting for this server to start, holds the lock and cleans up itself.
    if reason != "stop requested" and current is not None and current.get("status") == "ready":
        with file_lock(paths.lock, timeout_s=5) as held:
            if held:
                remove_state_if_owned(state_file, os.getpid())
    _say(f"stopped (vllm exit code {child.returncode})")
    return 0
