"""A persistent ``vllm serve`` per model, so successive runs (separate processes) reuse a warm engine.

Design: one detached *supervisor* per server, and a few small files per model in ``state_dir``:

- ``<model>.json``: the state (supervisor pid = process group id, port, fingerprint, start times).
- ``<model>.lock``: an ``flock`` held while a process starts, attaches to or retires the server,
  so two runs that arrive together start one server, and an attach never races an idle shutdown.
- ``<model>.last_used``: its mtime is the last use; touched on every attach and by the engine
  before and after every batch (a plain ``utime``, no read-modify-write of the state).
- ``<model>.log``: the supervisor's and vLLM's output. ``<model>.starts``: one JSON line per
  start, so the number of starts survives restarts and is visible to every process.

``VLLMServerManager.ensure`` attaches when the state names a live supervisor whose server is
healthy (GET /health and /v1/models) and whose fingerprint matches (model path, weights hash,
the serve arguments, vLLM's version); otherwise it stops a stale server and starts
``python -m themis_dagster.engines.vllm.server supervise <state>`` with ``start_new_session``
(setsid: it outlives the run). The supervisor runs ``vllm serve`` as its child in the same
process group (with PDEATHSIG, so vLLM dies with it), and every few seconds compares the last
use with ``idle_shutdown_s`` (re-read from the state, so the latest attach's value wins),
treating a server that reports requests in flight (GET /load) as busy. When idle it deletes
the state under the lock, then stops vLLM; if vLLM dies on its own it cleans up and exits.
``stop`` ends the whole process group.

Servers are per host: the state names processes (pids, a process group) and a loopback URL,
which mean nothing on another machine. So the state records its host (name and boot id); a
state written by another host is never attached to nor stopped: ``ensure`` and ``stop`` fail
naming ``THEMIS_SERVER_STATE_DIR`` (a folder shared between hosts, e.g. when runs of one model
land on several Ray nodes, must be made local to each host), and a state from an earlier boot
of this host is stale (its pids are not this boot's processes) and is replaced without killing
anything. The serve arguments are those of the in-process
``VLLMEngine`` (``engine_kwargs``: dtype, seed, max model length, memory fraction or KV cache size)
and the same ``VLLM_CPU_OMP_THREADS_BIND`` default.

This module is the manager that runs use (``VLLMServerManager``) and the ``python -m`` entry
point; the rest lives by concern: ``server_state`` (the files and the lock), ``serve_command``
(the ``vllm serve`` command line and its fingerprint), ``server_health`` (GET /health, /load),
``supervisor`` (the detached process) and ``runs.processes`` (what /proc says about a pid).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from themis_dagster.engines.precision import engine_environment
from themis_dagster.engines.vllm.prompt_logprobs import ENV_SWITCH
from themis_dagster.engines.vllm.serve_command import (
    ENTRY_POINT,
    HOST,
    cpu_thread_binding,
    free_port,
    run_vllm_serve,
    serve_argv,
    serve_flags,
    served_model_name,
    server_fingerprint,
)
from themis_dagster.engines.vllm.server_health import server_healthy
from themis_dagster.engines.vllm.server_state import (
    ServerPaths,
    ServerStartError,
    ServerStateHostError,
    file_lock,
    host_fields,
    log_tail,
    read_state,
    remove_state_if_owned,
    usable_state,
    write_state,
)
from themis_dagster.engines.vllm.startup import configure_compile_cache, has_cuda
from themis_dagster.engines.vllm.supervisor import STOP_GRACE_S, supervise
from themis_dagster.registry.models import ModelSpec
from themis_dagster.runs.processes import boot_id, group_members, pid_alive, process_start_time

# What the rest of the code (resources, bench, tests) imports from here.
__all__ = [
    "ServerHandle",
    "ServerPaths",
    "ServerStartError",
    "ServerStateHostError",
    "VLLMServerManager",
    "boot_id",
    "group_members",
    "host_fields",
    "main",
    "pid_alive",
    "process_start_time",
    "read_state",
    "serve_argv",
    "serve_flags",
    "usable_state",
]


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@dataclass
class ServerHandle:
    """A healthy server a run may use; ``started`` says whether this call started it."""

    state: dict[str, Any]
    paths: ServerPaths
    started: bool
    seconds: float

    @property
    def base_url(self) -> str:
        return str(self.state["base_url"])

    @property
    def served_model(self) -> str:
        return str(self.state["served_model"])

    def touch(self) -> None:
        """Record a use now (keeps the idle watchdog away)."""
        with contextlib.suppress(OSError):
            self.paths.last_used.touch()


class VLLMServerManager:
    """Starts, finds and stops the per-model servers described by the files in ``state_dir``."""

    starts: ClassVar[int] = 0  # servers started by this process

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self._children: list[subprocess.Popen[bytes]] = []

    def paths(self, model_id: str) -> ServerPaths:
        return ServerPaths(self.state_dir, model_id)

    def state(self, model_id: str) -> dict[str, Any] | None:
        return read_state(self.paths(model_id).state)

    def start_count(self, model_id: str) -> int:
        """Servers ever started for this model from this state directory (all processes)."""
        try:
            return sum(1 for line in self.paths(model_id).starts.read_text().splitlines() if line.strip())
        except OSError:
            return 0

    def running(self, model_id: str) -> bool:
        state = self.state(model_id)
        return state is not None and pid_alive(state.get("pid"), state.get("pid_start"))

    def ensure(
        self,
        spec: ModelSpec,
        model_path: str,
        weights_sha256: str,
        idle_shutdown_s: float,
        startup_timeout_s: float,
    ) -> ServerHandle:
        """Attach to this model's healthy server, or start one; wait until it answers."""
        began = time.monotonic()
        for child in self._children:
            child.poll()  # reap a supervisor that exited, so it is not mistaken for a live one
        paths = self.paths(spec.id)
        model_path = str(Path(model_path).resolve())
        on_gpu = has_cuda()
        env = {ENV_SWITCH: os.environ.get(ENV_SWITCH, "1"), **engine_environment(spec)}
        if not on_gpu:
            env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_thread_binding()
            configure_compile_cache()  # the server inherits it; a speed setting, so not in its fingerprint
        fingerprint = server_fingerprint(serve_argv(spec, model_path, 0, on_gpu), weights_sha256, env)
        with file_lock(paths.lock, timeout_s=startup_timeout_s + STOP_GRACE_S) as held:
            if not held:
                raise ServerStartError(f"timed out waiting for the lock {paths.lock}")
            state = usable_state(read_state(paths.state), paths)
            if state is not None and self._attachable(state, fingerprint):
                if state.get("idle_shutdown_s") != idle_shutdown_s:
                    state["idle_shutdown_s"] = idle_shutdown_s
                    write_state(paths.state, state)
                handle = ServerHandle(state, paths, started=False, seconds=time.monotonic() - began)
                handle.touch()
                return handle
            if state is not None:
                self._stop_locked(paths, state)
            state = self._start_locked(spec, paths, model_path, on_gpu, env, fingerprint, idle_shutdown_s)
            self._wait_ready(paths, state, startup_timeout_s)
            handle = ServerHandle(state, paths, started=True, seconds=time.monotonic() - began)
            handle.touch()
            return handle

    def _attachable(self, state: dict[str, Any], fingerprint: str) -> bool:
        return (
            state.get("status") == "ready"
            and state.get("fingerprint") == fingerprint
            and pid_alive(state.get("pid"), state.get("pid_start"))
            and server_healthy(str(state.get("base_url")), str(state.get("served_model")))
        )

    def _start_locked(
        self,
        spec: ModelSpec,
        paths: ServerPaths,
        model_path: str,
        on_gpu: bool,
        env: dict[str, str],
        fingerprint: str,
        idle_shutdown_s: float,
    ) -> dict[str, Any]:
        port = free_port()
        argv = serve_argv(spec, model_path, port, on_gpu)
        state: dict[str, Any] = {
            "model_id": spec.id,
            "served_model": served_model_name(spec),
            "model_path": model_path,
            "base_url": f"http://{HOST}:{port}",
            "port": port,
            "argv": argv,
            "env": env,
            "fingerprint": fingerprint,
            "idle_shutdown_s": idle_shutdown_s,
            "status": "starting",
            "pid": None,
            "started_at": time.time(),
            "log_file": str(paths.log),
            **host_fields(),
        }
        write_state(paths.state, state)
        with paths.log.open("ab") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(argv)}\n".encode())
            log.flush()
            supervisor = subprocess.Popen(
                [sys.executable, "-m", ENTRY_POINT, "supervise", str(paths.state)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=str(paths.state_dir),
                env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )
        self._children.append(supervisor)
        state["pid"] = supervisor.pid
        state["pid_start"] = process_start_time(supervisor.pid)
        write_state(paths.state, state)
        return state

    def _wait_ready(self, paths: ServerPaths, state: dict[str, Any], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not pid_alive(state["pid"], state.get("pid_start")):
                self._fail(paths, state, "the server exited during startup")
            if server_healthy(state["base_url"], state["served_model"], timeout_s=2.0):
                state["status"] = "ready"
                state["ready_at"] = time.time()
                state["startup_seconds"] = round(state["ready_at"] - state["started_at"], 2)
                write_state(paths.state, state)
                with paths.starts.open("a") as starts:
                    record = {key: state[key] for key in ("pid", "port", "started_at", "startup_seconds")}
                    starts.write(json.dumps(record) + "\n")
                VLLMServerManager.starts += 1
                return
            time.sleep(1.0)
        self._fail(paths, state, f"the server was not healthy after {timeout_s:g} s")

    def _fail(self, paths: ServerPaths, state: dict[str, Any], reason: str) -> None:
        self._stop_locked(paths, state)
        raise ServerStartError(f"{reason} (log {paths.log}):\n{log_tail(paths.log)}")

    def _stop_locked(self, paths: ServerPaths, state: dict[str, Any]) -> None:
        pid = state.get("pid")
        if pid and pid_alive(pid, state.get("pid_start")):
            _signal_group(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE_S
            while group_members(pid) and time.monotonic() < deadline:
                for child in self._children:
                    child.poll()
                time.sleep(0.2)
            _signal_group(pid, signal.SIGKILL)
        for child in self._children:
            child.poll()
        if pid:
            remove_state_if_owned(paths.state, pid)
        else:
            paths.state.unlink(missing_ok=True)

    def stop(self, model_id: str) -> bool:
        """Stop this model's server (all its processes); False if none was running."""
        paths = self.paths(model_id)
        with file_lock(paths.lock):
            state = usable_state(read_state(paths.state), paths)
            if state is None:
                return False
            running = pid_alive(state.get("pid"), state.get("pid_start"))
            self._stop_locked(paths, state)
            return running

    def set_idle_shutdown(self, model_id: str, seconds: float) -> None:
        """Change a running server's idle limit (the supervisor re-reads it every poll)."""
        paths = self.paths(model_id)
        with file_lock(paths.lock):
            state = read_state(paths.state)
            if state is not None:
                state["idle_shutdown_s"] = seconds
                write_state(paths.state, state)


def main(argv: list[str] | None = None) -> int:
    """``python -m themis_dagster.engines.vllm.server`` ``supervise <state.json>`` | ``stop <state_dir> <model>``
    | ``serve <vllm serve arguments>``."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "serve":
        return run_vllm_serve(args[1:])
    if len(args) == 2 and args[0] == "supervise":
        return supervise(Path(args[1]))
    if len(args) == 3 and args[0] == "stop":
        return 0 if VLLMServerManager(Path(args[1])).stop(args[2]) else 1
    print(main.__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
