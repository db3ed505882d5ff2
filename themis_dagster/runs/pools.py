"""The ``engine`` pool: at most N steps that load an engine run at once on an instance, whoever launched them.

``max_concurrent_runs`` (dagster.yaml) limits only runs the daemon's queue launches;
``themis run`` executes in its own process (``execute_in_process``) and bypasses that queue.
Dagster's concurrency pools are enforced per step by the executor itself (op granularity:
``InstanceConcurrencyContext.claim`` in ``ActiveExecution``), the in-process executor
included, against slots kept in the instance's storage. So two ``themis run`` commands, or one
and a daemon-launched run, never run their engine steps at the same time: the second waits
for a free slot. The limit is the instance's: ``concurrency.pools.default_limit`` in
dagster.yaml (1), or per pool with ``dagster instance concurrency set engine <n>`` or the UI
(a host with n GPUs may allow n).
"""

from __future__ import annotations

from dagster import DagsterInstance

from themis_dagster.runs import dagster_fixes

dagster_fixes.install()  # pool slots claimed as a compare-and-set, also on SQLite

ENGINE_POOL = "engine"  # pass as ``pool=`` to every asset that loads an engine


def engine_pool_in_use(instance: DagsterInstance) -> bool:
    """Whether any run holds or waits for an ``engine`` slot (call between runs: then none is ours).

    ``themis run`` keeps its engine warm across its runs; it lets it go when another run wants
    the pool, so two engines are not kept in memory (one GPU) at once.
    """
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return False
    info = storage.get_concurrency_info(ENGINE_POOL)
    return bool(info.claimed_slots or info.pending_steps)


def ensure_engine_pool_limit(instance: DagsterInstance, slots: int = 1) -> bool:
    """Give the pool ``slots`` on an instance that limits it nowhere; True if it did.

    A Dagster home made before the pool existed keeps its old dagster.yaml (``themis`` copies
    the shipped one only into a new home): without this, ``themis run`` would stay unlimited
    there. A limit set on the instance, or a ``default_limit``, is left as it is.
    """
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits or storage.get_concurrency_info(ENGINE_POOL).limit is not None:
        return False
    storage.set_concurrency_slots(ENGINE_POOL, slots)
    return True
