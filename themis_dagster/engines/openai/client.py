"""The HTTP side of the OpenAI-style engine: one pooled client, retries with backoff, the key kept out of every text.

Connection errors, timeouts, HTTP 408/429/5xx and replies ``parse`` cannot read are retried
with exponential backoff (``Retry-After`` honoured, capped); other statuses fail at once, and
after a 401/403 no further request is sent. Every message raised or logged is redacted.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx

from themis_dagster.engines.openai.config import OpenAIEngineConfig
from themis_dagster.engines.openai.errors import OpenAIEngineError, RequestFailedError

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
AUTH_STATUSES = frozenset({401, 403})
UNSUPPORTED_STATUSES = frozenset({404, 405, 501})
_T = TypeVar("_T")


class _Secret:
    """Holds the API key; prints as a placeholder so it cannot leak through repr or logging."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


def backoff(config: OpenAIEngineConfig, attempt: int, retry_after: float | None) -> float:
    """Exponential backoff (base * 2^attempt), or the server's Retry-After, capped either way."""
    delay = config.backoff_s * (2**attempt) if retry_after is None else retry_after
    return max(0.0, min(delay, config.backoff_max_s))


def retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def snippet(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


class OpenAIClient:
    """Sends requests to one server, at most ``max_concurrency`` at a time, with the config's retries."""

    def __init__(self, config: OpenAIEngineConfig, sleep: Callable[[float], None] = time.sleep) -> None:
        self.config = config
        self._sleep = sleep
        self._secret: _Secret | None = None
        headers = {"Content-Type": "application/json"}
        if config.api_key_env is not None:
            value = os.environ.get(config.api_key_env, "")
            if not value:
                raise OpenAIEngineError(f"the environment variable {config.api_key_env} (api_key_env) is not set")
            self._secret = _Secret(value)
            headers["Authorization"] = f"Bearer {value}"
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(config.timeout_s, connect=min(config.connect_timeout_s, config.timeout_s)),
            limits=httpx.Limits(
                max_connections=config.max_concurrency, max_keepalive_connections=config.max_concurrency
            ),
        )
        # the server's root, for the endpoints outside /v1 (/version, /tokenize, /tokenizer_info)
        self.root = config.base_url[: -len("/v1")] if config.base_url.endswith("/v1") else config.base_url
        self._lock = threading.Lock()
        self._fatal: str | None = None  # set by 401/403: later requests fail without being sent
        self.counters = {"http_requests": 0, "retries": 0, "failed_requests": 0}

    def __repr__(self) -> str:
        return f"OpenAIClient(base_url={self.config.base_url!r}, api_key_env={self.config.api_key_env!r})"

    __str__ = __repr__

    def redact(self, text: str) -> str:
        if self._secret is not None and self._secret.reveal():
            text = text.replace(self._secret.reveal(), "***")
        return text

    def shown(self, text: str, limit: int = 300) -> str:
        """A server's text shortened for a message, redacted first: a key cut by the shortening would not match."""
        return snippet(self.redact(text), limit)

    def _count(self, name: str) -> None:
        with self._lock:
            self.counters[name] += 1

    def request(
        self, method: str, url: str, payload: dict[str, Any] | None, parse: Callable[[Any], _T], retries: int
    ) -> _T:
        """Send one request, retrying transient failures; return ``parse(json)`` or raise RequestFailedError."""
        if self._fatal is not None:
            raise RequestFailedError(self._fatal, 401)
        where = f"{method} {url}"
        reason, reachable = "no attempt made", True
        for attempt in range(retries + 1):
            delay_hint: float | None = None
            self._count("http_requests")
            try:
                response = self._client.request(method, url, json=payload)
            except httpx.TimeoutException as error:
                reason, reachable = f"timed out after {self.config.timeout_s:g} s ({type(error).__name__})", False
            except httpx.TransportError as error:
                reason, reachable = f"connection failed ({type(error).__name__}: {self.shown(str(error))})", False
            else:
                reachable = True
                status = response.status_code
                if status == 200:
                    try:
                        return parse(response.json())
                    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as error:
                        reason = f"malformed response ({type(error).__name__}: {self.shown(str(error), 120)}): " + (
                            self.shown(response.text, 200)
                        )
                elif status in RETRY_STATUSES:
                    delay_hint = retry_after(response)
                    reason = f"HTTP {status}: {self.shown(response.text)}"
                else:
                    message = self.redact(f"{where}: HTTP {status}: {self.shown(response.text)}")
                    if status in AUTH_STATUSES:
                        message += " (check the key in the environment variable named by api_key_env)"
                        self._fatal = message
                    raise RequestFailedError(message, status)
            if attempt < retries:
                delay = backoff(self.config, attempt, delay_hint)
                logger.warning(
                    "%s failed (%s); retry %d/%d in %.2f s", where, self.redact(reason), attempt + 1, retries, delay
                )
                self._count("retries")
                self._sleep(delay)
        self._count("failed_requests")
        message = self.redact(f"{where}: {reason} (gave up after {retries + 1} attempts)")
        raise RequestFailedError(message, reachable=reachable)

    def post(self, path: str, payload: dict[str, Any], parse: Callable[[Any], _T]) -> _T:
        """POST to ``base_url + path`` (an endpoint under /v1) with the configured retries."""
        return self.request("POST", self.config.base_url + path, payload, parse, self.config.max_retries)

    def probe(self, url: str, parse: Callable[[Any], _T], payload: dict[str, Any] | None = None) -> _T | None:
        """Ask an optional endpoint once (no retries on 4xx); None where the server does not have it."""
        method = "GET" if payload is None else "POST"
        try:
            return self.request(method, url, payload, parse, min(self.config.max_retries, 2))
        except RequestFailedError as error:
            if error.status in AUTH_STATUSES or not error.reachable:
                raise
            return None

    def close(self) -> None:
        self._client.close()
