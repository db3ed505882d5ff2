"""Conversions between lm-eval's request/response shapes and ours (pure functions, no engine).

lm-eval ``Instance.arguments`` by request type (``lm_eval/api/task.py::construct_requests``):

- ``loglikelihood``: ``(context, continuation)`` -> our loglikelihood Request; answer ``(logprob, is_greedy)``.
- ``loglikelihood_rolling``: ``(text,)`` -> loglikelihood of ``text`` after an empty context (the
  model's prefix token, as lm-eval's first rolling window); answer ``logprob``. Unlike lm-eval,
  texts longer than the engine's context are not split into rolling windows.
- ``generate_until``: ``(context, gen_kwargs)`` -> a ``generate`` Request with ``stop`` = ``until`` and
  ``max_tokens`` = ``max_gen_toks`` (lm-eval's default 256); answer: the text cut at the first stop
  string (``lm_eval.models.utils.postprocess_generated_text``, as its backends do).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from themis_dagster.exchange import GenerationParams
from themis_dagster.tasks.spec import Response

DEFAULT_MAX_GEN_TOKS = 256  # lm-eval backends' default (lm_eval/models/vllm_causallms.py, huggingface.py)
MAX_TOKENS = 8192  # GenerationParams.max_tokens upper bound
MAX_TEMPERATURE = 5.0
SUPPORTED = ("loglikelihood", "loglikelihood_rolling", "generate_until")


def plain(value: Any) -> Any:
    """A JSON-ready copy: numpy scalars/arrays to Python, tuples to lists, other objects to ``str``."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set):
        return [plain(item) for item in value]
    return str(value)


def metric_name(name: str) -> str:
    """lm-eval metric keys (``pass@1``, ``acc,none``) as our snake_case metric names."""
    return re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_") or "metric"


def generation_params(
    gen_kwargs: Mapping[str, Any] | None, base: GenerationParams, repeat: int = 0
) -> GenerationParams:
    """lm-eval ``generation_kwargs`` (normalized as its backends do) on top of the task's ``generation``."""
    from lm_eval.models.utils import normalize_gen_kwargs

    normalized = normalize_gen_kwargs(dict(gen_kwargs or {}), default_max_gen_toks=DEFAULT_MAX_GEN_TOKS)
    until = normalized.get("until") or []
    stop = tuple(s for s in (until if isinstance(until, list) else [until]) if isinstance(s, str) and s)
    temperature = min(max(float(normalized.get("temperature") or 0.0), 0.0), MAX_TEMPERATURE)
    top_p = float(normalized.get("top_p", base.top_p) or base.top_p)
    return GenerationParams(
        max_tokens=min(max(int(normalized["max_gen_toks"]), 1), MAX_TOKENS),
        temperature=temperature,
        top_p=top_p if 0.0 < top_p <= 1.0 else base.top_p,
        seed=None if base.seed is None else base.seed + repeat,
        stop=stop,
    )


def until_of(arguments: list[Any]) -> list[str]:
    """The stop strings of a stored generate_until instance's arguments."""
    kwargs = arguments[1] if len(arguments) > 1 and isinstance(arguments[1], Mapping) else {}
    until = kwargs.get("until") or []
    return [s for s in (until if isinstance(until, list) else [until]) if isinstance(s, str)]


def lm_eval_answer(request_type: str, arguments: list[Any], response: Response | None) -> tuple[Any, str | None]:
    """What lm-eval's model would have returned for this instance, or ``(None, why)``.

    ``why`` is an outcome name: ``missing_response``, ``engine_error`` or ``non_finite_logprob``.
    """
    if response is None:
        return None, "missing_response"
    if response.error:
        return None, "engine_error"
    if request_type == "generate_until":
        if response.text is None:
            return None, "missing_response"
        from lm_eval.models.utils import postprocess_generated_text

        return postprocess_generated_text(response.text, until_of(arguments), None), None
    if response.logprob is None:
        return None, "missing_response"
    if not math.isfinite(response.logprob):
        return None, "non_finite_logprob"
    if request_type == "loglikelihood_rolling":
        return float(response.logprob), None
    return (float(response.logprob), bool(response.is_greedy)), None
