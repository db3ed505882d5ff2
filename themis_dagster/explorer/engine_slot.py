"""The playground's engine: built by the platform's engine resource, only while it holds the ``engine`` pool slot.

Runs take one slot of the Dagster instance's ``engine`` pool for every step that loads an
engine (``runs/pools.py``), so two engines never share an accelerator. The playground takes
a slot of the same pool, as a pending step of its own pseudo-run ``themis-ui:<host>:<pid>:<start>``,
before it builds an engine, and waits (saying so) while runs hold them all. It keeps one
engine warm for successive requests and gives engine and slot back together: when it has been
idle for the page's keep-warm setting (default ``THEMIS_UI_ENGINE_IDLE_S``, 120 seconds), as soon
as another step waits for the pool, or when the app's process ends. A slot left by an app process
that died is freed by the next one that asks (its pid is gone: ``runs/owner.py``).

Models behind an API, the ``openai`` engine and a ``vllm-server`` already running for the model
are answered over HTTP and load nothing on this host's devices: they take no slot
(:func:`needs_slot`, as the engine registry's ``EngineKind.loads_here`` says). A ``vllm-server`` that
is not running yet is started on a device, so it takes the slot as the in-process engine does. The engine is
the one ``THEMIS_ENGINE`` names, from the engine registry (``resources/engine_registry.py``): the playground is
no second inference stack.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, Unpack

from themis_dagster.engines.base import Engine
from themis_dagster.registry.models import ModelSpec
from themis_dagster.settings import PROJECT_ROOT, Settings

LOG = logging.getLogger(__name__)
STEP_KEY = "playground"
RUN_PREFIX = "themis-ui:"
DEFAULT_IDLE_S = 120.0
POLL_S = 1.0


class EngineBusyError(TimeoutError):
    """Every ``engine`` slot stayed taken by runs for as long as the playground was willing to wait."""


def _env_seconds(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, "") or default)
    except ValueError:
        return default


def run_id() -> str:
    """This process's pseudo-run id in the pool: host, pid and the process's start (``runs/owner.py``)."""
    from themis_dagster.runs.owner import process_start

    return f"{RUN_PREFIX}{socket.gethostname()}:{os.getpid()}:{process_start(os.getpid())}"


def _owner_gone(claimant: str) -> bool:
    """Whether a playground pseudo-run's process is gone (only on this host; elsewhere it cannot be told)."""
    from themis_dagster.runs.owner import HOST_TAG, PID_TAG, START_TAG, owner_liveness

    parts = claimant.removeprefix(RUN_PREFIX).split(":", 2)
    if not claimant.startswith(RUN_PREFIX) or len(parts) != 3:
        return False
    host, pid, start = parts
    return owner_liveness({HOST_TAG: host, PID_TAG: pid, START_TAG: start}) == "gone"


def dagster_instance() -> Any:
    """The Dagster instance of ``$DAGSTER_HOME`` (default: the project's ``.dagster_home``, as ``themis`` uses)."""
    from dagster import DagsterInstance

    home = Path(os.environ.setdefault("DAGSTER_HOME", str(PROJECT_ROOT / ".dagster_home")))
    home.mkdir(parents=True, exist_ok=True)
    shipped, target = PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml"
    if shipped.is_file() and not target.exists():
        target.write_text(shipped.read_text())
    return DagsterInstance.get()


def needs_slot(spec: ModelSpec, settings: Settings) -> bool:
    """Whether answering ``spec`` would put an engine on this host's devices (then it takes an ``engine`` slot).

    The engine registry says, for the kind ``THEMIS_ENGINE`` names (``EngineKind.loads_here``).
    """
    from themis_dagster.resources.engine_registry import engine_kind

    return engine_kind(settings.engine).loads_here(spec, settings)


@dataclass
class _Held:
    model: str
    resource: Any
    engine: Engine
    claimed: bool
    last_used: float
    load_s: float = 0.0  # how long the engine took to load (with the wait for the pool)


@dataclass(frozen=True)
class Loading:
    """What the slot is doing for a model that is not warm yet: waiting for the pool, or loading it, since when."""

    model: str
    phase: str
    started: float


class Waiting(TypedDict, total=False):
    """How a request waits for the engine pool (:meth:`EngineSlot.engine`'s keywords): for at most ``wait_s``
    seconds, told once through ``on_wait``, polling with ``sleep``."""

    wait_s: float
    on_wait: Callable[[str], None] | None
    sleep: Callable[[float], None]


