"""The playground on the OpenAI-compatible engine (a running vllm-server, an API model), under Streamlit's AppTest.

The engine talks to the small in-process stub server of the engine's own tests
(tests/engines/openai_fake.py): vLLM-like (``prompt_logprobs``, ``/tokenize``) or a
chat-only API without completions, where the page says what it cannot give instead of failing.
No engine slot is taken for either, and the API key is never shown.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance
from streamlit.testing.v1 import AppTest

from tests.conftest import requires_mirror
from tests.engines.openai_fake import FakeServer, fake, json_reply, toy_encode  # noqa: F401 - fake: fixture
from tests.explorer.apptest import TIMEOUT
from tests.explorer.apptest import frame as _frame
from tests.explorer.apptest import problems as _problems
from tests.explorer.apptest import texts as _texts
from tests.explorer_warehouse import Built
from themis_dagster.engines.openai.config import OpenAIEngineConfig
from themis_dagster.engines.openai.engine import OpenAICompatibleEngine
from themis_dagster.exchange import Request
from themis_dagster.explorer import APP
from themis_dagster.explorer.engine_slot import needs_slot, shared_slot
from themis_dagster.registry.models import load_registry
from themis_dagster.runs.pools import ENGINE_POOL
from themis_dagster.settings import Settings

pytestmark = requires_mirror  # the explorer's warehouse is built from the benchmark datasets
SECRET = "sk-playground-LEAKCHECK-87654321"
MODEL = "hosted"
TOP = {"he": -0.4, "she": -1.3, "they": -2.2, "it": -3.0}


def vllm_extras(method: str, path: str, body: dict[str, Any]) -> Any:
    """What vLLM's server adds to the stub: a next token's top k, a chat template's tokens and text."""
    if path == "/v1/completions" and body.get("logprobs") and not body.get("echo"):
        top = dict(list(TOP.items())[: int(body["logprobs"])])
        choice = {"text": "he", "finish_reason": "length", "logprobs": {"top_logprobs": [top]}}
        return json_reply({"choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": 1}})
    if path == "/tokenize" and "messages" in body:
        text = "".join(f"<|{m['role']}|>{m['content']}" for m in body["messages"]) + "<|assistant|>"
        return json_reply({"tokens": toy_encode(text), "count": len(text), "max_model_len": 64})
    if path == "/detokenize":
        return json_reply({"prompt": "".join(chr(token - 10) for token in body["tokens"])})
    return None


def chat_only(method: str, path: str, body: dict[str, Any]) -> Any:
    """A hosted API with chat completions only: no /completions, no /version."""
    if path == "/v1/completions":
        return json_reply({"error": {"message": "not found"}}, status=404)
    return None


@pytest.fixture
def hosted(built: Built, fake: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:  # noqa: F811
    """The registry plus an API model at the stub, its key in the environment."""
    monkeypatch.setenv("THEMIS_TEST_PLAYGROUND_KEY", SECRET)
    registry = tmp_path / "models.yaml"
    registry.write_text(built.models_file.read_text() + f"  - {{id: {MODEL}, source: {{kind: api, base_url: "
                        f"'{fake.base_url}', model: toy, api_key_env: THEMIS_TEST_PLAYGROUND_KEY}}}}\n")  # fmt: skip
    monkeypatch.setenv("THEMIS_MODELS_FILE", str(registry))
    shared_slot().release()
    yield fake
    shared_slot().release()


def _page() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    at.switch_page("playground.py")
    at.query_params.update(model=MODEL)
    return at.run()


def _no_slot_held() -> bool:
    instance = DagsterInstance.get()  # held: the storage only keeps a weak reference to it
    info = instance.event_log_storage.get_concurrency_info(ENGINE_POOL)
    return not [slot for slot in info.claimed_slots if slot.run_id == shared_slot().run_id]


def test_scores_chats_and_ranks_next_tokens_on_a_vllm_server(hosted: FakeServer) -> None:
    hosted.responder = vllm_extras
    at = _page()
    assert not _problems(at)
    at.text_area(key="score-context").input("ab")
    at.text_area(key="score-completions").input("cd\nce")
    at.button(key="score-go").click().run()
    assert not _problems(at) and not at.warning, _texts(at)
    scores = _frame(at, "variant", "loglikelihood")
    assert list(scores["variant"]) == ["plain", "plain", "chat template", "chat template"]
    engine = OpenAICompatibleEngine(OpenAIEngineConfig(base_url=hosted.base_url, model="toy"))
    expected = [r.logprob for r in engine.loglikelihood([Request.loglikelihood("ab", c) for c in ("cd", "ce")])]
    assert list(scores["loglikelihood"][:2]) == pytest.approx(expected)
    assert any("2 tokens, sum" in e.label for e in at.expander)
    assert "<|user|>ab<|assistant|>" in _texts(at)  # the chat template's text, from /tokenize and /detokenize
    at.text_area(key=f"chat-{MODEL}-draft").input("Hello there")
    at.button(key="FormSubmitter:chat-form-Send").click().run()
    assert at.session_state[f"chat-{MODEL}"][-1] == {"role": "assistant", "content": "echo: Hello there"}
    at.text_area(key="next-prompt").input("The nurse said")
    at.number_input(key="next-k").set_value(3)
    at.button(key="next-go").click().run()
    ranked = _frame(at, "token", "probability")
    assert list(ranked["token"]) == ["he", "she", "they"] and ranked["probability"].is_monotonic_decreasing
    assert shared_slot().loaded() == MODEL and _no_slot_held()
    assert SECRET not in _texts(at)
    assert all(auth == f"Bearer {SECRET}" for *_, auth in hosted.requests if auth)


def test_an_api_without_logprobs_says_so_and_still_chats(hosted: FakeServer) -> None:
    hosted.vllm, hosted.responder = False, chat_only
    at = _page()
    at.text_area(key="score-context").input("ab")
    at.text_area(key="score-completions").input("cd")
    at.button(key="score-go").click().run()
    assert not at.exception
    assert f"Not available for {MODEL}" in _texts(at) and "cannot score" in _texts(at)
    at.text_area(key="next-prompt").input("The nurse said")
    at.button(key="next-go").click().run()
    assert "cannot give the next token's top k (HTTP 404)" in _texts(at)
    at.text_area(key=f"chat-{MODEL}-draft").input("Hello")
    at.button(key="FormSubmitter:chat-form-Send").click().run()
    assert at.session_state[f"chat-{MODEL}"][-1]["content"] == "echo: Hello"
    assert not at.exception and _no_slot_held() and SECRET not in _texts(at)


def test_only_an_engine_on_this_hosts_devices_takes_a_slot(built: Built, monkeypatch: pytest.MonkeyPatch) -> None:
    from themis_dagster.engines.vllm.server import VLLMServerManager

    settings = Settings.from_env()
    spec = load_registry(settings.models_file)[next(iter(load_registry(settings.models_file)))]
    assert needs_slot(spec, settings)  # the fake (as the in-process vLLM) engine loads here
    assert not needs_slot(spec, settings.model_copy(update={"engine": "openai"}))
    server = settings.model_copy(update={"engine": "vllm-server"})
    monkeypatch.setattr(VLLMServerManager, "running", lambda self, model_id: True)
    assert not needs_slot(spec, server)  # a running server: requests go over HTTP
    monkeypatch.setattr(VLLMServerManager, "running", lambda self, model_id: False)
    assert needs_slot(spec, server)  # starting one puts an engine on a device
    assert os.environ["THEMIS_ENGINE"] == "fake"
