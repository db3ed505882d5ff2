"""An engine for models behind an OpenAI-style HTTP API: vLLM's own server or a hosted provider.

Generation goes through ``/v1/completions`` (plain prompts) and ``/v1/chat/completions``
(conversations). Loglikelihoods need prompt-token logprobs, which not every server gives:

- ``prompt_logprobs`` (vLLM): the (context, continuation) pair is tokenized through the
  server's ``/tokenize`` endpoint with lm-eval's rules (``tokenization.encode_pair``), sent
  as token ids with ``prompt_logprobs: 0, max_tokens: 1``, and the continuation's logprobs
  are summed -- the same numbers, token for token, as the in-process ``VLLMEngine``.
- ``echo`` (legacy OpenAI completions): the text is sent with ``echo: true, logprobs: 1,
  max_tokens: 1`` and split at the context's length using the returned ``text_offset``.
  A token that straddles the boundary counts as context, which can differ from lm-eval's
  token split; an empty context cannot be scored (the first token has no logprob).
- ``none``: ``loglikelihood`` raises ``LoglikelihoodUnsupportedError`` naming the endpoint.

Failures: connection errors, timeouts, HTTP 408/429/5xx and malformed JSON are retried
with exponential backoff (``Retry-After`` honoured, capped). No call raises for the requests
that still fail: each gets a ``Response`` with ``error`` set (a loglikelihood one without a
logprob, a generation one without text) and the others keep their answers. Successful
scores are also kept in the engine, so re-sending a batch only re-sends the failures. A
server that cannot score at all raises ``LoglikelihoodUnsupportedError`` for the whole call.

The API key is read from the environment variable *named* in the config. It is sent as a
header and otherwise never stored in a readable attribute, settings, logs or messages:
every error text is redacted before it is raised or returned.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator

from themis_dagster.engines.base import EngineInfo
from themis_dagster.engines.reasoning import with_openai_reasoning
from themis_dagster.engines.tokenization import encode_pair, truncate_left
from themis_dagster.exchange import ChatMessage, GenerationParams, Request, Response

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
AUTH_STATUSES = frozenset({401, 403})
UNSUPPORTED_STATUSES = frozenset({404, 405, 501})
_T = TypeVar("_T")
_R = TypeVar("_R")


class OpenAIEngineError(RuntimeError):
    """A request to the server failed; the message names the endpoint and the reason (never the key)."""


class RequestFailedError(OpenAIEngineError):
    """One request failed for good: ``status`` is the final HTTP status (None: no usable response)."""

    def __init__(self, message: str, status: int | None = None, reachable: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.reachable = reachable  # False: the last attempt got no HTTP response at all


class LoglikelihoodUnsupportedError(OpenAIEngineError):
    """The server cannot return prompt-token logprobs, so continuations cannot be scored."""


class _Malformed(ValueError):
    """A 200 response whose body is not the JSON we expect (retried like a transient error)."""


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


class OpenAIEngineConfig(BaseModel):
    """Where the server is and how hard to try; validated before any request is sent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

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