class EngineSlot:
    """One warm engine per app process, held only together with an ``engine`` pool slot."""

    def __init__(self, instance_factory: Callable[[], Any] = dagster_instance) -> None:
        self._instance_factory = instance_factory
        self._instance: Any = None
        self._lock = threading.RLock()
        self._held: _Held | None = None
        self._watcher: threading.Thread | None = None
        self.run_id = run_id()
        self.idle_s: float | None = None  # keep-warm: idle seconds before release (None: THEMIS_UI_ENGINE_IDLE_S)
        self.loading: Loading | None = None
        self.last_load_s: dict[str, float] = {}  # model -> seconds its last load took (what a new load may take)

    # -- the pool ------------------------------------------------------------------------------

    def instance(self) -> Any:
        if self._instance is None:
            self._instance = self._instance_factory()
        return self._instance

    def _storage(self) -> Any:
        return self.instance().event_log_storage

    def _free_dead_claims(self) -> None:
        from themis_dagster.runs.pools import ENGINE_POOL

        info = self._storage().get_concurrency_info(ENGINE_POOL)
        claimants = {slot.run_id for slot in info.claimed_slots} | {step.run_id for step in info.pending_steps}
        for claimant in sorted(c for c in claimants if c and c != self.run_id and _owner_gone(c)):
            self._storage().free_concurrency_slots_for_run(claimant)

    def pool_state(self) -> str:
        """Who holds and who waits for the ``engine`` pool, in words."""
        from themis_dagster.runs.pools import ENGINE_POOL

        info = self._storage().get_concurrency_info(ENGINE_POOL)
        holders = sorted({slot.run_id for slot in info.claimed_slots if slot.run_id})
        waiting = [step.run_id for step in info.pending_steps if step.assigned_timestamp is None]
        limit = "no limit" if info.limit is None else f"{info.limit} slot(s)"
        return f"engine pool: {limit}; held by {', '.join(holders) or 'nobody'}; {len(waiting)} step(s) waiting"

    def others_waiting(self) -> bool:
        from themis_dagster.runs.pools import ENGINE_POOL

        info = self._storage().get_concurrency_info(ENGINE_POOL)
        return any(step.run_id != self.run_id and step.assigned_timestamp is None for step in info.pending_steps)

    def _claim(self, wait_s: float, on_wait: Callable[[str], None] | None, sleep: Callable[[float], None]) -> None:
        """Take a slot of the ``engine`` pool, waiting up to ``wait_s``; EngineBusyError past it."""
        from themis_dagster.runs.pools import ENGINE_POOL, ensure_engine_pool_limit

        instance = self.instance()
        storage = instance.event_log_storage
        # the pool's slots are made on first use from dagster.yaml's default_limit, as Dagster's executor makes
        # them; a home whose dagster.yaml limits no pool gets 1, as `themis run` gives it
        no_slots = storage.get_concurrency_info(ENGINE_POOL).slot_count == 0
        if no_slots and not storage.initialize_concurrency_limit_to_default(ENGINE_POOL):
            ensure_engine_pool_limit(instance)
        self._free_dead_claims()
        deadline = time.monotonic() + max(wait_s, 0.0)
        told = False
        while True:
            status = instance.event_log_storage.claim_concurrency_slot(ENGINE_POOL, self.run_id, STEP_KEY)
            if status.is_claimed:
                return
            if time.monotonic() >= deadline:
                instance.event_log_storage.free_concurrency_slot_for_step(self.run_id, STEP_KEY)
                raise EngineBusyError(
                    f"every slot of the engine pool stayed taken for {wait_s:g} s ({self.pool_state()}); "
                    "a run is using the accelerator: try again when it finishes"
                )
            if on_wait is not None and not told:
                on_wait(f"Waiting for the engine pool: a run holds it ({self.pool_state()}).")
                told = True
            if self.loading is not None and self.loading.phase != "waiting for the engine pool (a run holds it)":
                self.loading = Loading(self.loading.model, "waiting for the engine pool (a run holds it)",
                                       self.loading.started)  # fmt: skip
            sleep(POLL_S)

    def _unclaim(self) -> None:
        try:
            self._storage().free_concurrency_slot_for_step(self.run_id, STEP_KEY)
        except Exception as error:  # noqa: BLE001 - giving back must never fail the page; the next claim frees it
            LOG.warning("could not give the engine pool slot of %s back: %s", self.run_id, error)

    # -- the engine ----------------------------------------------------------------------------

    @contextmanager
    def engine(
        self,
        spec: ModelSpec,
        settings: Settings,
        *,
        wait_s: float = 30.0,
        on_wait: Callable[[str], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Iterator[Engine]:
        """The engine of ``spec`` for one request (warm when the last request used the same model)."""
        with self._lock:
            held = self._held
            if held is not None and (held.model != spec.id or (held.claimed and not self._still_claimed())):
                self.release()
                held = None
            if held is None:
                held = self._load(spec, settings, wait_s, on_wait, sleep)
            try:
                yield held.engine
            finally:
                held.last_used = time.monotonic()
                if held.claimed and self.others_waiting():
                    self.release()  # a run waits for the accelerator: it goes first
        self._watch()

    def _still_claimed(self) -> bool:
        from themis_dagster.runs.pools import ENGINE_POOL

        info = self._storage().get_concurrency_info(ENGINE_POOL)
        return any(slot.run_id == self.run_id and slot.step_key == STEP_KEY for slot in info.claimed_slots)

    def _load(
        self,
        spec: ModelSpec,
        settings: Settings,
        wait_s: float,
        on_wait: Callable[[str], None] | None,
        sleep: Callable[[float], None],
    ) -> _Held:
        from themis_dagster.registry.weights import resolve_weights
        from themis_dagster.resources.engine_registry import engine_resource

        claimed = needs_slot(spec, settings)
        started = time.monotonic()
        self.loading = Loading(spec.id, "taking a slot of the engine pool", started)
        try:
            if claimed:
                self._claim(wait_s, on_wait, sleep)
            self.loading = Loading(spec.id, "loading the engine (weights, compilation)", started)
            try:
                resource = engine_resource(settings)
                weights = resolve_weights(spec, settings.models_dir, settings.cache_dir)
                engine = resource.engine_for(spec, weights)
            except BaseException:
                if claimed:
                    self._unclaim()
                raise
        finally:
            self.loading = None
        load_s = time.monotonic() - started
        self.last_load_s[spec.id] = load_s
        self._held = _Held(spec.id, resource, engine, claimed, time.monotonic(), load_s)
        return self._held

    def preload(self, spec: ModelSpec, settings: Settings, **waiting: Unpack[Waiting]) -> None:
        """Make ``spec``'s engine warm without asking it anything (the page follows ``loading`` meanwhile); it waits
        for the engine pool as :meth:`engine` does."""
        with self.engine(spec, settings, **waiting):
            pass

    def warm(self) -> dict[str, Any] | None:
        """The warm engine in words: its model, how long it took to load, how long it has been idle, and how long
        it stays warm idle (None: no engine is warm)."""
        held = self._held
        if held is None:
            return None
        return {
            "model": held.model,
            "load_s": held.load_s,
            "idle_s": time.monotonic() - held.last_used,
            "keep_warm_s": self.keep_warm_s(),
            "holds_slot": held.claimed,
        }

    def keep_warm_s(self) -> float:
        """Idle seconds before the engine is given back (the page's setting, else ``THEMIS_UI_ENGINE_IDLE_S``)."""
        return self.idle_s if self.idle_s is not None else _env_seconds("THEMIS_UI_ENGINE_IDLE_S", DEFAULT_IDLE_S)

    def loaded(self) -> str | None:
        """The model whose engine is warm (None: none)."""
        held = self._held
        return None if held is None else held.model

    def release(self) -> None:
        """Shut the engine down and give the slot back (both, always together)."""
        with self._lock:
            held, self._held = self._held, None
            if held is None:
                return
            try:
                held.resource.release()
            finally:
                if held.claimed:
                    self._unclaim()

    def _watch(self) -> None:
        """Start the thread that gives engine and slot back when idle or when a run waits for the pool."""
        if self._watcher is not None and self._watcher.is_alive():
            return
        self._watcher = threading.Thread(target=self._watch_loop, name="themis-ui-engine-slot", daemon=True)
        self._watcher.start()

    def _watch_loop(self) -> None:
        while self._held is not None:
            time.sleep(POLL_S)
            held = self._held
            if held is None:
                return
            if not self._lock.acquire(blocking=False):
                continue  # a request is running
            try:
                if time.monotonic() - held.last_used > self.keep_warm_s() or (held.claimed and self.others_waiting()):
                    self.release()
            except Exception as error:  # noqa: BLE001 - the watcher must outlive a storage hiccup; it tries again
                LOG.warning("engine slot watcher: %s", error)
            finally:
                self._lock.release()


_SLOT: EngineSlot | None = None
_SLOT_LOCK = threading.Lock()


def shared_slot() -> EngineSlot:
    """The app process's one engine slot (shared by every browser session)."""
    global _SLOT
    with _SLOT_LOCK:
        if _SLOT is None:
            _SLOT = EngineSlot()
            atexit.register(_SLOT.release)
        return _SLOT
