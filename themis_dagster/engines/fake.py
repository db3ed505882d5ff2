"""A deterministic stand-in engine for fast unit tests of parsing, judging and metrics.

It never replaces the real engine in the end-to-end tests; it lets the graph's
plumbing be tested in seconds.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from themis_dagster.engines.base import AnswerSink, Engine, EngineInfo
from themis_dagster.engines.token_scores import ScoredTokens, TokenScore
from themis_dagster.exchange import ChatMessage, GenerationParams, Request, Response

if TYPE_CHECKING:
    from themis_dagster.engines.reasoning import ReasoningSplitter


DEFAULT_STEP_SIZE = 256  # vLLM's default max_num_seqs: the most requests one engine step runs


def _unit(text: str) -> float:
    """A stable pseudo-random number in [0, 1) derived from ``text``."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 0x1_0000_0000


class FakeTokenizer:
    """Words as tokens, plus the reasoning markers of vLLM's think-block parsers as special tokens.

    Enough of a tokenizer for vLLM's ``deepseek_r1`` and ``qwen3`` reasoning parsers, so the fake
    engine splits replies with vLLM's own parser, as the real engine does (``engines/reasoning.py``).
    """

    SPECIAL: tuple[str, ...] = ("<think>", "</think>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>")

    @property
    def all_special_tokens(self) -> list[str]:
        return list(self.SPECIAL)

    def get_vocab(self) -> dict[str, int]:
        return {token: index for index, token in enumerate(self.SPECIAL)}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        vocabulary = self.get_vocab()
        for token in self.SPECIAL:  # a special token is a token of its own, wherever it is written
            text = text.replace(token, f" {token} ")
        return [vocabulary.get(word, len(self.SPECIAL) + int(_unit(word) * 50_000)) for word in text.split()]

    def decode(self, ids: Sequence[int], **_: object) -> str:
        return " ".join(self.SPECIAL[i] if i < len(self.SPECIAL) else f"w{i}" for i in ids)

    def convert_tokens_to_ids(self, token: str) -> int | None:
        return self.get_vocab().get(token)


