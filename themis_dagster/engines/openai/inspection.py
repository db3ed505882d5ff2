"""Looking inside a model behind an OpenAI-style API: per-token log-probabilities, next-token top k, chat text.

The playground's inspection (``engines/inspection.py``) for ``OpenAICompatibleEngine``, over the
engine's own HTTP client and tokenization (no second client, no second tokenizer), so a running
``vllm-server`` and an API model answer as the in-process engine does:

- per-token log-probabilities: vLLM's ``prompt_logprobs: k`` on the same token ids the engine's
  loglikelihood sends, or the echoed ``logprobs`` of a legacy completions API;
- the next token's top k: one greedy token with ``logprobs: k`` on ``/v1/completions``;
- the chat template's text: vLLM's ``/tokenize`` with the messages, then ``/detokenize``.

What a server cannot give raises :class:`NotSupportedError` saying so (a chat-only API has no
completions endpoint; no generic API shows its chat template's text), never a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from themis_dagster.engines.openai.client import UNSUPPORTED_STATUSES, OpenAIClient
from themis_dagster.engines.openai.config import OpenAIEngineConfig
from themis_dagster.engines.openai.errors import LoglikelihoodUnsupportedError, RequestFailedError
from themis_dagster.engines.openai.logprobs import move_trailing_spaces
from themis_dagster.engines.openai.payloads import echo_payload, prompt_logprobs_payload
from themis_dagster.engines.token_scores import NotSupportedError, ScoredTokens, TokenScore
from themis_dagster.engines.tokenization import encode_pair, truncate_left
from themis_dagster.exchange import ChatMessage

_T = TypeVar("_T")


def _ranked(top: dict[str, float], k: int) -> list[tuple[str, float]]:
    """A ``{token: logprob}`` map, best first, at most ``k``."""
    return sorted(((str(token), float(lp)) for token, lp in top.items()), key=lambda pair: -pair[1])[:k]


class Served(Protocol):
    """What the inspector uses of a loaded ``OpenAICompatibleEngine`` (its client, settings and tokenization)."""

    config: OpenAIEngineConfig
    _http: OpenAIClient
    server_kind: str
    loglikelihood_mode: str

    def _tokenize(self, text: str) -> list[int]: ...

    def _tokenizer_facts(self) -> tuple[int, int | None]: ...


class OpenAIInspector:
    """Inspection through a loaded ``OpenAICompatibleEngine`` (``OpenAICompatibleEngine.inspector()``)."""

    def __init__(self, engine: Served) -> None:
        self.engine = engine
        self.http = engine._http

    def _where(self) -> str:
        return f"{self.engine.config.base_url} (model {self.engine.config.model!r})"

    def _ask(self, url: str, payload: dict[str, Any], parse: Callable[[Any], _T], what: str) -> _T:
        """POST ``payload``; a missing endpoint or a reply without ``what`` is NotSupportedError."""
        try:
            data = self.http.request("POST", url, payload, dict, self.engine.config.max_retries)
        except RequestFailedError as error:
            if error.status in UNSUPPORTED_STATUSES:
                raise NotSupportedError(f"{self._where()} cannot give {what} (HTTP {error.status})") from None
            raise
        try:  # read here, not by the client: a reply without them is an answer, not a malformed one to retry
            return parse(data)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
            raise NotSupportedError(f"{self._where()} did not give {what} ({type(error).__name__})") from None

    # -- per-token log-probabilities -----------------------------------------------------------

    def token_logprobs(self, context: str, continuation: str, top_k: int) -> ScoredTokens:
        mode = self.engine.loglikelihood_mode
        if mode == "none":
            raise NotSupportedError(f"{self._where()} gives no log-probabilities (loglikelihood: none)")
        try:
            if mode == "prompt_logprobs":
                return self._prompt_logprobs(context, continuation, top_k)
            return self._echo(context, continuation, top_k)
        except LoglikelihoodUnsupportedError as error:
            raise NotSupportedError(str(error)) from None

    def _prompt_logprobs(self, context: str, continuation: str, top_k: int) -> ScoredTokens:
        engine = self.engine
        max_len, prefix = engine._tokenizer_facts()
        context_ids, continuation_ids = encode_pair(
            engine._tokenize, prefix if prefix is not None else -1, context, continuation
        )
        tokens, context_len, truncated = truncate_left(context_ids, continuation_ids, max_len - 1)
        payload = {**prompt_logprobs_payload(engine.config.model, tokens), "prompt_logprobs": top_k}
        entries = self._ask(
            self.http.config.base_url + "/completions",
            payload,
            lambda data: list(data["choices"][0]["prompt_logprobs"]),
            "prompt log-probabilities",
        )
        scored = []
        for position in range(max(context_len, 1), len(tokens)):
            entry = entries[position]
            actual = entry[str(tokens[position])]
            top = sorted((e for e in entry.values() if int(e["rank"]) <= top_k), key=lambda e: int(e["rank"]))
            scored.append(
                TokenScore(
                    str(actual.get("decoded_token") or tokens[position]),
                    float(actual["logprob"]),
                    int(actual["rank"]),
                    [(str(e.get("decoded_token")), float(e["logprob"])) for e in top],
                )
            )
        return ScoredTokens(context, continuation, scored, context_len, truncated)

    def _echo(self, context: str, continuation: str, top_k: int) -> ScoredTokens:
        context, continuation = move_trailing_spaces(context, continuation)
        prompt = context + continuation
        payload = {**echo_payload(self.engine.config.model, prompt), "logprobs": max(1, top_k)}
        logprobs = self._ask(
            self.http.config.base_url + "/completions",
            payload,
            lambda data: dict(data["choices"][0]["logprobs"]),
            "echoed log-probabilities",
        )
        offsets = [int(offset) for offset in logprobs["text_offset"]]
        in_prompt = [i for i, offset in enumerate(offsets) if offset < len(prompt)]
        n_context = sum(1 for i in in_prompt if offsets[i] < len(context))
        tops = logprobs.get("top_logprobs") or [None] * len(offsets)
        scored = []
        for i in in_prompt[n_context:]:
            value = logprobs["token_logprobs"][i]
            if value is None:
                raise NotSupportedError("the server gives no log-probability for the first token: write a context")
            top = _ranked(tops[i] or {}, top_k)
            names = [token for token, _ in top]
            token = str(logprobs["tokens"][i])
            scored.append(TokenScore(token, float(value), names.index(token) + 1 if token in names else None, top))
        return ScoredTokens(context, continuation, scored, n_context)

    # -- the next token ------------------------------------------------------------------------

    def next_tokens(self, prompt: str, k: int, templated: bool) -> list[tuple[str, float]]:
        payload: dict[str, Any] = {
            "model": self.engine.config.model,
            "prompt": prompt,
            "max_tokens": 1,
            "temperature": 0.0,
            "logprobs": k,
        }
        if self.engine.server_kind == "vllm":
            payload["add_special_tokens"] = not templated  # a chat template's text writes its own
        top = self._ask(
            self.http.config.base_url + "/completions",
            payload,
            lambda data: dict(data["choices"][0]["logprobs"]["top_logprobs"][0]),
            "the next token's top k",
        )
        return _ranked(top, k)

    # -- the chat template ---------------------------------------------------------------------

    def chat_text(self, messages: list[ChatMessage]) -> str:
        if self.engine.config.chat_mode == "concat":
            raise NotSupportedError(f"{self.engine.config.model} declares no chat template (a base model)")
        if self.engine.server_kind != "vllm":
            raise NotSupportedError(
                f"{self._where()} does not show the text its chat template makes (only vLLM's server does)"
            )
        model = self.engine.config.model
        tokens = self._ask(
            self.http.root + "/tokenize",
            {"model": model, "messages": messages, "add_generation_prompt": True},
            lambda data: list(data["tokens"]),
            "the chat template's tokens",
        )
        return self._ask(
            self.http.root + "/detokenize",
            {"model": model, "tokens": tokens},
            lambda data: str(data["prompt"]),
            "the chat template's text",
        )
