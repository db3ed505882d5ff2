"""``OpenAICompatibleEngine``: the ``Engine`` interface over an OpenAI-style server (see the package docstring)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, TypeVar

import httpx

from themis_dagster.engines.base import AnswerSink, Engine, EngineInfo
from themis_dagster.engines.openai.client import UNSUPPORTED_STATUSES, OpenAIClient
from themis_dagster.engines.openai.config import OpenAIEngineConfig
from themis_dagster.engines.openai.errors import LoglikelihoodUnsupportedError, OpenAIEngineError, RequestFailedError
from themis_dagster.engines.openai.inspection import OpenAIInspector
from themis_dagster.engines.openai.logprobs import echo_score, move_trailing_spaces, prompt_logprobs_score
from themis_dagster.engines.openai.payloads import (
    chat_reply,
    completion_reply,
    concatenated,
    conversation_text,
    echo_payload,
    prompt_logprobs_payload,
    sampling_payload,
    token_ids,
    tokenize_payload,
)
from themis_dagster.engines.tokenization import encode_pair, truncate_left
from themis_dagster.exchange import ChatMessage, GenerationParams, Request, Response

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_R = TypeVar("_R")


class OpenAICompatibleEngine(Engine):
    """Implements ``Engine`` over HTTP; requests run concurrently, at most ``max_concurrency`` at a time."""

    streams_answers = True  # answers are handed on as their responses arrive (engines/base.py)

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
        self._on_activity = on_activity
        self._http = OpenAIClient(config, sleep)
        self.counters = self._http.counters  # http_requests, retries, failed_requests
        self._lock = threading.Lock()
        self._ll_cache: dict[tuple[str, str], Response] = {}  # successful scores by (context, continuation)
        self._tokenizer_probe: tuple[int, int | None] | None = None  # (max_model_len, prefix token id)
        self._tokenizer_lock = threading.Lock()
        self._local_tokenizer: Any = None
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

    # -- capabilities ---------------------------------------------------------------------------

    def _detect_server(self) -> tuple[str, str | None]:
        if self.config.server == "generic":
            return "generic", None
        version = self._http.probe(self._http.root + "/version", lambda data: str(data["version"]))
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
            self._http.redact(
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
        payload = tokenize_payload(self.config.model, text)
        return self._http.request("POST", self._http.root + "/tokenize", payload, token_ids, self.config.max_retries)

    def _tokenizer_facts(self) -> tuple[int, int | None]:
        """(max_model_len, prefix token id) from vLLM's /tokenize and /tokenizer_info, asked once."""
        with self._lock:
            if self._tokenizer_probe is not None:
                return self._tokenizer_probe
        payload = tokenize_payload(self.config.model, "a")
        try:
            max_len = self._http.request(
                "POST", self._http.root + "/tokenize", payload, lambda data: int(data["max_model_len"]), 2
            )
        except RequestFailedError as error:
            if error.status in UNSUPPORTED_STATUSES:
                raise self._unsupported(f"{self._http.root}/tokenize is not available (HTTP {error.status})") from None
            raise
        prefix = self.config.prefix_token_id
        if prefix is None:
            info = self._http.probe(self._http.root + "/tokenizer_info", lambda data: dict(data))
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

    def _map(
        self, function: Callable[[_T], _R], items: Sequence[_T], on_done: Callable[[int, _R], None] | None = None
    ) -> list[_R]:
        """``function`` over ``items`` with up to ``max_concurrency`` requests in flight, results in order;
        ``on_done(index, result)`` in the calling thread as each response arrives."""
        if not items:
            return []
        if self._on_activity is not None:
            self._on_activity()
        try:
            workers = min(self.config.max_concurrency, len(items))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openai-engine") as pool:
                if on_done is None:
                    return list(pool.map(function, items))
                futures = {pool.submit(function, item): index for index, item in enumerate(items)}
                results: dict[int, _R] = {}
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    on_done(futures[future], results[futures[future]])
                return [results[index] for index in range(len(items))]
        finally:
            if self._on_activity is not None:
                self._on_activity()

    # -- loglikelihood --------------------------------------------------------------------------

    def loglikelihood(self, requests: Sequence[Request], on_answered: AnswerSink | None = None) -> list[Response]:
        """Summed continuation logprobs and greedy flags; see the package docstring for failures.

        ``on_answered`` receives the answers as their responses arrive (``engines/base.py``)."""
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

        asked: dict[tuple[str, str], list[Request]] = {}
        for request in requests:
            asked.setdefault(request.pair, []).append(request)
        if on_answered is not None:
            known = [request.pair for request in unique.values() if request.pair in self._ll_cache]
            on_answered([request.adopt(self._ll_cache[pair]) for pair in known for request in asked[pair]])

        def arrived(index: int, response: Response) -> None:
            if on_answered is not None and response.error is None:
                on_answered([request.adopt(response) for request in asked[todo[index].pair]])

        failures: dict[tuple[str, str], Response] = {}
        for request, response in zip(todo, self._map(attempt, todo, arrived if on_answered else None), strict=True):
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

    def _score(self, payload: dict[str, Any], parse: Callable[[Any], _T]) -> _T:
        """POST a scoring request; a server without the endpoint cannot score at all."""
        try:
            return self._http.post("/completions", payload, parse)
        except RequestFailedError as error:
            if error.status in UNSUPPORTED_STATUSES:
                raise self._unsupported(f"HTTP {error.status}") from None
            raise

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
        score = self._score(
            prompt_logprobs_payload(self.config.model, tokens),
            lambda data: prompt_logprobs_score(data, tokens, context_len, self._unsupported),
        )
        return request.scored(
            score.logprob,
            score.is_greedy,
            n_prompt_tokens=score.n_prompt_tokens,
            n_continuation_tokens=score.n_continuation_tokens,
            truncated=truncated,
        )

    def _score_echo(self, request: Request) -> Response:
        context, continuation = move_trailing_spaces(*request.pair)
        prompt = context + continuation
        outcome = self._score(
            echo_payload(self.config.model, prompt),
            lambda data: echo_score(data, prompt, context, self._unsupported),
        )
        if isinstance(outcome, str):
            raise RequestFailedError(outcome)
        return request.scored(
            outcome.logprob,
            outcome.is_greedy,
            n_prompt_tokens=outcome.n_prompt_tokens,
            n_continuation_tokens=outcome.n_continuation_tokens,
        )

    # -- generation -----------------------------------------------------------------------------

    def _sampling(self, params: GenerationParams) -> dict[str, Any]:
        return sampling_payload(self.config.model, params)

    def _complete(self, request: Request, prompt: str, params: GenerationParams) -> Response:
        payload = {**self._sampling(params), "prompt": prompt}
        return self._http.post("/completions", payload, lambda data: completion_reply(request, data, prompt))

    def _chat_one(self, request: Request, conversation: list[ChatMessage], params: GenerationParams) -> Response:
        payload = {**self._sampling(params), "messages": conversation}
        if template_kwargs := getattr(params, "chat_template_kwargs", None):  # a reasoning model's (reasoning.py)
            payload["chat_template_kwargs"] = template_kwargs
        if self.server_kind == "vllm":
            payload["return_prompt_text"] = True  # the exact text the chat template produced
        return self._http.post("/chat/completions", payload, lambda data: chat_reply(request, data, conversation))

    def _guarded(self, request: Request, call: Callable[[], Response], prompt_text: str) -> Response:
        try:
            return call()
        except OpenAIEngineError as error:
            return request.generated("", prompt_text, 0, 0, "error", error=self._http.redact(str(error)))

    def _completion(self, request: Request, prompt: str, params: GenerationParams) -> Response:
        return self._guarded(request, lambda: self._complete(request, prompt, params), prompt)

    def generate(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]:
        return self._map(
            lambda request: self._completion(request, request.prompt or "", params), requests, _each(on_answered)
        )

    def chat(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]:
        """Chat completions; base models (chat_mode 'concat') get the contents joined by newlines instead."""
        if self.config.chat_mode == "concat":
            return self._map(
                lambda request: self._completion(request, concatenated(request), params), requests, _each(on_answered)
            )

        def one(request: Request) -> Response:
            conversation = request.messages or []
            fallback = conversation_text(conversation)
            return self._guarded(request, lambda: self._chat_one(request, conversation, params), fallback)

        return self._map(one, requests, _each(on_answered))

    def inspector(self) -> OpenAIInspector:
        """Through this engine's own client and tokenization (``engines/openai/inspection.py``)."""
        return OpenAIInspector(self)

    def shutdown(self) -> None:
        """Close the HTTP connections (a server started elsewhere keeps running)."""
        self._http.close()


def _each(on_answered: AnswerSink | None) -> Callable[[int, Response], None] | None:
    """An ``on_done`` for ``_map`` that hands each arrived answer on."""
    if on_answered is None:
        return None
    sink = on_answered
    return lambda _index, response: sink([response])
