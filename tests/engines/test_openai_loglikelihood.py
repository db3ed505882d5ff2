"""OpenAICompatibleEngine's loglikelihoods against the in-process server (``openai_fake.py``): by prompt logprobs
(vLLM) or echo offsets (generic APIs), as lm-eval splits them; partial failures; and the resources that build it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engines.openai_fake import (
    BOS,
    FakeServer,
    Reply,
    json_reply,
    make_engine,
    toy_encode,
    toy_logprob,
    toy_rank,
)
from themis_dagster.engines.dispatch import dispatch
from themis_dagster.engines.openai.engine import OpenAICompatibleEngine
from themis_dagster.engines.openai.errors import LoglikelihoodUnsupportedError
from themis_dagster.engines.tokenization import encode_pair
from themis_dagster.exchange import GenerationParams, Request
from themis_dagster.registry.models import ModelSpec
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources import FakeEngineResource
from themis_dagster.resources.openai_config import openai_config_for
from themis_dagster.resources.served import OpenAIEngineResource

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
