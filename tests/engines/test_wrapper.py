"""A wrapper forwards every member of ``Engine`` it does not change: none is dropped.

``Engine`` (engines/base.py) lists every capability and request type; ``EngineWrapper``
(engines/wrapper.py) forwards each to the wrapped engine. Each wrapper names what it changes
(``CHANGES``); for every other member the wrapper's answer is the inner engine's. A capability
added to ``Engine`` and not forwarded fails ``test_the_wrapper_base_forwards_every_member``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from themis_dagster.engines.base import AnswerSink, Engine, EngineInfo
from themis_dagster.engines.dispatch import dispatch
from themis_dagster.engines.fake import FakeEngine, FakeInspector
from themis_dagster.engines.reasoning import ReasoningBudget
from themis_dagster.engines.token_scores import TokenInspector
from themis_dagster.engines.wrapper import EngineWrapper
from themis_dagster.exchange import GenerationParams, Request, Response
from themis_dagster.mitigations.engine import MitigatedEngine
from themis_dagster.registry.mitigation import LogitBias, ReplyFilter, SystemPrompt
from themis_dagster.registry.models import ReasoningSpec

MEMBERS = sorted(name for name in vars(Engine) if not name.startswith("_") and name != "info")
CAPABILITIES = [name for name in MEMBERS if isinstance(vars(Engine)[name], property)]
REQUESTS = ["loglikelihood", "generate", "chat", "embed"]
REASONING = ReasoningSpec(parser="deepseek_r1", budget_tokens=8)
WRAPPERS: dict[str, Any] = {
    "reasoning budget": lambda inner: ReasoningBudget(inner, REASONING),
    "system prompt": lambda inner: MitigatedEngine(inner, SystemPrompt(text="Be fair.")),
    "logit bias": lambda inner: MitigatedEngine(inner, LogitBias(token_ids={7: -1.0})),
    "reply filter": lambda inner: MitigatedEngine(inner, ReplyFilter(pattern="x", replacement="y")),
}
# what each wrapper changes on purpose; everything else must be the inner engine's
CHANGES = {
    ReasoningBudget: {"chat", "applies_reasoning"},
    MitigatedEngine: {"loglikelihood", "generate", "chat", "shutdown"},
}


class _Everything(Engine):
    """Every capability set away from its default; every call recorded and answered with a marker."""

    streams_answers = True
    applies_reasoning = True
    in_process = True
    tokenizer = object()

    def __init__(self) -> None:
        self.info = EngineInfo("everything", "/m", {"lib": "1"}, {"own": 1}, 2.5)
        self.calls: list[tuple[str, Any]] = []
        self.inspected = FakeInspector()

    def _answer(self, name: str, requests: Sequence[Request], on_answered: AnswerSink | None) -> list[Response]:
        self.calls.append((name, on_answered))
        answers = [request.failed(name) for request in requests]
        if on_answered is not None:
            on_answered(answers)
        return answers

    def loglikelihood(self, requests: Sequence[Request], on_answered: AnswerSink | None = None) -> list[Response]:
        return self._answer("loglikelihood", requests, on_answered)

    def generate(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]:
        return self._answer("generate", requests, on_answered)

    def chat(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]:
        return self._answer("chat", requests, on_answered)

    def embed(self, requests: Sequence[Request]) -> list[Response]:
        return self._answer("embed", requests, None)

    def inspector(self) -> TokenInspector:
        return self.inspected

    def shutdown(self) -> None:
        self.calls.append(("shutdown", None))


def _request(member: str) -> Request:
    if member == "loglikelihood":
        return Request.loglikelihood("ctx", " x", "r", "i")
    if member == "embed":
        return Request.embedding("word", "r", "i")
    if member == "chat":
        return Request.conversation([{"role": "user", "content": "p"}], "r", "i")
    return Request("r", "i", "generate", prompt="p")


def test_engine_declares_every_capability_with_a_default() -> None:
    assert CAPABILITIES == ["applies_reasoning", "in_process", "streams_answers", "tokenizer"]
    assert set(MEMBERS) == {*CAPABILITIES, *REQUESTS, "inspector", "shutdown"}

    class Bare(Engine):
        info = EngineInfo("bare", "/m")

    bare = Bare()
    defaults = (bare.streams_answers, bare.applies_reasoning, bare.in_process, bare.tokenizer)
    assert defaults == (False, False, False, None)
    params = GenerationParams()
    for call, says in (
        (lambda: bare.loglikelihood([]), "scores no continuations"),
        (lambda: bare.generate([], params), "completes no prompts"),
        (lambda: bare.chat([], params), "answers no conversations"),
        (lambda: bare.embed([]), "Bare computes no embeddings"),
        (bare.inspector, "the bare engine does not expose token log-probabilities"),
    ):
        with pytest.raises(Exception, match=says):
            call()
    bare.shutdown()  # nothing to free


def test_the_wrapper_base_forwards_every_member() -> None:
    assert set(MEMBERS) <= set(vars(EngineWrapper)), "EngineWrapper must forward every member of Engine"


@pytest.mark.parametrize("name", list(WRAPPERS))
def test_a_wrapper_drops_no_capability(name: str) -> None:
    inner = _Everything()
    wrapper = WRAPPERS[name](inner)
    changed = CHANGES[type(wrapper)]
    assert isinstance(wrapper, EngineWrapper)
    for capability in CAPABILITIES:
        if capability not in changed:
            assert getattr(wrapper, capability) is getattr(inner, capability), (name, capability)
    assert wrapper.inspector() is inner.inspected
    assert (wrapper.info.engine, wrapper.info.model_path, wrapper.info.versions) == ("everything", "/m", {"lib": "1"})
    assert wrapper.info.settings["own"] == 1 and wrapper.info.load_seconds == 2.5
    for member in REQUESTS:
        inner.calls.clear()
        streamed: list[Response] = []
        call = getattr(wrapper, member)
        if member == "embed":
            answers = call([_request(member)])
        elif member == "loglikelihood":
            answers = call([_request(member)], on_answered=streamed.extend)
        else:
            answers = call([_request(member)], GenerationParams(), on_answered=streamed.extend)
        assert [c for c, _ in inner.calls] == [member], (name, member)
        assert [a.request_id for a in answers] == ["r"] and answers[0].error == member
        if member != "embed":
            assert [a.request_id for a in streamed] == ["r"], (name, member, "answers handed on")
    inner.calls.clear()
    wrapper.shutdown()
    assert inner.calls == ([] if "shutdown" in changed else [("shutdown", None)])


def test_a_mitigated_model_embeds_as_its_parent() -> None:
    """A mitigation changes no word vector: an ``iat_weat`` variant gets its parent's (no 'computes no embeddings')."""
    parent = FakeEngine()
    requests = [Request.embedding(word, f"r{i}", "i") for i, word in enumerate(["doctor", "nurse"])]
    expected, _ = dispatch(parent, requests)
    for mitigation in (SystemPrompt(text="Be fair."), LogitBias(words={"he": -5.0}, token_ids={})):
        answers, stats = dispatch(MitigatedEngine(parent, mitigation), requests)
        assert stats.errors == 0
        assert [a.text for a in answers] == [e.text for e in expected] and expected[0].text
