"""What a running ``vllm serve`` says about itself over HTTP: healthy, and how busy."""

from __future__ import annotations

import httpx


def server_healthy(base_url: str, served_name: str, timeout_s: float = 5.0) -> bool:
    """GET /health answers 200 and GET /v1/models lists the served model."""
    try:
        with httpx.Client(timeout=timeout_s) as client:
            if client.get(base_url + "/health").status_code != 200:
                return False
            models = client.get(base_url + "/v1/models")
            names = {entry.get("id") for entry in models.json().get("data", [])}
    except (httpx.HTTPError, ValueError, AttributeError):
        return False
    return served_name in names


def server_load(base_url: str) -> int | None:
    """Requests in flight (vLLM's GET /load), or None where unknown."""
    try:
        response = httpx.get(base_url + "/load", timeout=5.0)
        return int(response.json()["server_load"]) if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None
