"""Which accelerators a run's engine may use, so that two runs on one host never share a GPU.

Admission is Dagster's: the queue admits runs under ``concurrency.pools`` (granularity
``run``) and ``tag_concurrency_limits`` on ``dagster/partition/model``
(``deploy/dagster.multi-gpu.yaml``). Which GPUs an admitted run gets is decided here, also with
Dagster's own machinery: each device the host lends runs (``THEMIS_DEVICES``) is a concurrency
pool ``gpu/<device>`` of one slot, kept in the instance's storage (SQLite or PostgreSQL), and
a run claims the slots of the devices it needs with ``claim_concurrency_slot``, the same
transactional claim the executor makes for a step (with the compare-and-set fix of
``dagster_fixes``, installed here on import, since a process that claims devices may import
nothing else of the project). A claimed slot is held until the run frees it
(``release_devices``) or, when its worker dies, until Dagster's run monitoring frees the slots
of ended runs (``run_monitoring.free_slots_after_run_end_seconds``).

A model needing n devices (``tensor_parallel_size x pipeline_parallel_size``) claims n free
ones at once or none: a partial claim is given back before waiting, so two runs never hold half
of what each needs (no deadlock). The chosen devices go into ``CUDA_VISIBLE_DEVICES`` before the
engine starts (vLLM's worker processes inherit it) and into the run's ``themis/devices`` tag.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Sequence

from dagster import DagsterInstance
from sqlalchemy.exc import IntegrityError

from themis_dagster.runs import dagster_fixes

dagster_fixes.install()  # device slots are claimed by other processes at the same moment, also on SQLite

DEVICE_POOL_PREFIX = "gpu/"
CLAIM_STEP = "themis-devices"  # the "step" the run's device slots are claimed for
DEVICES_TAG = "themis/devices"
CLAIMED_AT_TAG = "themis/devices_claimed_at"  # Unix times: when the run got its devices and gave them back
RELEASED_AT_TAG = "themis/devices_released_at"
_DEVICE_ID = re.compile(r"^(?:\d{1,3}|GPU-[0-9a-fA-F-]{8,64}|MIG-[0-9A-Za-z/-]{8,80})$")


class DeviceClaimError(RuntimeError):
    """A run cannot get the devices it needs on this host; the message names the setting."""


def parse_devices(text: str) -> tuple[str, ...]:
    """``THEMIS_DEVICES`` (``"0,1,2,3"``, or GPU/MIG UUIDs) as a tuple; an empty text lends none."""
    devices = tuple(part.strip() for part in text.split(",") if part.strip())
    for device in devices:
        if not _DEVICE_ID.match(device):
            raise ValueError(f"THEMIS_DEVICES: {device!r} is not a device index or a GPU/MIG UUID")
    if len(set(devices)) != len(devices):
        raise ValueError(f"THEMIS_DEVICES: a device is listed twice in {text!r}")
    return devices


def device_pool(device: str) -> str:
    """The one-slot Dagster concurrency pool standing for one device."""
    return f"{DEVICE_POOL_PREFIX}{device}"


def ensure_device_pools(instance: DagsterInstance, devices: Sequence[str], attempts: int = 5) -> None:
    """Give each device's pool exactly one slot (a pool made by hand with more is set back to one).

    Runs starting together may create a pool at the same moment. Dagster 1.13's
    ``set_concurrency_slots`` looks for the pool's limit row ``FOR UPDATE``, which SQLite
    ignores, so both insert it and the later one fails with ``UNIQUE constraint failed:
    concurrency_limits``. The loser looks again: the row the winner wrote is then there.
    """
    storage = instance.event_log_storage
    for attempt in range(attempts):
        try:
            infos = storage.get_concurrency_infos([device_pool(device) for device in devices])
            for pool, info in infos.items():
                if info.slot_count != 1:
                    storage.set_concurrency_slots(pool, 1)
            return
        except IntegrityError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))


def holders(instance: DagsterInstance, devices: Sequence[str]) -> dict[str, str | None]:
    """Each device and the run holding it (None: free)."""
    infos = instance.event_log_storage.get_concurrency_infos([device_pool(device) for device in devices])
    return {
        device: next((slot.run_id for slot in infos[device_pool(device)].claimed_slots), None) for device in devices
    }


def _try_claim(instance: DagsterInstance, run_id: str, wanted: Sequence[str]) -> bool:
    """Claim every device in ``wanted`` or none (what was claimed is given back on failure)."""
    storage = instance.event_log_storage
    for device in wanted:
        if not storage.claim_concurrency_slot(device_pool(device), run_id, CLAIM_STEP).is_claimed:
            storage.free_concurrency_slot_for_step(run_id, CLAIM_STEP)  # also drops our pending entries
            return False
    return True


def claim_devices(
    instance: DagsterInstance,
    run_id: str,
    count: int,
    devices: Sequence[str],
    *,
    required: Sequence[str] | None = None,
    poll_s: float = 1.0,
    timeout_s: float | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[str, ...]:
    """Claim ``count`` of the host's ``devices`` for ``run_id``, waiting while others hold them.

    ``required``: exactly these devices (a process whose CUDA runtime is already pointed at
    them). A model needing more devices than the host lends fails at once, naming the setting.
    """
    if count < 1:
        return ()
    if count > len(devices):
        raise DeviceClaimError(
            f"the model needs {count} GPUs (engine.tensor_parallel_size x engine.pipeline_parallel_size) "
            f"but THEMIS_DEVICES lends this host's runs {len(devices)} ({','.join(devices) or 'none'})"
        )
    if required is not None and (len(required) != count or not set(required) <= set(devices)):
        raise DeviceClaimError(
            f"this process already uses devices {','.join(required)} (CUDA reads CUDA_VISIBLE_DEVICES once); "
            f"a model needing {count} of THEMIS_DEVICES={','.join(devices)} needs a new process"
        )
    ensure_device_pools(instance, devices)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    announced = False
    while True:
        held = holders(instance, devices)
        mine = [device for device, run in held.items() if run == run_id]
        if len(mine) >= count:
            return tuple(mine[:count])  # claimed earlier in this run (a retried step)
        free = [device for device, run in held.items() if run is None]
        wanted = list(required) if required is not None else free[:count]
        if all(device in free for device in wanted) and len(wanted) == count and _try_claim(instance, run_id, wanted):
            return tuple(wanted)
        if deadline is not None and time.monotonic() > deadline:
            raise DeviceClaimError(f"no {count} free GPUs of THEMIS_DEVICES={','.join(devices)} within {timeout_s} s")
        if not announced and log is not None:
            busy = ", ".join(f"{device}: run {run[:8]}" for device, run in held.items() if run is not None)
            log(f"waiting for {count} free GPU(s) of {','.join(devices)}; in use: {busy or 'none'}")
            announced = True
        time.sleep(poll_s)


def release_devices(instance: DagsterInstance, run_id: str, record: bool = False) -> None:
    """Give back the run's device slots (idempotent); ``record``: note the time in the run's tags."""
    instance.event_log_storage.free_concurrency_slot_for_step(run_id, CLAIM_STEP)
    if record:
        instance.add_run_tags(run_id, {RELEASED_AT_TAG: f"{time.time():.3f}"})


def cuda_pinned_devices() -> tuple[str, ...] | None:
    """The devices this process's CUDA runtime already uses, if it started (it reads CUDA_VISIBLE_DEVICES once).

    A process that keeps an engine warm across runs (``themis run``) must claim the same devices again.
    """
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return None
    return parse_devices(os.environ.get("CUDA_VISIBLE_DEVICES", ""))


def assign_devices(
    instance: DagsterInstance,
    run_id: str,
    count: int,
    devices: Sequence[str],
    log: Callable[[str], None] | None = None,
) -> tuple[str, ...]:
    """Claim the run's devices and point this process (and the engine processes it spawns) at them."""
    chosen = claim_devices(instance, run_id, count, devices, required=cuda_pinned_devices(), log=log)
    if chosen:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(chosen)
        instance.add_run_tags(run_id, {DEVICES_TAG: ",".join(chosen), CLAIMED_AT_TAG: f"{time.time():.3f}"})
    return chosen
