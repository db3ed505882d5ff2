"""OpenAICompatibleEngine against a tiny in-process HTTP server (no model, no network).

The fake server answers like vLLM (``/version``, ``/tokenize``, ``prompt_logprobs``) or like a
generic OpenAI-style API (echo + ``text_offset``), and can be told to fail, stall or send junk.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pydantic import ValidationError

from themis_dagster.engines.dispatch import dispatch
from themis_dagster.engines.openai.config import OpenAIEngineConfig
from themis_dagster.engines.openai.engine import OpenAICompatibleEngine
from themis_dagster.engines.openai.errors import LoglikelihoodUnsupportedError, OpenAIEngineError
from themis_dagster.engines.tokenization import encode_pair
from themis_dagster.exchange import ChatMessage, GenerationParams, Request, Response
from themis_dagster.registry.models import ModelSpec
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources import FakeEngineResource
from themis_dagster.resources.openai_config import openai_config_for
from themis_dagster.resources.served import OpenAIEngineResource

SECRET = "sk-test-DO-NOT-LEAK-0123456789"
BOS = 1


# -- a fake OpenAI-style server ---------------------------------------------------------------


def toy_encode(text: str) -> list[int]:
    """Character-level tokenizer: '<s>' is the BOS token, every other character one token."""
    ids, i = [], 0
    while i < len(text):
        if text.startswith("<s>", i):
            ids.append(BOS)
            i += 3
        else:
            ids.append(ord(text[i]) + 10)
            i += 1
    return ids


def toy_logprob(token: int) -> float:
    return -0.25 - (token % 5) * 0.5


def toy_rank(token: int) -> int:
    return 1 if token % 3 else 2


Reply = tuple[int, dict[str, str], bytes]


def json_reply(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    return status, headers or {}, json.dumps(data).encode()


@dataclass
class FakeServer:
    """Routes (method, path) to a responder; records requests and the most requests in flight."""

    vllm: bool = True
    max_model_len: int = 64
    responder: Callable[[str, str, dict[str, Any]], Reply | None] | None = None
    delay_s: float = 0.0
    requests: list[tuple[str, str, dict[str, Any], str]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0

    def count(self, path: str) -> int:
        return sum(1 for _, p, _, _ in self.requests if p == path)

    def handle(self, method: str, path: str, body: dict[str, Any]) -> Reply:
        if self.responder is not None:
            custom = self.responder(method, path, body)
            if custom is not None:
                return custom
        if self.vllm:
            if path == "/version":
                return json_reply({"version": "0.32.0+fake"})
            if path == "/tokenize":
                tokens = toy_encode(body["prompt"])
                return json_reply({"tokens": tokens, "count": len(tokens), "max_model_len": self.max_model_len})
            if path == "/tokenizer_info":
                return json_reply({"tokenizer_class": "Toy", "bos_token": "<s>", "eos_token": "</s>"})
        if path == "/v1/completions":
            return self.completion(body)
        if path == "/v1/chat/completions":
            reply = "echo: " + body["messages"][-1]["content"]
            data: dict[str, Any] = {
                "choices": [{"message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 3},
            }
            if body.get("return_prompt_text"):
                data["prompt_text"] = "<rendered>" + body["messages"][-1]["content"]
            return json_reply(data)
        return json_reply({"error": {"message": f"no route {path}"}}, status=404)

    def completion(self, body: dict[str, Any]) -> Reply:
        prompt = body["prompt"]
        if body.get("prompt_logprobs") is not None and self.vllm:
            entries: list[Any] = [None]
            for token in prompt[1:]:
                entries.append(
                    {str(token): {"logprob": toy_logprob(token), "rank": toy_rank(token), "decoded_token": "x"}}
                )
            choice: dict[str, Any] = {"text": "z", "finish_reason": "length", "prompt_logprobs": entries}
            return json_reply({"choices": [choice], "usage": {"prompt_tokens": len(prompt), "completion_tokens": 1}})
        if body.get("echo"):
            # whitespace-free toy: every character is a token, offsets are character positions
            tokens = [*prompt, "!"]
            scores = [toy_logprob(ord(c) + 10) for c in tokens[1:]]
            values: list[float | None] = [None, *scores]
            tops: list[dict[str, float] | None] = [None]
            tops += [
                {c: v + (0.0 if toy_rank(ord(c) + 10) == 1 else 1.0)} for c, v in zip(tokens[1:], scores, strict=True)
            ]
            logprobs: dict[str, Any] = {
                "tokens": tokens,
                "token_logprobs": values,
                "top_logprobs": tops,
                "text_offset": list(range(len(tokens))),
            }
            choice = {"text": prompt + "!", "finish_reason": "length", "logprobs": logprobs}  # type: ignore[no-redef]
            return json_reply({"choices": [choice], "usage": {"prompt_tokens": len(prompt), "completion_tokens": 1}})
        text = f"completion of {prompt}"
        choice = {"text": text, "finish_reason": "stop"}
        return json_reply({"choices": [choice], "usage": {"prompt_tokens": len(prompt), "completion_tokens": 2}})

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    state = FakeServer()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else {}
            with state.lock:
                state.requests.append((method, self.path, body, self.headers.get("Authorization", "")))
                state.in_flight += 1
                state.max_in_flight = max(state.max_in_flight, state.in_flight)
            try:
                if state.delay_s:
                    time.sleep(state.delay_s)
                status, headers, payload = state.handle(method, self.path, body)
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                with state.lock:
                    state.in_flight -= 1

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


class Sleeps(list[float]):
    """Records backoff delays instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make_engine(fake: FakeServer, sleeps: Sleeps | None = None, **overrides: Any) -> OpenAICompatibleEngine:
    settings: dict[str, Any] = {"base_url": fake.base_url, "model": "toy", "backoff_s": 0.5, "max_retries": 3}
    settings.update(overrides)
    return OpenAICompatibleEngine(OpenAIEngineConfig(**settings), sleep=sleeps if sleeps is not None else Sleeps())


