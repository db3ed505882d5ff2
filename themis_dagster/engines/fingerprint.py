"""What determines an answer, hashed: a request is computed again only when one of these changes.

A request's fingerprint covers the model (weights and adapter hashes, and every declared
setting that can change an output), the engine implementation, and the request's content
and sampling settings (seed included). Settings that only change speed or memory (KV cache
size, block size, prefix caching, batch limits, process layout) are left out, so turning them
does not throw answers away; prefix reuse is checked to give identical scores
(tests/engines/vllm/test_prefix_reuse.py, tests/engines/vllm/test_engine_e2e.py).

This module is the one definition of what goes into a request's hash (``REQUEST_FIELDS``) and
of the text that is hashed (``canonical_json``); ``columnar/fingerprints.py`` assembles that
same text a column at a time from these definitions, for a whole prompts frame.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from themis_dagster.exchange import GenerationParams, Request
from themis_dagster.registry.models import ApiSource, ModelSpec
from themis_dagster.registry.weights import ResolvedWeights

# EngineArgs fields that change how fast an answer comes, never what it is.
SPEED_ONLY_ENGINE_ARGS = frozenset(
    {"gpu_memory_utilization", "kv_cache_gib", "max_num_seqs", "enable_prefix_caching", "block_size", "in_process"}
)


# json.dumps' own separators (without indent), named because the columnar fingerprints write them too
SEPARATORS = (", ", ": ")

# What a request's fingerprint covers besides the model fingerprint (under MODEL_KEY), and how
# each field is written in the hashed JSON: "text" a string or null, "json" any JSON value.
MODEL_KEY = "model"
REQUEST_FIELDS: dict[str, Literal["text", "json"]] = {
    "request_type": "text",
    "context": "text",
    "continuation": "text",
    "prompt": "text",
    "messages": "json",
    "gen_params": "json",
}


def canonical_json(value: Any) -> str:
    """The text a fingerprint hashes: keys sorted, ``SEPARATORS``, ASCII, anything not JSON as ``str``."""
    return json.dumps(value, sort_keys=True, default=str, separators=SEPARATORS)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _sha256(value: Any) -> str:
    return digest(canonical_json(value))


def model_fingerprint(spec: ModelSpec, weights: ResolvedWeights, engine: Mapping[str, Any]) -> str:
    """The model as far as its answers go: weights, adapter, output-changing settings, engine.

    A mitigation variant's mitigation is in it, so a variant never reuses its parent's answers;
    so are a reasoning model's ``reasoning`` settings (parser, chat template arguments, budget).
    The id, description, parent and where the weights sit on disk are left out (their hashes stand
    for them), so a model registered twice under two ids shares its answers; an API model is
    its endpoint and model name.
    """
    # lineage changes no answer; a mitigation or reasoning settings do (each kept out when absent,
    # so fingerprints of models without one are what they were before it existed)
    left_out = {"id", "description", "source", "lora", "parent"} | {
        optional for optional in ("mitigation", "reasoning") if getattr(spec, optional) is None
    }
    declared = spec.model_dump(mode="json", exclude=left_out)
    declared["engine"] = {k: v for k, v in declared["engine"].items() if k not in SPEED_ONLY_ENGINE_ARGS}
    if not declared["engine"].get("batch_invariant"):  # off: the fingerprint of every model declared before it
        declared["engine"].pop("batch_invariant", None)
    source = spec.source.model_dump(mode="json") if isinstance(spec.source, ApiSource) else None
    return _sha256(
        {
            "model": declared,
            "api": source,
            "weights_sha256": weights.weights_sha256,
            "lora_sha256": weights.lora_sha256,
            "engine": dict(engine),
        }
    )


def answers_repeat(request_type: str, gen_params: Mapping[str, Any] | None) -> bool:
    """Whether the same request always gets the same answer: scoring does, sampling only with a seed."""
    if request_type == "loglikelihood":
        return True
    params = GenerationParams.model_validate(gen_params or {})
    return params.seed is not None or params.temperature == 0.0


def cacheable(request: Request) -> bool:
    """``answers_repeat`` of the request: whether its answer may be cached."""
    return answers_repeat(request.request_type, request.gen_params)


def request_fingerprint(model: str, request: Request) -> str:
    """``model`` (a model fingerprint) plus what the request asks: the key of its cached answer."""
    return _sha256({MODEL_KEY: model, **{name: getattr(request, name) for name in REQUEST_FIELDS}})