class FakeEngine(Engine):
    """Scores a continuation by its word count and a hash; replies via ``reply`` or an echo.

    ``fail`` plays a request the engine could not answer: it gets the request's text (context
    plus continuation, or the prompt) and returns an error message, or None to answer it.
    ``per_request_s`` is the time each answer takes inside a batch. Answers are made in steps of
    ``step_size`` (vLLM's default ``max_num_seqs``, 256: the most one engine step runs) and each
    step's are handed to ``on_answered`` together, as ``VLLMEngine`` hands on what a step finished;
    ``step_size=1`` hands each answer on as it is made.
    ``finish`` gives a reply's finish reason from its prompt (default ``stop``; ``length`` plays a
    reply cut at its token cap). ``reasoning``: a reasoning model's vLLM parser, which splits each
    chat reply into reasoning and answer as the real engine's does; the sampling settings of every
    call are kept in ``params_seen``.
    """

    streams_answers = True
    applies_reasoning = True  # splits replies itself; its budget changes nothing here (engines/reasoning.py)

    def __init__(
        self,
        model_path: str = "fake",
        reply: Callable[[str], str] | None = None,
        fail: Callable[[str], str | None] | None = None,
        latency_s: float = 0.0,
        per_request_s: float = 0.0,
        step_size: int = DEFAULT_STEP_SIZE,
        finish: Callable[[str], str] | None = None,
        reasoning: ReasoningSplitter | None = None,
    ) -> None:
        self.info = EngineInfo("fake", model_path, {"fake": "1"}, {}, 0.0)
        self.latency_s = latency_s  # seconds each call takes, as a batch on an accelerator would
        self.per_request_s = per_request_s
        if step_size < 1:
            raise ValueError(f"step_size must be at least 1, not {step_size}")
        self.step_size = step_size
        self.reply = reply or (lambda prompt: "1")
        self.fail = fail or (lambda text: None)
        self.finish = finish or (lambda prompt: "stop")
        self.reasoning = reasoning
        self.calls: list[str] = []
        self.params_seen: list[GenerationParams] = []

    def loglikelihood(self, requests: Sequence[Request], on_answered: AnswerSink | None = None) -> list[Response]:
        self._called(f"loglikelihood:{len(requests)}")
        return self._each(requests, self._score, on_answered)

    def _each(
        self, requests: Sequence[Request], answer: Callable[[Request], Response], on_answered: AnswerSink | None
    ) -> list[Response]:
        """Answer request by request, handing each step's answers on as the step ends."""
        answers: list[Response] = []
        for start in range(0, len(requests), self.step_size):
            for request in requests[start : start + self.step_size]:
                if self.per_request_s:
                    time.sleep(self.per_request_s)
                answers.append(answer(request))
            if on_answered is not None:
                on_answered(answers[start:])
        return answers

    def _score(self, request: Request) -> Response:
        context, continuation = request.pair
        if (error := self.fail(context + continuation)) is not None:
            return request.failed(error)
        words = max(len(continuation.split()), 1)
        logprob = -2.0 * words - _unit(context + "\x00" + continuation)
        n_context = len(context.split()) or 1
        return request.scored(logprob, False, n_prompt_tokens=n_context + words, n_continuation_tokens=words)

    def generate(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]:
        self._called(f"generate:{len(requests)}")
        self.params_seen.append(params)
        return self._each(requests, lambda r: self._reply(r, r.prompt or "", r.prompt or ""), on_answered)

    def chat(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]:
        self._called(f"chat:{len(requests)}")
        self.params_seen.append(params)
        return self._each(
            requests,
            lambda r: self._reply(r, (r.messages or [])[-1]["content"], str(r.messages or []), self.reasoning),
            on_answered,
        )

    def _reply(
        self, request: Request, prompt: str, prompt_text: str, reasoning: ReasoningSplitter | None = None
    ) -> Response:
        if (error := self.fail(prompt)) is not None:
            return request.generated("", prompt_text, len(prompt.split()), 0, "error", error)
        text = self.reply(prompt)
        response = request.generated(text, prompt_text, len(prompt.split()), len(text.split()), self.finish(prompt))
        if reasoning is None:
            return response
        return reasoning.split_response(response, FakeTokenizer().encode(text))

    def embed(self, requests: Sequence[Request]) -> list[Response]:
        """Pseudo-vectors (8 dimensions, per whitespace token, averaged) stable per text."""
        self._called(f"embedding:{len(requests)}")
        answers = []
        for request in requests:
            tokens = (request.prompt or "").split()
            if not tokens:
                answers.append(request.failed(f"{request.prompt!r} has no tokens"))
                continue
            vectors = {
                kind: [sum(_unit(f"{kind}|{token}|{i}") - 0.5 for token in tokens) / len(tokens) for i in range(8)]
                for kind in ("input", "hidden_mean")
            }
            answers.append(request.embedded(vectors, tokens))
        return answers

    def inspector(self) -> FakeInspector:
        return FakeInspector()

    def _called(self, call: str) -> None:
        self.calls.append(call)
        time.sleep(self.latency_s)


FAKE_VOCABULARY = ("1", "2", "yes", "no", "the", "a", "he", "she", "they", "A", "B", "C", ".", ",", "I")


class FakeInspector:
    """The fake engine's numbers, token = whitespace-separated word; sums equal ``FakeEngine.loglikelihood``."""

    def token_logprobs(self, context: str, continuation: str, top_k: int) -> ScoredTokens:
        words = continuation.split() or [continuation]
        extra = _unit(context + "\x00" + continuation)  # the fake engine's -2 per word, minus this once
        tokens = [
            TokenScore(word, -2.0 - (extra if index == len(words) - 1 else 0.0), 2, [("the", -1.0)][:top_k])
            for index, word in enumerate(words)
        ]
        return ScoredTokens(context, continuation, tokens, len(context.split()) or 1)

    def next_tokens(self, prompt: str, k: int, templated: bool) -> list[tuple[str, float]]:
        scores = {token: 4.0 * _unit(f"{prompt}\x00{token}") for token in FAKE_VOCABULARY}
        total = math.log(sum(math.exp(score) for score in scores.values()))
        ranked = sorted(((token, score - total) for token, score in scores.items()), key=lambda pair: -pair[1])
        return ranked[:k]

    def chat_text(self, messages: list[ChatMessage]) -> str:
        return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages) + "<|assistant|>\n"
