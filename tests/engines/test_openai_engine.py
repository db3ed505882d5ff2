"""OpenAICompatibleEngine against a tiny in-process HTTP server (``openai_fake.py``): generation and chat, retries,
timeouts, concurrency, the API key and the configuration (loglikelihoods: ``test_openai_loglikelihood.py``)."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
from pydantic import ValidationError

from tests.engines.openai_fake import (
    GREEDY,
    SECRET,
    FakeServer,
    Reply,
    Sleeps,
    completions,
    conversations,
    json_reply,
    make_engine,
)
from themis_dagster.engines.openai.config import OpenAIEngineConfig
from themis_dagster.engines.openai.engine import OpenAICompatibleEngine
from themis_dagster.engines.openai.errors import OpenAIEngineError
from themis_dagster.exchange import GenerationParams, Request, Response

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