GREEDY = GenerationParams(max_tokens=8)


def completions(*prompts: str) -> list[Request]:
    return [Request.completion(prompt) for prompt in prompts]


def conversations(*messages: list[ChatMessage]) -> list[Request]:
    return [Request.conversation(conversation) for conversation in messages]


# -- generation and chat ----------------------------------------------------------------------


def test_generate_and_chat_on_a_vllm_like_server(fake: FakeServer) -> None:
    engine = make_engine(fake)
    assert engine.server_kind == "vllm" and engine.info.versions["server"] == "0.32.0+fake"
    results = engine.generate(completions("a", "b"), GenerationParams(max_tokens=4, seed=3, stop=("\n",)))
    assert [r.text for r in results] == ["completion of a", "completion of b"]
    assert results[0].n_prompt_tokens == 1 and results[0].n_output_tokens == 2 and results[0].error is None
    sent = next(body for _, path, body, _ in fake.requests if path == "/v1/completions")
    assert sent["seed"] == 3 and sent["stop"] == ["\n"] and sent["max_tokens"] == 4 and sent["model"] == "toy"
    chat = engine.chat(conversations([{"role": "user", "content": "hi"}]), GREEDY)[0]
    assert chat.text == "echo: hi" and chat.prompt_text == "<rendered>hi" and chat.finish_reason == "stop"


def test_answers_are_handed_on_as_responses_arrive(fake: FakeServer) -> None:
    """Each answer reaches on_answered once, equal to the batch's; repeated pairs are each handed on."""
    engine = make_engine(fake)
    handed: list[Response] = []
    results = engine.generate(completions("a", "b", "c"), GREEDY, on_answered=handed.extend)
    assert sorted((r.request_id, r.text) for r in handed) == sorted((r.request_id, r.text) for r in results)
    cases = [("ab", "c"), ("ctx ", "cont"), ("ab", "c")]
    scored: list[Response] = []
    requests = [Request.loglikelihood(c, x, request_id=str(i)) for i, (c, x) in enumerate(cases)]
    answers = engine.loglikelihood(requests, on_answered=scored.extend)
    assert sorted((r.request_id, r.logprob) for r in scored) == sorted((r.request_id, r.logprob) for r in answers)
    again: list[Response] = []
    engine.loglikelihood(requests[:1], on_answered=again.extend)  # known to the engine: handed on at once
    assert [(r.request_id, r.logprob) for r in again] == [("0", answers[0].logprob)]


def test_generic_server_chat_records_the_conversation(fake: FakeServer) -> None:
    fake.vllm = False
    engine = make_engine(fake)
    assert engine.server_kind == "generic" and engine.loglikelihood_mode == "echo"
    chat = engine.chat(conversations([{"role": "user", "content": "hi"}]), GREEDY)[0]
    assert chat.prompt_text is not None and json.loads(chat.prompt_text) == [{"role": "user", "content": "hi"}]
    assert "return_prompt_text" not in fake.requests[-1][2]


