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
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import httpx

from themis_dagster.engines.vllm.engine import engine_kwargs, has_cuda, library_versions
from themis_dagster.engines.vllm.prompt_logprobs import ENV_SWITCH
from themis_dagster.registry.models import ModelSpec

HOST = "127.0.0.1"
STOP_GRACE_S = 60.0


class ServerStartError(RuntimeError):
    """The server did not become healthy; the message ends with the tail of its log."""


class ServerStateHostError(ServerStartError):
    """The state folder holds a server of another host (servers are per host); the message names the setting."""


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


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


# -- processes ----------------------------------------------------------------------------------


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state is [0], pgrp [2], start time [19])."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()


def process_start_time(pid: int) -> int | None:
    fields = _proc_stat(pid)
    return int(fields[19]) if fields else None


def pid_alive(pid: int | None, start_time: int | None = None) -> bool:
    """True for a running (not zombie) process; with ``start_time``, only if it is the same process."""
    if not pid:
        return False
    fields = _proc_stat(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return start_time is None or int(fields[19]) == start_time


def group_members(pgid: int) -> list[int]:
    """Live processes of a process group (the supervisor, vLLM and its workers)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _proc_stat(int(entry.name))
            if fields and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
                members.append(int(entry.name))
    return members


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _die_with_parent() -> None:
    """In the vLLM child: receive SIGTERM when the supervisor dies (Linux prctl PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


# -- files --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerPaths:
    """The files that describe one model's server."""

    state_dir: Path
    model_id: str

    def _file(self, suffix: str) -> Path:
        return self.state_dir / f"{self.model_id}{suffix}"

    @property
    def state(self) -> Path:
        return self._file(".json")

    @property
    def lock(self) -> Path:
        return self._file(".lock")

    @property
    def last_used(self) -> Path:
        return self._file(".last_used")

    @property
    def log(self) -> Path:
        return self._file(".log")

    @property
    def starts(self) -> Path:
        return self._file(".starts")

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


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _log_tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return "(no log)"


# -- the server's command line ------------------------------------------------------------------


def cpu_thread_binding() -> str:
    """The VLLMEngine default: every core this process may use (vLLM's own default keeps one idle)."""
    if os.environ.get("VLLM_CPU_OMP_THREADS_BIND"):
        return os.environ["VLLM_CPU_OMP_THREADS_BIND"]
    cores = sorted(os.sched_getaffinity(0))
    return f"{cores[0]}-{cores[-1]}" if len(cores) > 1 else str(cores[0])


def served_model_name(spec: ModelSpec) -> str:
    """The name requests use: the model id, or the LoRA adapter's name when one is served."""
    return spec.lora.name if spec.lora is not None else spec.id


def serve_argv(spec: ModelSpec, model_path: str, port: int, on_gpu: bool) -> list[str]:
    """``vllm serve`` with the same engine arguments as the in-process ``VLLMEngine``."""
    kwargs = engine_kwargs(spec, model_path, on_gpu)
    argv = [sys.executable, "-m", "themis_dagster.engines.vllm.server", "serve", str(kwargs.pop("model"))]
    for key, value in kwargs.items():
        flag = key.replace("_", "-")
        if isinstance(value, bool):
            argv.append(f"--{flag}" if value else f"--no-{flag}")
        elif isinstance(value, list | tuple):
            argv += [f"--{flag}", *(str(item) for item in value)]  # argparse nargs="+"
        else:
            argv += [f"--{flag}", str(value)]
    argv += ["--served-model-name", spec.id]
    if spec.lora is not None:
        argv += ["--lora-modules", f"{spec.lora.name}={spec.lora.path.expanduser().resolve()}"]
    if spec.chat_template not in (None, "auto"):
        argv += ["--chat-template", str(spec.chat_template)]
    if spec.reasoning is not None:  # the server splits replies; the engine reads its reasoning field
        argv += ["--reasoning-parser", spec.reasoning.parser]
    argv += [
        "--host",
        HOST,
        "--port",
        str(port),
        "--enable-tokenizer-info-endpoint",  # BOS/EOS for empty-context loglikelihoods
        "--enable-server-load-tracking",  # GET /load: the watchdog's "requests in flight"
        "--disable-uvicorn-access-log",
    ]
    return argv


def serve_flags(argv: list[str]) -> list[str]:
    """The model path and flags of a serve command line, without the interpreter and the port."""
    flags = argv[4:]
    return [arg for i, arg in enumerate(flags) if arg != "--port" and (i == 0 or flags[i - 1] != "--port")]


def server_fingerprint(argv: list[str], weights_sha256: str, env: dict[str, str]) -> str:
    """What makes a running server interchangeable with a fresh one (the port excluded)."""
    versions = library_versions()
    payload = {"argv": serve_flags(argv), "weights": weights_sha256, "env": env, "vllm": versions.get("vllm-cpu", "")}
    payload["vllm"] = payload["vllm"] or versions.get("vllm", "")
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def server_healthy(base_url: str, served_name: str, timeout_s: float = 5.0) -> bool:
    """GET /health answers 200 and GET /v1/models lists the served model."""
    try:
        with httpx.Client(timeout=timeout_s) as client:
            if client.get(base_url + "/health").status_code != 200:
                return False
            models = client.get(base_url + "/v1/models")
            names = {entry.get("id") for entry in models.json().get("data", [])}
    except (httpx.HTTPError, ValueError, AttributeError):
        return False
    return served_name in names


def server_load(base_url: str) -> int | None:
    """Requests in flight (vLLM's GET /load), or None where unknown."""
    try:
        response = httpx.get(base_url + "/load", timeout=5.0)
        return int(response.json()["server_load"]) if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None


# -- the manager (used by runs) -----------------------------------------------------------------


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
        env = {ENV_SWITCH: os.environ.get(ENV_SWITCH, "1")}
        if not on_gpu:
            env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_thread_binding()
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
                [sys.executable, "-m", "themis_dagster.engines.vllm.server", "supervise", str(paths.state)],
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
        raise ServerStartError(f"{reason} (log {paths.log}):\n{_log_tail(paths.log)}")

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


# -- the supervisor (a detached process per server) ---------------------------------------------


def _say(message: str) -> None:
    print(f"[supervisor {os.getpid()} {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _retire_if_idle(paths: ServerPaths, last_busy: float) -> bool:
    """Under the lock (never waiting for it: an attach in progress means "in use"), drop the state if idle."""
    with file_lock(paths.lock, timeout_s=0) as held:
        if not held:
            return False
        state = read_state(paths.state)
        if state is None or state.get("pid") != os.getpid():
            return True
        last = max(_mtime(paths.last_used), last_busy, float(state.get("ready_at") or 0.0))
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
        last = max(_mtime(paths.last_used), last_busy, float(current.get("ready_at") or 0.0))
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


def run_vllm_serve(args: list[str]) -> int:
    """``vllm serve ARGS``; under vllm-cpu its CLI first asks for the version of a "vllm" distribution.

    vllm-cpu installs as ``vllm-cpu``, so that lookup fails (platform-facts); answering it
    with ``<vllm-cpu version>+cpu`` -- the form vLLM's own CPU detection expects -- lets it run.
    """
    import importlib.metadata as metadata

    try:
        metadata.version("vllm")
    except metadata.PackageNotFoundError:
        original = metadata.version
        answer = original("vllm-cpu") + "+cpu"

        def version(distribution_name: str) -> str:
            return answer if distribution_name == "vllm" else original(distribution_name)

        metadata.version = version
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["vllm", "serve", *args]
    vllm_main()  # type: ignore[no-untyped-call]
    return 0


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
