"""A model's ``engine:`` arguments for the engine kinds other than vLLM's, one model per kind.

A models file entry's ``engine:`` mapping is read by the kind its ``kind:`` key names. Without
one it is vLLM's (``registry/models.py``'s ``EngineArgs``, for ``vllm`` and ``vllm-server``),
as every models file was written before other kinds had arguments of their own. The other
kinds declare ``kind:`` and only what they read; every setting left out (None) is the one the
deployment's engine resource has (``resources/engine_registry.py`` registers each kind;
``registry/model_engine.py`` says which arguments an engine of one kind reads).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from themis_dagster.errors import StrictModel


class OpenAIEngineArgs(StrictModel):
    """What the OpenAI-compatible engine (``THEMIS_ENGINE=openai``, and every model behind an API) reads."""

    kind: Literal["openai"] = "openai"
    model: str | None = Field(
        default=None, min_length=1, description="The model's name at the server; None: the resource's, else the id."
    )
    loglikelihood: Literal["auto", "prompt_logprobs", "echo", "none"] | None = Field(
        default=None, description="How continuations are scored (engines/openai/); None: the resource's."
    )
    max_concurrency: int | None = Field(default=None, ge=1, le=1024)
    timeout_s: float | None = Field(default=None, gt=0.0, le=86400.0)
    max_retries: int | None = Field(default=None, ge=0, le=20)

    # what changes how fast an answer comes, never what it is (left out of the model's fingerprint)
    speed_only: ClassVar[frozenset[str]] = frozenset({"max_concurrency", "timeout_s", "max_retries"})

    @property
    def gpu_count(self) -> int:
        """Accelerators one engine of this model occupies here: none, the model runs at the server."""
        return 0


class FakeEngineArgs(StrictModel):
    """What the fake engine (``THEMIS_ENGINE=fake``, tests of the graph's plumbing) reads."""

    kind: Literal["fake"] = "fake"
    reply: str | None = Field(default=None, description="Every reply of this model; None: the resource's ('1').")
    latency_s: float | None = Field(default=None, ge=0.0, description="Seconds each engine call takes.")
    per_request_s: float | None = Field(default=None, ge=0.0, description="Seconds each answer takes in a call.")
    step_size: int | None = Field(default=None, ge=1, description="Answers per engine step, handed on together.")

    speed_only: ClassVar[frozenset[str]] = frozenset({"latency_s", "per_request_s", "step_size"})

    @property
    def gpu_count(self) -> int:
        """The one accelerator the fake engine stands in for (as vLLM's default arguments would claim)."""
        return 1
