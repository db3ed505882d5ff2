"""Where the OpenAI-style server is and how hard to try."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from themis_dagster.errors import StrictModel


class OpenAIEngineConfig(StrictModel):
    """Where the server is and how hard to try; validated before any request is sent."""

    base_url: str = Field(description="API base including the version, e.g. http://127.0.0.1:8000/v1")
    model: str = Field(min_length=1, description="The model name the server expects in requests.")
    api_key_env: str | None = Field(
        default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="NAME of the variable holding the key."
    )
    max_concurrency: int = Field(default=8, ge=1, le=1024)
    timeout_s: float = Field(default=120.0, gt=0.0, le=86400.0)
    connect_timeout_s: float = Field(default=10.0, gt=0.0, le=600.0)
    max_retries: int = Field(default=4, ge=0, le=20)
    backoff_s: float = Field(default=0.5, ge=0.0, le=60.0)
    backoff_max_s: float = Field(default=30.0, ge=0.0, le=600.0)
    server: Literal["auto", "vllm", "generic"] = Field(
        default="auto", description="'auto' asks GET /version once: vLLM answers, hosted APIs do not."
    )
    loglikelihood: Literal["auto", "prompt_logprobs", "echo", "none"] = "auto"
    chat_mode: Literal["chat", "concat"] = Field(
        default="chat", description="'concat': base models; message contents joined by newlines, sent as a prompt."
    )
    prefix_token_id: int | None = Field(
        default=None, ge=0, description="Token scored before an empty context (default: asked from the server)."
    )
    tokenizer_path: str | None = Field(
        default=None,
        description="A local copy of the served model's tokenizer: texts are tokenized here instead of by one "
        "/tokenize request each (the vLLM server mode sets it to the folder it serves).",
    )
    engine_name: str = "openai"

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return value.rstrip("/")