def test_concat_mode_sends_base_models_plain_text(fake: FakeServer) -> None:
    engine = make_engine(fake, chat_mode="concat")
    result = engine.chat(conversations([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]), GREEDY)[
        0
    ]
    assert result.text == "completion of s\nu" and fake.count("/v1/chat/completions") == 0


def test_retries_5xx_with_exponential_backoff(fake: FakeServer) -> None:
    failures = {"left": 3}

    def flaky(method: str, path: str, body: dict[str, Any]) -> Reply | None:
        if path == "/v1/completions" and failures["left"] > 0:
            failures["left"] -= 1
            return json_reply({"error": "overloaded"}, status=503)
        return None

    fake.responder = flaky
    sleeps = Sleeps()
    result = make_engine(fake, sleeps).generate(completions("x"), GREEDY)[0]
    assert result.error is None and result.text == "completion of x"
    assert sleeps == [0.5, 1.0, 2.0] and fake.count("/v1/completions") == 4


def test_gives_up_after_max_retries_and_reports_per_request(fake: FakeServer) -> None:
    fake.responder = lambda m, p, b: json_reply({}, status=500) if "bad" in str(b.get("prompt")) else None
    sleeps = Sleeps()
    engine = make_engine(fake, sleeps, max_retries=2, backoff_s=1.0, backoff_max_s=1.5)
    results = engine.generate(completions("ok 1", "bad", "ok 2"), GREEDY)
    assert [r.error is None for r in results] == [True, False, True]
    assert results[0].text == "completion of ok 1" and results[2].text == "completion of ok 2"
    assert "HTTP 500" in (results[1].error or "") and "gave up after 3 attempts" in (results[1].error or "")
    assert results[1].finish_reason == "error" and results[1].prompt_text == "bad"
    assert sleeps == [1.0, 1.5]  # capped at backoff_max_s
    assert engine.counters["failed_requests"] == 1


def test_429_honours_retry_after(fake: FakeServer) -> None:
    state = {"n": 0}

    def limited(method: str, path: str, body: dict[str, Any]) -> Reply | None:
        if path == "/v1/completions" and state["n"] == 0:
            state["n"] += 1
            return json_reply({"error": "rate limited"}, status=429, headers={"Retry-After": "7"})
        return None

    fake.responder = limited
    sleeps = Sleeps()
    assert make_engine(fake, sleeps).generate(completions("x"), GREEDY)[0].error is None
    assert sleeps == [7.0]


def test_malformed_json_is_retried_then_fails_clearly(fake: FakeServer) -> None:
    state = {"n": 0}

    def junk(method: str, path: str, body: dict[str, Any]) -> Reply | None:
        if path == "/v1/completions":
            state["n"] += 1
            if state["n"] == 1:
                return 200, {}, b"{not json"
            if body["prompt"] == "always junk":
                return 200, {}, b'{"choices": []}'
        return None

    fake.responder = junk
    engine = make_engine(fake, max_retries=2)
    assert engine.generate(completions("x"), GREEDY)[0].text == "completion of x"  # junk once, then fine
    failed = engine.generate(completions("always junk"), GREEDY)[0]
    assert failed.error is not None and "malformed response" in failed.error and "3 attempts" in failed.error


def test_400_is_not_retried(fake: FakeServer) -> None:
    fake.responder = lambda m, p, b: (
        json_reply({"error": "prompt too long"}, status=400) if p == "/v1/completions" else None
    )
    sleeps = Sleeps()
    result = make_engine(fake, sleeps).generate(completions("x"), GREEDY)[0]
    assert "HTTP 400" in (result.error or "") and "prompt too long" in (result.error or "")
    assert sleeps == [] and fake.count("/v1/completions") == 1


def test_timeouts_are_retried_and_reported(fake: FakeServer) -> None:
    engine = make_engine(fake, timeout_s=0.3, max_retries=1)
    fake.delay_s = 1.0
    started = time.perf_counter()
    result = engine.generate(completions("slow"), GREEDY)[0]
    assert result.error is not None and "timed out after 0.3 s" in result.error and "2 attempts" in result.error
    assert time.perf_counter() - started < 3.0


def test_slow_responses_within_the_timeout_succeed(fake: FakeServer) -> None:
    engine = make_engine(fake, timeout_s=5.0, max_concurrency=4)
    fake.delay_s = 0.3
    results = engine.generate(completions(*(f"p{i}" for i in range(4))), GREEDY)
    assert all(r.error is None for r in results) and engine.counters["retries"] == 0


