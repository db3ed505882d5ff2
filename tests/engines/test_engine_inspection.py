"""engines/inspection.py: per-token log-probabilities, next-token top k and the chat template's text.

On the fake engine by hand; on the real vLLM engine (marked ``engine``) the tokens of a
continuation add up to the number ``VLLMEngine.loglikelihood`` gives for it, and the next
token's top k are ordered and are probabilities.
"""

from __future__ import annotations

import math

import pytest

from themis_dagster.engines import inspection
from themis_dagster.engines.base import Engine, EngineInfo
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.exchange import Request


def test_fake_tokens_add_up_to_the_fake_loglikelihood() -> None:
    engine = FakeEngine()
    for context, continuation in (("The doctor said that", "he is busy"), ("", "one")):
        scored = inspection.token_logprobs(engine, context, continuation, top_k=3)
        expected = engine.loglikelihood([Request.loglikelihood(context, continuation)])[0].logprob
        assert [t.token for t in scored.tokens] == continuation.split()
        assert scored.logprob == pytest.approx(expected) and not scored.is_greedy


def test_fake_next_tokens_and_chat_text() -> None:
    engine = FakeEngine()
    ranked = inspection.next_tokens(engine, "The nurse said", 5)
    assert len(ranked) == 5 and [lp for _, lp in ranked] == sorted((lp for _, lp in ranked), reverse=True)
    assert sum(math.exp(lp) for _, lp in inspection.next_tokens(engine, "The nurse said", 20)) == pytest.approx(1.0)
    assert inspection.chat_text(engine, [{"role": "user", "content": "hi"}]) == "<|user|>\nhi\n<|assistant|>\n"


def test_an_engine_without_inspection_is_named() -> None:
    class Remote(Engine):  # declares no inspector: Engine.inspector's default
        info = EngineInfo("openai", "remote")

    with pytest.raises(inspection.NotSupportedError, match="the openai engine does not expose"):
        inspection.token_logprobs(Remote(), "a", "b")


@pytest.mark.engine
def test_vllm_tokens_add_up_to_its_loglikelihood() -> None:
    from tests.conftest import SETTINGS
    from themis_dagster.engines.vllm.engine import VLLMEngine
    from themis_dagster.registry.models import DEFAULT_MODEL_ID, get_model, load_registry
    from themis_dagster.registry.weights import resolve_weights

    spec = get_model(load_registry(SETTINGS.models_file), DEFAULT_MODEL_ID)
    engine = VLLMEngine(spec, resolve_weights(spec, SETTINGS.models_dir, SETTINGS.cache_dir).path)
    try:
        pairs = [("The doctor said that", " he is busy"), ("The doctor said that", " she is busy"), ("", "Hello.")]
        answers = engine.loglikelihood([Request.loglikelihood(c, x) for c, x in pairs])
        for (context, continuation), answer in zip(pairs, answers, strict=True):
            scored = inspection.token_logprobs(engine, context, continuation, top_k=5)
            # one prompt alone vs in a batch: bf16 sums differ in the third decimal (-14.8368 vs -14.8387 seen)
            assert scored.logprob == pytest.approx(answer.logprob, abs=0.02)
            assert scored.is_greedy == answer.is_greedy and len(scored.tokens) == answer.n_continuation_tokens
            assert "".join(t.token for t in scored.tokens).strip() == continuation.strip()
            assert all(len(t.top) <= 6 and t.rank is not None and t.rank >= 1 for t in scored.tokens)
        chat = inspection.chat_text(engine, [{"role": "user", "content": "Say hi."}])
        assert "Say hi." in chat and chat != "Say hi."
        ranked = inspection.next_tokens(engine, chat, 5, templated=True)
        assert len(ranked) == 5 and ranked == sorted(ranked, key=lambda pair: -pair[1])
        assert 0 < sum(math.exp(lp) for _, lp in ranked) <= 1.0 + 1e-6
    finally:
        engine.shutdown()