def _backoff(config: OpenAIEngineConfig, attempt: int, retry_after: float | None) -> float:
    """Exponential backoff (base * 2^attempt), or the server's Retry-After, capped either way."""
    delay = config.backoff_s * (2**attempt) if retry_after is None else retry_after
    return max(0.0, min(delay, config.backoff_max_s))


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _snippet(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _move_trailing_spaces(context: str, continuation: str) -> tuple[str, str]:
    """lm-eval moves a context's trailing whitespace to the start of the continuation."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        return context[:-n_spaces], context[-n_spaces:] + continuation
    return context, continuation


class OpenAICompatibleEngine:
    """Implements ``Engine`` over HTTP; requests run concurrently, at most ``max_concurrency`` at a time."""

    def __init__(
        self,
        config: OpenAIEngineConfig,
        *,
        model_path: str | None = None,
        on_activity: Callable[[], None] | None = None,
        extra_settings: dict[str, Any] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        started = time.perf_counter()
        self.config = config
        self._sleep = sleep
        self._on_activity = on_activity
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
        root = config.base_url[: -len("/v1")] if config.base_url.endswith("/v1") else config.base_url
        self._root = root
        self._lock = threading.Lock()
        self._fatal: str | None = None  # set by 401/403: later requests fail without being sent
        self._ll_cache: dict[tuple[str, str], Response] = {}  # successful scores by (context, continuation)
        self._tokenizer_probe: tuple[int, int | None] | None = None  # (max_model_len, prefix token id)
        self._tokenizer_lock = threading.Lock()
        self._local_tokenizer: Any = None
        self.counters = {"http_requests": 0, "retries": 0, "failed_requests": 0}
        self.server_kind, server_version = self._detect_server()
        self.loglikelihood_mode = self._choose_loglikelihood_mode()
        versions = {"httpx": httpx.__version__}
        if server_version:
            versions["server"] = server_version
        settings: dict[str, Any] = {
            "base_url": config.base_url,
            "model": config.model,
            "api_key_env": config.api_key_env,
            "server": self.server_kind,
            "loglikelihood": self.loglikelihood_mode,
            "chat_mode": config.chat_mode,
            "max_concurrency": config.max_concurrency,
            "timeout_s": config.timeout_s,
            "max_retries": config.max_retries,
            "tokenizer": "local" if config.tokenizer_path else "server",
            **(extra_settings or {}),
        }
        self.info = EngineInfo(
            config.engine_name, model_path or config.model, versions, settings, time.perf_counter() - started
        )

    def __repr__(self) -> str:
        return (
            f"OpenAICompatibleEngine(base_url={self.config.base_url!r}, model={self.config.model!r}, "
            f"api_key_env={self.config.api_key_env!r})"
        )

    __str__ = __repr__

    # -- HTTP -----------------------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        if self._secret is not None and self._secret.reveal():
            text = text.replace(self._secret.reveal(), "***")
        return text

    def _shown(self, text: str, limit: int = 300) -> str:
        """A server's text shortened for a message, redacted first: a key cut by the shortening would not match."""
        return _snippet(self._redact(text), limit)

    def _count(self, name: str) -> None:
        with self._lock:
            self.counters[name] += 1

    def _request(
        self, method: str, url: str, payload: dict[str, Any] | None, parse: Callable[[Any], _T], retries: int
    ) -> _T:
        """Send one request, retrying transient failures; return ``parse(json)`` or raise RequestFailedError."""
        if self._fatal is not None:
            raise RequestFailedError(self._fatal, 401)
        where = f"{method} {url}"
        reason, reachable = "no attempt made", True
        for attempt in range(retries + 1):
            retry_after: float | None = None
            self._count("http_requests")
            try:
                response = self._client.request(method, url, json=payload)
            except httpx.TimeoutException as error:
                reason, reachable = f"timed out after {self.config.timeout_s:g} s ({type(error).__name__})", False
            except httpx.TransportError as error:
                reason, reachable = f"connection failed ({type(error).__name__}: {self._shown(str(error))})", False
            else:
                reachable = True
                status = response.status_code
                if status == 200:
                    try:
                        return parse(response.json())
                    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as error:
                        reason = f"malformed response ({type(error).__name__}: {self._shown(str(error), 120)}): " + (
                            self._shown(response.text, 200)
                        )
                elif status in RETRY_STATUSES:
                    retry_after = _retry_after(response)
                    reason = f"HTTP {status}: {self._shown(response.text)}"
                else:
                    message = self._redact(f"{where}: HTTP {status}: {self._shown(response.text)}")
                    if status in AUTH_STATUSES:
                        message += " (check the key in the environment variable named by api_key_env)"
                        self._fatal = message
                    raise RequestFailedError(message, status)
            if attempt < retries:
                delay = _backoff(self.config, attempt, retry_after)
                logger.warning(
                    "%s failed (%s); retry %d/%d in %.2f s", where, self._redact(reason), attempt + 1, retries, delay
                )
                self._count("retries")
                self._sleep(delay)
        self._count("failed_requests")
        message = self._redact(f"{where}: {reason} (gave up after {retries + 1} attempts)")
        raise RequestFailedError(message, reachable=reachable)

    def _post(self, path: str, payload: dict[str, Any], parse: Callable[[Any], _T]) -> _T:
        return self._request("POST", self.config.base_url + path, payload, parse, self.config.max_retries)

    def _probe(self, url: str, parse: Callable[[Any], _T], payload: dict[str, Any] | None = None) -> _T | None:
        """Ask an optional endpoint once (no retries on 4xx); None where the server does not have it."""
        method = "GET" if payload is None else "POST"
        try:
            return self._request(method, url, payload, parse, min(self.config.max_retries, 2))
        except RequestFailedError as error:
            if error.status in AUTH_STATUSES or not error.reachable:
                raise
            return None

    # -- capabilities ---------------------------------------------------------------------------

    def _detect_server(self) -> tuple[str, str | None]:
        if self.config.server == "generic":
            return "generic", None
        version = self._probe(self._root + "/version", lambda data: str(data["version"]))
        if self.config.server == "vllm" or version is not None:
            return "vllm", version
        return "generic", None

    def _choose_loglikelihood_mode(self) -> str:
        mode = self.config.loglikelihood
        if mode == "auto":
            return "prompt_logprobs" if self.server_kind == "vllm" else "echo"
        return mode

    def _unsupported(self, detail: str) -> LoglikelihoodUnsupportedError:
        return LoglikelihoodUnsupportedError(
            self._redact(
                f"{self.config.base_url}/completions cannot score continuations for model {self.config.model!r}: "
                f"{detail}. Use a server that returns prompt logprobs (vLLM) or one that supports echo with logprobs."
            )
        )

    def _tokenize(self, text: str) -> list[int]:
        if self.config.tokenizer_path is not None:
            with self._tokenizer_lock:  # a fast tokenizer is not safe to share between threads
                if self._local_tokenizer is None:
                    from transformers import AutoTokenizer

                    self._local_tokenizer = AutoTokenizer.from_pretrained(self.config.tokenizer_path)
                return list(self._local_tokenizer.encode(text, add_special_tokens=False))

        def parse(data: Any) -> list[int]:
            tokens = data["tokens"]
            if not isinstance(tokens, list) or not all(isinstance(token, int) for token in tokens):
                raise TypeError("tokens is not a list of ints")
            return tokens

        payload = {"model": self.config.model, "prompt": text, "add_special_tokens": False}
        return self._request("POST", self._root + "/tokenize", payload, parse, self.config.max_retries)

    def _tokenizer_facts(self) -> tuple[int, int | None]:
        """(max_model_len, prefix token id) from vLLM's /tokenize and /tokenizer_info, asked once."""
        with self._lock:
            if self._tokenizer_probe is not None:
                return self._tokenizer_probe
        payload = {"model": self.config.model, "prompt": "a", "add_special_tokens": False}
        try:
            max_len = self._request(
                "POST", self._root + "/tokenize", payload, lambda data: int(data["max_model_len"]), 2
            )
        except RequestFailedError as error:
            if error.status in UNSUPPORTED_STATUSES:
                raise self._unsupported(f"{self._root}/tokenize is not available (HTTP {error.status})") from None
            raise
        prefix = self.config.prefix_token_id
        if prefix is None:
            info = self._probe(self._root + "/tokenizer_info", lambda data: dict(data))
            for name in ("bos_token", "eos_token"):
                token = info.get(name) if info else None
                if isinstance(token, dict):
                    token = token.get("content")
                if isinstance(token, str) and token:
                    ids = self._tokenize(token)
                    if len(ids) == 1:
                        prefix = ids[0]
                        break
        with self._lock:
            self._tokenizer_probe = (max_len, prefix)
        return max_len, prefix

    # -- concurrency ----------------------------------------------------------------------------

    def _map(self, function: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
        if not items:
            return []
        if self._on_activity is not None:
            self._on_activity()
        try:
            workers = min(self.config.max_concurrency, len(items))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openai-engine") as pool:
                return list(pool.map(function, items))
        finally:
            if self._on_activity is not None:
                self._on_activity()

    # -- loglikelihood --------------------------------------------------------------------------

    def loglikelihood(self, requests: Sequence[Request]) -> list[Response]:
        """Summed continuation logprobs and greedy flags; see the module docstring for failures."""
        if self.loglikelihood_mode == "none":
            raise self._unsupported("loglikelihood is disabled for this engine (loglikelihood: none)")
        if self.loglikelihood_mode == "prompt_logprobs":
            self._tokenizer_facts()
        unique = {request.pair: request for request in requests}  # one per (context, continuation), first-seen order
        todo = [request for pair, request in unique.items() if pair not in self._ll_cache]
        score = self._score_tokens if self.loglikelihood_mode == "prompt_logprobs" else self._score_echo

        def attempt(request: Request) -> Response:
            try:
                return score(request)
            except LoglikelihoodUnsupportedError:
                raise
            except OpenAIEngineError as error:
                return request.failed(str(error))

        failures: dict[tuple[str, str], Response] = {}
        for request, response in zip(todo, self._map(attempt, todo), strict=True):
            if response.error is not None:
                failures[request.pair] = response
            else:
                with self._lock:
                    self._ll_cache[request.pair] = response
        if failures:
            first = next(iter(failures.values())).error
            logger.warning("%d of %d loglikelihood requests failed; first: %s", len(failures), len(todo), first)
        return [
            request.adopt(failures[request.pair] if request.pair in failures else self._ll_cache[request.pair])
            for request in requests
        ]

    def _score_tokens(self, request: Request) -> Response:
        max_len, prefix = self._tokenizer_facts()
        context, continuation = request.pair
        if context == "" and prefix is None:
            raise RequestFailedError(
                "an empty context is scored after the BOS/EOS token, but the server does not say which: "
                "start vLLM with --enable-tokenizer-info-endpoint or set prefix_token_id"
            )
        context_ids, continuation_ids = encode_pair(
            self._tokenize, prefix if prefix is not None else -1, context, continuation
        )
        tokens, context_len, truncated = truncate_left(context_ids, continuation_ids, max_len - 1)
        payload = {
            "model": self.config.model,
            "prompt": tokens,
            "max_tokens": 1,
            "temperature": 0.0,
            "prompt_logprobs": 0,
        }

        def parse(data: Any) -> Response:
            prompt_logprobs = data["choices"][0].get("prompt_logprobs")
            if prompt_logprobs is None:
                raise self._unsupported("the response has no prompt_logprobs")
            if len(prompt_logprobs) != len(tokens):
                raise ValueError(f"{len(prompt_logprobs)} prompt logprobs for {len(tokens)} tokens")
            total, greedy = 0.0, True
            for position in range(max(context_len, 1), len(tokens)):
                entry = prompt_logprobs[position][str(tokens[position])]
                total += float(entry["logprob"])
                greedy = greedy and int(entry["rank"]) == 1
            return request.scored(
                total,
                greedy,
                n_prompt_tokens=len(tokens),
                n_continuation_tokens=len(tokens) - context_len,
                truncated=truncated,
            )

        try:
            return self._post("/completions", payload, parse)
        except RequestFailedError as error:
            if error.status in UNSUPPORTED_STATUSES:
                raise self._unsupported(f"HTTP {error.status}") from None
            raise

    def _score_echo(self, request: Request) -> Response:
        context, continuation = _move_trailing_spaces(*request.pair)
        prompt = context + continuation
        payload = {
            "model": self.config.model,
            "prompt": prompt,
            "max_tokens": 1,
            "temperature": 0.0,
            "logprobs": 1,
            "echo": True,
        }

        def parse(data: Any) -> Response | str:
            logprobs = data["choices"][0].get("logprobs")
            if not logprobs or logprobs.get("text_offset") is None or logprobs.get("token_logprobs") is None:
                raise self._unsupported("the response has no echoed logprobs with text_offset")
            offsets = logprobs["text_offset"]
            values = logprobs["token_logprobs"]
            tops = logprobs.get("top_logprobs") or [None] * len(values)
            in_prompt = [i for i, offset in enumerate(offsets) if int(offset) < len(prompt)]
            n_context = sum(1 for i in in_prompt if int(offsets[i]) < len(context))
            total, greedy = 0.0, True
            for i in in_prompt[n_context:]:
                if values[i] is None:
                    return "the server gave no logprob for the first prompt token (an empty context cannot be scored)"
                total += float(values[i])
                top = tops[i]
                if top:
                    greedy = greedy and float(values[i]) >= max(float(v) for v in top.values()) - 1e-6
            return request.scored(
                total, greedy, n_prompt_tokens=len(in_prompt), n_continuation_tokens=len(in_prompt) - n_context
            )

        try:
            outcome = self._post("/completions", payload, parse)
        except RequestFailedError as error:
            if error.status in UNSUPPORTED_STATUSES:
                raise self._unsupported(f"HTTP {error.status}") from None
            raise
        if isinstance(outcome, str):
            raise RequestFailedError(outcome)
        return outcome

    # -- generation -----------------------------------------------------------------------------

    def _sampling(self, params: GenerationParams) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.config.model,
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        if params.seed is not None:
            payload["seed"] = params.seed
        if params.stop:
            payload["stop"] = list(params.stop)
        if logit_bias := getattr(params, "logit_bias", None):  # a mitigation's bias (mitigations/engine.py)
            payload["logit_bias"] = {str(token): bias for token, bias in logit_bias.items()}
        return payload

    @staticmethod
    def _generation(request: Request, data: Any, text: str, prompt_text: str) -> Response:
        choice = data["choices"][0]
        usage = data.get("usage") or {}
        return request.generated(
            text=text,
            prompt_text=prompt_text,
            n_prompt_tokens=int(usage.get("prompt_tokens") or 0),
            n_output_tokens=int(usage.get("completion_tokens") or 0),
            finish_reason=str(choice.get("finish_reason")),
        )

    def _complete(self, request: Request, prompt: str, params: GenerationParams) -> Response:
        def parse(data: Any) -> Response:
            text = data["choices"][0]["text"]
            if not isinstance(text, str):
                raise TypeError("choices[0].text is not a string")
            return self._generation(request, data, text, prompt)

        return self._post("/completions", {**self._sampling(params), "prompt": prompt}, parse)

    def _chat_one(self, request: Request, conversation: list[ChatMessage], params: GenerationParams) -> Response:
        payload = {**self._sampling(params), "messages": conversation}
        if template_kwargs := getattr(params, "chat_template_kwargs", None):  # a reasoning model's (reasoning.py)
            payload["chat_template_kwargs"] = template_kwargs
        if self.server_kind == "vllm":
            payload["return_prompt_text"] = True  # the exact text the chat template produced

        def parse(data: Any) -> Response:
            text = data["choices"][0]["message"]["content"]
            if text is None:
                text = ""
            if not isinstance(text, str):
                raise TypeError("choices[0].message.content is not a string")
            prompt_text = data.get("prompt_text")
            if not isinstance(prompt_text, str):
                prompt_text = json.dumps(conversation, ensure_ascii=False)
            return with_openai_reasoning(self._generation(request, data, text, prompt_text), data)

        return self._post("/chat/completions", payload, parse)

    def _guarded(self, request: Request, call: Callable[[], Response], prompt_text: str) -> Response:
        try:
            return call()
        except OpenAIEngineError as error:
            return request.generated("", prompt_text, 0, 0, "error", error=self._redact(str(error)))

    def _completion(self, request: Request, prompt: str, params: GenerationParams) -> Response:
        return self._guarded(request, lambda: self._complete(request, prompt, params), prompt)

    def generate(self, requests: Sequence[Request], params: GenerationParams) -> list[Response]:
        return self._map(lambda request: self._completion(request, request.prompt or "", params), requests)

    def chat(self, requests: Sequence[Request], params: GenerationParams) -> list[Response]:
        """Chat completions; base models (chat_mode 'concat') get the contents joined by newlines instead."""
        if self.config.chat_mode == "concat":

            def concatenated(request: Request) -> Response:
                text = "\n".join(message["content"] for message in request.messages or [])
                return self._completion(request, text, params)

            return self._map(concatenated, requests)

        def one(request: Request) -> Response:
            conversation = request.messages or []
            fallback = json.dumps(conversation, ensure_ascii=False)
            return self._guarded(request, lambda: self._chat_one(request, conversation, params), fallback)

        return self._map(one, requests)

    def shutdown(self) -> None:
        """Close the HTTP connections (a server started elsewhere keeps running)."""
        self._client.close()