def test_unreachable_server_fails_after_retries() -> None:
    closed = FakeServer(port=1)  # nothing listens on port 1
    sleeps = Sleeps()
    with pytest.raises(OpenAIEngineError, match="connection failed"):
        make_engine(closed, sleeps, max_retries=2)  # the GET /version probe cannot connect
    engine = make_engine(closed, sleeps, max_retries=2, server="generic")
    result = engine.generate(completions("x"), GREEDY)[0]
    assert result.error is not None and "connection failed" in result.error


def test_concurrency_limit_is_respected(fake: FakeServer) -> None:
    engine = make_engine(fake, max_concurrency=4)
    fake.delay_s = 0.1
    fake.max_in_flight = 0
    results = engine.generate(completions(*(f"p{i}" for i in range(20))), GREEDY)
    assert [r.text for r in results] == [f"completion of p{i}" for i in range(20)]
    assert fake.max_in_flight == 4


def test_activity_callback_brackets_each_batch(fake: FakeServer) -> None:
    calls: list[float] = []
    engine = OpenAICompatibleEngine(
        OpenAIEngineConfig(base_url=fake.base_url, model="toy"), on_activity=lambda: calls.append(time.time())
    )
    engine.generate(completions("a", "b"), GREEDY)
    engine.chat(conversations([{"role": "user", "content": "c"}]), GREEDY)
    assert len(calls) == 4


# -- the API key ------------------------------------------------------------------------------


def test_api_key_is_sent_but_never_leaks(fake: FakeServer, monkeypatch: pytest.MonkeyPatch, caplog) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("THEMIS_TEST_KEY", SECRET)
    state = {"n": 0}

    def unauthorised(method: str, path: str, body: dict[str, Any]) -> Reply | None:
        if path == "/v1/completions":
            state["n"] += 1
            if state["n"] == 1:  # a transient error whose body echoes the key, logged on retry
                return json_reply({"error": f"busy for {SECRET}"}, status=503)
            return json_reply({"error": {"message": f"Incorrect API key provided: {SECRET}"}}, status=401)
        return None

    fake.responder = unauthorised
    caplog.set_level(logging.DEBUG)
    engine = make_engine(fake, api_key_env="THEMIS_TEST_KEY")
    results = engine.generate(completions("a", "b", "c"), GREEDY)
    assert all(r.error and "HTTP 401" in r.error for r in results)
    assert all(auth == f"Bearer {SECRET}" for _, _, _, auth in fake.requests)
    assert fake.count("/v1/completions") <= 4, "after a 401 the remaining requests are not sent"
    with pytest.raises(OpenAIEngineError, match="HTTP 401") as caught:
        engine.loglikelihood([Request.loglikelihood("ab", "c")])
    visible = [
        repr(engine), str(engine), repr(engine.info), str(engine.info.__dict__), json.dumps(engine.info.settings),
        *(r.error or "" for r in results), *(repr(r) for r in results), str(caught.value), repr(caught.value),
        caplog.text, repr(engine.config), repr(vars(engine)),
    ]  # fmt: skip
    for text in visible:
        assert SECRET not in text
    assert "***" in (results[0].error or "") and engine.info.settings["api_key_env"] == "THEMIS_TEST_KEY"
    assert "busy for ***" in caplog.text


