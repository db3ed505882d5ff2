"""Remove the file vLLM's distributed setup leaves in the temp folder (``/tmp/vllm_dist_<hex>``).

vLLM 0.32 starts torch.distributed with a file store, ``file://<tempdir>/vllm_dist_<uuid>``
(``vllm.utils.network_utils.get_file_store_init_method``, used by the uni- and multi-process
executors). torch's ``FileStore`` deletes the file when the process group is destroyed, which
vLLM's ``EngineCore.shutdown`` does. But ``themis`` leaves an in-process engine's teardown to
the operating system (``cli.console_main`` ends with ``os._exit``), so nothing deleted the file
and every ``themis run`` left one behind. ``track_dist_store`` notes the file of an engine
that runs in this process; ``remove_dist_stores`` deletes the noted files, at the quick exit
and at a normal interpreter exit. An engine core in a spawned process deletes its own at
shutdown. A process killed with SIGKILL still leaves its file (the temp folder's own cleanup).
"""

from __future__ import annotations

import atexit
import contextlib
from pathlib import Path

PREFIX = "vllm_dist_"
_OWNED: set[Path] = set()


def track_dist_store() -> Path | None:
    """Note the file behind this process's torch.distributed store if it is vLLM's file store."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None  # the engine core runs in another process, which cleans up its own
    try:
        store: object = dist.distributed_c10d._get_default_store()
    except (AttributeError, RuntimeError, ValueError):
        return None
    while (inner := getattr(store, "underlying_store", None)) is not None:  # a PrefixStore around it
        store = inner
    name = getattr(store, "path", None)  # only a FileStore has one
    if not isinstance(name, str) or not Path(name).name.startswith(PREFIX):
        return None
    path = Path(name)
    if not _OWNED:
        atexit.register(remove_dist_stores)
    _OWNED.add(path)
    return path


def remove_dist_stores() -> None:
    """Delete the noted files (the process ends, or its engines are shut down)."""
    for path in list(_OWNED):
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
        _OWNED.discard(path)
