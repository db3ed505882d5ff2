"""The OpenAI-compatible client's settings for one model, built the same way by every engine resource."""

from __future__ import annotations

from typing import Any, Literal

from themis_dagster.engines.openai.config import OpenAIEngineConfig  # pydantic only: no httpx, no client
from themis_dagster.registry.engine_args import OpenAIEngineArgs
from themis_dagster.registry.model_engine import kind_args
from themis_dagster.registry.models import ModelSpec


def openai_config_for(
    spec: ModelSpec, *, base_url: str, model: str, engine: str = "openai", **settings: Any
) -> OpenAIEngineConfig:
    """Client settings for ``spec`` served as ``model`` at ``base_url``; ``settings`` are the other fields.

    A model without a chat template is a base model: its conversations are sent as one
    concatenated prompt, as the in-process engine does, so the answers do not depend on
    which engine served them. What the model's own ``engine:`` arguments set (``kind: openai``)
    comes before the resource's and the source's settings; ``engine`` names the kind asking.
    """
    chat_mode: Literal["chat", "concat"] = "concat" if spec.chat_template is None else "chat"
    args = kind_args(spec, OpenAIEngineArgs, engine)
    declared = {} if args is None else args.model_dump(exclude={"kind"}, exclude_none=True)
    return OpenAIEngineConfig(base_url=base_url, chat_mode=chat_mode, **({"model": model, **settings} | declared))