def test_missing_key_variable_is_named(fake: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("THEMIS_ABSENT_KEY", raising=False)
    with pytest.raises(OpenAIEngineError, match="THEMIS_ABSENT_KEY"):
        make_engine(fake, api_key_env="THEMIS_ABSENT_KEY")


@pytest.mark.parametrize(
    ("field_name", "value"),
    [("base_url", "localhost:8000"), ("api_key_env", "sk-abc"), ("max_concurrency", 0), ("timeout_s", -1)],
)
def test_config_is_validated(field_name: str, value: object) -> None:
    settings: dict[str, Any] = {"base_url": "http://127.0.0.1:1/v1", "model": "m", field_name: value}
    with pytest.raises(ValidationError, match=field_name):
        OpenAIEngineConfig(**settings)


# -- loglikelihood ----------------------------------------------------------------------------


def expected_score(context: str, continuation: str, max_len: int = 64) -> tuple[float, bool, int, int]:
    context_ids, continuation_ids = encode_pair(toy_encode, BOS, context, continuation)
    tokens = (context_ids + continuation_ids)[-(max_len - 1) :]
    n_context = len(tokens) - len(continuation_ids) if len(context_ids + continuation_ids) <= max_len - 1 else None
    if n_context is None:
        n_context = max(len(context_ids) - (len(context_ids + continuation_ids) - (max_len - 1)), 0)
    scored = tokens[max(n_context, 1) :]
    total = sum(toy_logprob(t) for t in scored)
    return total, all(toy_rank(t) == 1 for t in scored), n_context, len(tokens) - n_context


def test_loglikelihood_by_prompt_logprobs_matches_lm_eval_split(fake: FakeServer) -> None:
    engine = make_engine(fake)
    assert engine.loglikelihood_mode == "prompt_logprobs"
    cases = [("Question: x", " answer"), ("ctx ", "cont"), ("", "whole sentence"), ("ab", "c"), ("ab", "c")]
    results = engine.loglikelihood([Request.loglikelihood(c, x, request_id=str(i)) for i, (c, x) in enumerate(cases)])
    assert [(r.request_id, r.request_type) for r in results] == [(str(i), "loglikelihood") for i in range(5)]
    for (context, continuation), result in zip(cases, results, strict=True):
        total, greedy, n_context, n_continuation = expected_score(context, continuation)
        assert result.logprob == pytest.approx(total)
        assert result.n_prompt_tokens is not None and result.n_continuation_tokens is not None
        n_context_tokens = result.n_prompt_tokens - result.n_continuation_tokens
        assert (result.is_greedy, n_context_tokens, result.n_continuation_tokens) == (
            greedy,
            n_context,
            n_continuation,
        )
        assert result.finish_reason == "scored"  # not truncated
    empty = next(body for _, path, body, _ in fake.requests if path == "/v1/completions" and body["prompt"][0] == BOS)
    assert empty["prompt_logprobs"] == 0 and empty["max_tokens"] == 1
    assert fake.count("/v1/completions") == 4, "duplicate requests are scored once"
    again = engine.loglikelihood([Request.loglikelihood("ab", "c", request_id="3")])
    assert again == [results[3]] and fake.count("/v1/completions") == 4


def test_loglikelihood_truncates_on_the_left(fake: FakeServer) -> None:
    fake.max_model_len = 16
    result = make_engine(fake).loglikelihood([Request.loglikelihood("a long context here", " and more")])[0]
    total, _, n_context, n_continuation = expected_score("a long context here", " and more", max_len=16)
    assert result.finish_reason == "truncated" and n_context + n_continuation == 15
    assert (result.n_prompt_tokens, result.n_continuation_tokens) == (15, n_continuation)
    assert result.logprob == pytest.approx(total)


def test_loglikelihood_by_echo_uses_text_offsets(fake: FakeServer) -> None:
    fake.vllm = False
    engine = make_engine(fake)
    result = engine.loglikelihood([Request.loglikelihood("The cat ", "sat")])[0]
    # trailing space moves to the continuation: context "The cat", continuation " sat"
    assert result.n_prompt_tokens is not None and result.n_continuation_tokens is not None
    assert (result.n_prompt_tokens - result.n_continuation_tokens, result.n_continuation_tokens) == (7, 4)
    assert result.logprob == pytest.approx(sum(toy_logprob(ord(c) + 10) for c in " sat"))
    assert result.is_greedy == all(toy_rank(ord(c) + 10) == 1 for c in " sat")
    sent = fake.requests[-1][2]
    assert sent["echo"] is True and sent["logprobs"] == 1 and sent["prompt"] == "The cat sat"


def test_echo_cannot_score_an_empty_context(fake: FakeServer) -> None:
    fake.vllm = False
    results = make_engine(fake).loglikelihood([Request.loglikelihood("", "abc"), Request.loglikelihood("a", "b")])
    assert results[0].logprob is None and "no logprob for the first prompt token" in (results[0].error or "")
    assert results[1].logprob is not None
    assert results[1].error is None


def test_unsupported_servers_get_a_clear_error(fake: FakeServer) -> None:
    fake.vllm = False
    fake.responder = lambda m, p, b: json_reply({"error": "no"}, status=404) if p == "/v1/completions" else None
    with pytest.raises(LoglikelihoodUnsupportedError, match=r"/v1/completions cannot score continuations"):
        make_engine(fake).loglikelihood([Request.loglikelihood("a", "b")])
    fake.responder = lambda m, p, b: json_reply({"choices": [{"text": "x"}]}) if p == "/v1/completions" else None
    with pytest.raises(LoglikelihoodUnsupportedError, match="no echoed logprobs"):
        make_engine(fake).loglikelihood([Request.loglikelihood("a", "b")])
    with pytest.raises(LoglikelihoodUnsupportedError, match="disabled"):
        make_engine(fake, loglikelihood="none").loglikelihood([Request.loglikelihood("a", "b")])


def test_partial_loglikelihood_failure_keeps_the_answers(fake: FakeServer, caplog: pytest.LogCaptureFixture) -> None:
    broken = {"on": True}

    def fail_one(method: str, path: str, body: dict[str, Any]) -> Reply | None:
        if path == "/v1/completions" and broken["on"] and body["prompt"][-1] == ord("z") + 10:
            return json_reply({"error": "boom"}, status=500)
        return None

    fake.responder = fail_one
    engine = make_engine(fake, max_retries=1)
    requests = [Request.loglikelihood("a", "b"), Request.loglikelihood("a", "z"), Request.loglikelihood("c", "d")]
    first = engine.loglikelihood(requests)
    assert "1 of 3 loglikelihood requests failed" in caplog.text
    assert [r.logprob is None for r in first] == [False, True, False]
    assert [r.error is None for r in first] == [True, False, True]
    assert first[1].error is not None and "HTTP 500" in first[1].error
    sent_before = fake.count("/v1/completions")
    broken["on"] = False
    results = engine.loglikelihood(requests)
    assert fake.count("/v1/completions") == sent_before + 1, "only the failed request is sent again"
    assert results[0] == first[0]


def test_dispatch_records_failures_per_request(fake: FakeServer) -> None:
    fake.responder = lambda m, p, b: json_reply({}, status=500) if "bad" in str(b.get("messages")) else None
    engine = make_engine(fake, max_retries=0)
    gen = GenerationParams().model_dump(mode="json")
    requests = [
        Request("r1", "i1", "chat", messages=[{"role": "user", "content": "good"}], gen_params=gen),
        Request("r2", "i2", "chat", messages=[{"role": "user", "content": "bad"}], gen_params=gen),
        Request("r3", "i3", "loglikelihood", context="ab", continuation="c"),
    ]
    answers, stats = dispatch(engine, requests)
    assert answers[0].text == "echo: good" and answers[0].error is None
    assert answers[1].error is not None and answers[2].logprob is not None
    assert stats.errors == 1


def test_openai_resource_builds_the_engine(fake: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THEMIS_OPENAI_BASE_URL", fake.base_url)
    spec = ModelSpec.model_validate({"id": "toy", "source": {"kind": "local", "path": "/nonexistent"}})
    resource = OpenAIEngineResource(max_concurrency=2)
    engine = resource.engine_for(spec, ResolvedWeights("/nonexistent", "remote", "none"))
    assert isinstance(engine, OpenAICompatibleEngine)
    assert engine.info.settings["model"] == "toy" and engine.info.settings["max_concurrency"] == 2
    assert resource.engine_for(spec, ResolvedWeights("/nonexistent", "remote", "none")) is engine
    resource.release()
    monkeypatch.delenv("THEMIS_OPENAI_BASE_URL")
    with pytest.raises(ValueError, match="THEMIS_OPENAI_BASE_URL"):
        OpenAIEngineResource().engine_for(spec, ResolvedWeights("/x", "remote", "none"))


def test_resources_send_base_models_concatenated_and_chat_models_as_chats(fake: FakeServer) -> None:
    """Every engine resource builds the client's settings with ``openai_config_for``."""
    chat = ModelSpec.model_validate({"id": "chat", "source": {"kind": "local", "path": "/nonexistent"}})
    base = chat.model_copy(update={"chat_template": None})
    assert openai_config_for(base, base_url=fake.base_url, model="m").chat_mode == "concat"
    config = openai_config_for(chat, base_url=fake.base_url, model="m", max_retries=1, engine_name="vllm-server")
    assert (config.chat_mode, config.max_retries, config.engine_name) == ("chat", 1, "vllm-server")
    api = ModelSpec.model_validate(
        {"id": "hosted", "source": {"kind": "api", "base_url": fake.base_url, "model": "served", "max_concurrency": 3}}
    )
    resource = FakeEngineResource()
    engine = resource.engine_for(api, ResolvedWeights("hosted", "api", "api:0"))
    assert isinstance(engine, OpenAICompatibleEngine)  # a model behind an API is never given to the fake engine
    assert (engine.config.model, engine.config.max_concurrency, engine.config.chat_mode) == ("served", 3, "chat")
    resource.release()
