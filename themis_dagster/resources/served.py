"""Engine resources for models behind an HTTP API: any OpenAI-compatible server, or a warm vLLM server.

``OpenAIEngineResource`` points at a server someone else runs (a hosted provider, a shared
vLLM). ``VLLMServerResource`` starts -- or attaches to -- a persistent ``vllm serve`` per model
(``engines.vllm.server``), so successive runs in separate processes skip the engine load;
the server stops itself after ``idle_shutdown_s`` without use.

Both can be built without arguments (``engine_resource_class(name)()``): unset fields fall back
to environment variables (``THEMIS_OPENAI_BASE_URL``, ``THEMIS_OPENAI_MODEL``,
``THEMIS_OPENAI_API_KEY_ENV``; ``THEMIS_CACHE_DIR`` for the server state directory).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar, Literal, Self

from pydantic import Field

from themis_dagster.engines.base import Engine
from themis_dagster.registry.models import ModelSpec
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources.engine import EngineResource
from themis_dagster.resources.openai_config import openai_config_for
from themis_dagster.settings import Settings


class OpenAIEngineResource(EngineResource):
    """Requests go to ``base_url`` (e.g. https://api.openai.com/v1); the key comes from ``api_key_env``."""

    base_url: str = Field(default="", description="API base with /v1; empty: $THEMIS_OPENAI_BASE_URL")
    model: str = Field(default="", description="Model name at the server; empty: $THEMIS_OPENAI_MODEL, else the id")
    api_key_env: str = Field(default="", description="NAME of the key's variable; empty: $THEMIS_OPENAI_API_KEY_ENV")
    max_concurrency: int = Field(default=8, ge=1, le=1024)
    timeout_s: float = Field(default=120.0, gt=0.0)
    max_retries: int = Field(default=4, ge=0, le=20)
    loglikelihood: Literal["auto", "prompt_logprobs", "echo", "none"] = "auto"
    claims_devices: ClassVar[bool] = False  # the model runs at the provider

    def _build(self, spec: ModelSpec, weights: ResolvedWeights) -> Engine:
        base_url = self.base_url or os.environ.get("THEMIS_OPENAI_BASE_URL", "")
        if not base_url:
            raise ValueError("OpenAIEngineResource.base_url is empty and THEMIS_OPENAI_BASE_URL is not set")
        # httpx and the client are imported by runs that use them, not with the definitions
        from themis_dagster.engines.openai.engine import OpenAICompatibleEngine

        config = openai_config_for(
            spec,
            base_url=base_url,
            model=self.model or os.environ.get("THEMIS_OPENAI_MODEL", "") or spec.id,
            api_key_env=self.api_key_env or os.environ.get("THEMIS_OPENAI_API_KEY_ENV") or None,
            max_concurrency=self.max_concurrency,
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
            loglikelihood=self.loglikelihood,
        )
        return OpenAICompatibleEngine(config, model_path=weights.path)


class VLLMServerResource(EngineResource):
    """One warm ``vllm serve`` per model shared by every run on this host; requests go over HTTP."""

    state_dir: str = Field(default="", description="Server state and logs; empty: <cache_dir>/servers")
    idle_shutdown_s: float = Field(default=900.0, gt=0.0, description="Stop the server after this long unused")
    startup_timeout_s: float = Field(default=900.0, gt=0.0, description="First start compiles: minutes on CPU")
    max_concurrency: int = Field(default=32, ge=1, le=1024)
    timeout_s: float = Field(default=600.0, gt=0.0)
    max_retries: int = Field(default=3, ge=0, le=20)
    claims_devices: ClassVar[bool] = False  # the server outlives the run; its GPUs are the host's to plan

    @classmethod
    def from_settings(cls, settings: Settings, keep_warm: bool = False) -> Self:
        """The deployment's server state folder and idle time (``THEMIS_SERVER_*``)."""
        return cls(
            keep_warm=keep_warm,
            devices=settings.devices,
            state_dir=str(settings.server_state_dir),
            idle_shutdown_s=settings.server_idle_shutdown_s,
        )

    def servers_dir(self) -> Path:
        return Path(self.state_dir) if self.state_dir else Settings.from_env().server_state_dir

    def _build(self, spec: ModelSpec, weights: ResolvedWeights) -> Engine:
        from themis_dagster.engines.vllm.server import VLLMServerManager, serve_flags

        manager = VLLMServerManager(self.servers_dir())
        handle = manager.ensure(
            spec, weights.path, weights.weights_sha256, self.idle_shutdown_s, self.startup_timeout_s
        )
        state = handle.state
        # httpx and the client are imported by runs that use them, not with the definitions
        from themis_dagster.engines.openai.engine import OpenAICompatibleEngine

        config = openai_config_for(
            spec,
            base_url=handle.base_url + "/v1",
            model=handle.served_model,
            max_concurrency=self.max_concurrency,
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
            engine="vllm-server",
            server="vllm",
            loglikelihood="prompt_logprobs",
            engine_name="vllm-server",
            tokenizer_path=weights.path,  # the folder the server was started on
        )
        extra = {
            "serve_args": serve_flags(state["argv"]),
            **state.get("env", {}),
            "server": {
                "pid": state["pid"],
                "port": state["port"],
                "started_by_this_run": handle.started,
                "startup_seconds": state.get("startup_seconds"),
                "log_file": state.get("log_file"),
            },
        }
        engine = OpenAICompatibleEngine(config, model_path=weights.path, on_activity=handle.touch, extra_settings=extra)
        engine.info.load_seconds = handle.seconds
        return engine
