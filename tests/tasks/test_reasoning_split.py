"""Reasoning split by vLLM's own parsers, and the fake engine's replies in every format through the graph.

Imports vLLM's reasoning parsers (no engine: about 20-40 s of import on this machine, once per
module). The fake engine splits with the same parser class and the same ``ReasoningSplitter`` as
the real engine (tests/engines/vllm/test_reasoning_engine.py runs that one).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml
from dagster import DagsterInstance, materialize

from tests.conftest import SETTINGS, make_resources, requires_mirror, write_overrides
from tests.reasoning_fixture import default_model_folder
from themis_dagster.assets import evaluation_assets
from themis_dagster.engines.base import Engine
from themis_dagster.engines.fake import FakeEngine, FakeTokenizer
from themis_dagster.engines.reasoning import ReasoningSplitter
from themis_dagster.errors import ConfigError
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.registry.models import DEFAULT_MODEL_ID, ReasoningSpec
from themis_dagster.registry.reasoning import vllm_reasoning_parsers
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources import FakeEngineResource, ThemisConfig
from themis_dagster.resources.engine import fake_reasoning

pytest.importorskip("vllm.reasoning")

SENTINEL = "ZEBRAFISH"  # planted in every reasoning: never in an answer, a judgment or a metric
THINKER = "fake-thinker"


def splitter(parser: str) -> ReasoningSplitter:
    return ReasoningSplitter.load("m", ReasoningSpec(parser=parser, budget_tokens=64), FakeTokenizer())


def test_the_parser_names_read_from_source_are_vllms_registry() -> None:
    from vllm.reasoning import ReasoningParserManager

    assert vllm_reasoning_parsers() == tuple(ReasoningParserManager.list_registered())


# Replies after a template that opened the think block (no <think> in the reply), as (reasoning, answer).
# None: no reasoning found; the ids tell whether the block ended (FakeTokenizer's words).
FORMATS: dict[str, tuple[str, dict[str, tuple[str | None, str]]]] = {
    "closed": (f"{SENTINEL} weighing both</think>A", {
        "qwen3": (f"{SENTINEL} weighing both", "A"), "deepseek_r1": (f"{SENTINEL} weighing both", "A")}),
    "unclosed": (f"{SENTINEL} weighing and weighing", {
        "qwen3": (f"{SENTINEL} weighing and weighing", ""), "deepseek_r1": (f"{SENTINEL} weighing and weighing", "")}),
    "empty": ("", {"qwen3": ("", ""), "deepseek_r1": ("", "")}),
    "opened_in_reply": (f"<think>{SENTINEL} hm</think>B", {
        "qwen3": (f"{SENTINEL} hm", "B"), "deepseek_r1": (f"{SENTINEL} hm", "B")}),
    # markers again inside the answer: qwen3 keeps the answer (and drops the stray closing marker);
    # deepseek_r1 restarts at the last <think> (vLLM's behaviour): its reasoning becomes "x" and no answer is left
    "nested_in_answer": (f"{SENTINEL} r</think>A, not <think>x</think>", {
        "qwen3": (f"{SENTINEL} r", "A, not <think>x"), "deepseek_r1": ("x", "")}),
    "refusal_then_answer": (f"{SENTINEL} I cannot help with stereotypes.</think>C", {
        "qwen3": (f"{SENTINEL} I cannot help with stereotypes.", "C"),
        "deepseek_r1": (f"{SENTINEL} I cannot help with stereotypes.", "C")}),
}  # fmt: skip


@pytest.mark.parametrize("parser", ["qwen3", "deepseek_r1"])
@pytest.mark.parametrize("name", list(FORMATS))
def test_each_reply_format_is_split_by_vllms_parser(parser: str, name: str) -> None:
    text, expected = FORMATS[name]
    split = splitter(parser).split(text, FakeTokenizer().encode(text))
    assert (split.reasoning, split.answer) == expected[parser]
    assert SENTINEL not in split.answer
    assert split.n_reasoning_tokens == (None if split.reasoning is None else len(split.reasoning.split()))


def test_a_tokenizer_without_the_markers_fails_naming_the_model() -> None:
    class Plain(FakeTokenizer):
        SPECIAL: tuple[str, ...] = ("<|im_start|>", "<|im_end|>")

    for parser in ("qwen3", "deepseek_r1"):
        with pytest.raises(ConfigError, match=r"model 'plain-model'.*(</?think>|think start/end)"):
            ReasoningSplitter.load("plain-model", ReasoningSpec(parser=parser, budget_tokens=8), Plain())


def test_a_parser_that_cannot_split_a_complete_reply_fails_naming_the_model() -> None:
    with pytest.raises(ConfigError, match=r"model 'oss'.*'openai_gptoss'.*vllm-server"):
        ReasoningSplitter.load("oss", ReasoningSpec(parser="openai_gptoss", budget_tokens=8), FakeTokenizer())


def test_thinking_switched_off_reads_the_whole_reply_as_the_answer() -> None:
    spec = ReasoningSpec(parser="qwen3", chat_template_kwargs={"enable_thinking": False}, budget_tokens=0)
    split = ReasoningSplitter.load("m", spec, FakeTokenizer()).split("plain answer", [7, 8])
    assert (split.reasoning, split.answer, split.n_reasoning_tokens) == (None, "plain answer", None)


# -- through the graph, with the fake engine ------------------------------------------------------

REPLIES = [  # (reply, finish_reason) cycled over the requests in the order the engine gets them
    (f"{SENTINEL} weighing both</think>A", "stop"),
    (f"{SENTINEL} weighing and weighing", "length"),  # reasoning unfinished within the budget
    ("", "stop"),  # closed its turn in the opened block
    (f"{SENTINEL} r</think>B, not <think>x</think>", "stop"),
    (f"{SENTINEL} I cannot help with stereotypes.</think>C", "stop"),
    (f"{SENTINEL} ok</think>The answer is", "length"),  # the answer hit its cap
]


class ScriptedEngineResource(FakeEngineResource):
    """The fake engine replying ``REPLIES`` in turn; records which prompt got which reply."""

    def _build(self, spec: Any, weights: ResolvedWeights) -> Engine:
        turn = itertools.cycle(REPLIES)
        given: dict[str, tuple[str, str]] = {}

        def reply(prompt: str) -> str:
            given[prompt] = next(turn)
            return given[prompt][0]

        return FakeEngine(weights.path, reply=reply, finish=lambda prompt: given[prompt][1],
                          reasoning=fake_reasoning(spec))  # fmt: skip


def write_thinker(folder: Path, max_model_len: int = 4096, budget_tokens: int = 512) -> Path:
    """A models file: the default model plus a fake thinking model (a local folder the fake engine never reads)."""
    weights = folder / "thinker"
    weights.mkdir(parents=True, exist_ok=True)
    (weights / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (weights / "model.safetensors").write_bytes(b"fake")
    data = yaml.safe_load(SETTINGS.models_file.read_text())
    data["models"] = [m for m in data["models"] if m["id"] == DEFAULT_MODEL_ID] + [
        {"id": THINKER, "source": {"kind": "local", "path": str(weights)}, "max_model_len": max_model_len,
         "reasoning": {"parser": "qwen3", "budget_tokens": budget_tokens}}
    ]  # fmt: skip
    path = folder / "models.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str, str], Path]]:
    folder = tmp_path_factory.mktemp("reasoning")
    warehouse = folder / "w.duckdb"
    sizes: dict[str, dict[str, object]] = {"bbq_generate": {"limit": 12}, "iat": {"iterations": 1}}
    sizes |= {task: {"limit": 6} for task in FAMILIES}
    overrides = write_overrides(folder / "overrides.yaml", sizes)
    resources = make_resources(warehouse, overrides)
    themis = resources["themis"]
    assert isinstance(themis, ThemisConfig)
    resources["themis"] = ThemisConfig(**themis.model_dump() | {"models_file": str(write_thinker(folder))})
    resources["engine"] = ScriptedEngineResource()
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [DEFAULT_MODEL_ID, THINKER])

        def run(model: str, task: str) -> Path:
            result = materialize(evaluation_assets, partition_key=evaluation_key(model, task), resources=resources,
                                 instance=instance)  # fmt: skip
            assert result.success
            return warehouse

        yield run


def _rows(warehouse: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        return conn.execute(sql, list(args)).fetchall()


@requires_mirror
@pytest.mark.parametrize("task", ["bbq_generate", "iat"])
def test_replies_in_every_format_are_split_guarded_and_counted(graph: Callable[[str, str], Path], task: str) -> None:
    warehouse = graph(THINKER, task)
    responses = _rows(warehouse, "SELECT request_id, text, reasoning, n_reasoning_tokens, finish_reason, error "
                                 "FROM responses WHERE model = ? AND task = ?", THINKER, task)  # fmt: skip
    assert len(responses) >= len(REPLIES)
    assert all(error is None for *_, error in responses)
    assert all(SENTINEL not in (text or "") for _, text, *_ in responses)
    assert any(SENTINEL in (reasoning or "") for _, _, reasoning, *_ in responses)
    assert {(text, finish) for _, text, _, _, finish, _ in responses} >= {
        ("A", "stop"), ("", "length"), ("", "stop"), ("B, not <think>x", "stop"), ("C", "stop"),
        ("The answer is", "length"),
    }  # fmt: skip
    outcomes = dict(_rows(warehouse, "SELECT outcome, count(*) FROM judgments WHERE model = ? AND task = ? "
                                     "GROUP BY outcome", THINKER, task))  # fmt: skip
    unfinished = sum(1 for _, text, reasoning, _, _, _ in responses if reasoning is not None and not text)
    truncated = sum(1 for _, text, _, _, finish, _ in responses if text and finish == "length")
    assert outcomes.get("reasoning_unfinished") == unfinished > 0
    assert outcomes.get("truncated") == truncated > 0
    assert "engine_error" not in outcomes and "missing_response" not in outcomes
    # nothing of any reasoning in a judgment (the replies a task parses are answers only)
    details = _rows(warehouse, "SELECT outcome, detail::VARCHAR FROM judgments WHERE model = ? AND task = ?",
                    THINKER, task)  # fmt: skip
    assert all(SENTINEL not in (detail or "") and SENTINEL not in outcome for outcome, detail in details)
    metrics = dict(_rows(warehouse, "SELECT metric, value FROM metric_values WHERE model = ? AND task = ? "
                                    "AND subset IS NULL", THINKER, task))  # fmt: skip
    total = len(details)
    assert metrics["reasoning_unfinished_rate"] == pytest.approx(unfinished / total)
    assert metrics["truncated_rate"] == pytest.approx(truncated / total)
    per_subset = _rows(warehouse, "SELECT count(*) FROM metric_values WHERE model = ? AND task = ? "
                                  "AND metric = 'truncated_rate' AND subset IS NOT NULL", THINKER, task)  # fmt: skip
    assert per_subset[0][0] >= 1


# one chat task of every other family: each names an engine failure its own way; the guard's outcome replaces it
FAMILIES = ["esbbq_generate", "crows_pairs_mc", "winobias_chat", "gb_direct", "langbite_example"]


@requires_mirror
@pytest.mark.parametrize("task", FAMILIES)
def test_every_chat_family_records_the_guards_outcomes(graph: Callable[[str, str], Path], task: str) -> None:
    warehouse = graph(THINKER, task)
    outcomes = {row[0] for row in _rows(warehouse, "SELECT DISTINCT outcome FROM judgments WHERE model = ? "
                                                   "AND task = ?", THINKER, task)}  # fmt: skip
    # LangBiTe judges a group of replies at once: a group with an unfinished one is reasoning_unfinished
    assert {"reasoning_unfinished", "truncated"} <= outcomes or (task == "langbite_example" and
                                                                 "reasoning_unfinished" in outcomes)  # fmt: skip
    assert not outcomes & {"engine_error", "missing_response", "error_engine_error", "error_missing_response"}
    details = _rows(warehouse, "SELECT detail::VARCHAR FROM judgments WHERE model = ? AND task = ?", THINKER, task)
    assert all(SENTINEL not in (detail or "") for (detail,) in details)
    metrics = {row[0] for row in _rows(warehouse, "SELECT metric FROM metric_values WHERE model = ? AND task = ? "
                                                  "AND subset IS NULL", THINKER, task)}  # fmt: skip
    assert {"reasoning_unfinished_rate", "truncated_rate"} <= metrics


@requires_mirror
def test_bbq_reads_the_answer_after_a_refusal_in_the_reasoning(graph: Callable[[str, str], Path]) -> None:
    warehouse = graph(THINKER, "bbq_generate")
    rows = _rows(warehouse, "SELECT j.outcome, j.parsed, j.detail->>'$.reply', j.detail->>'$.prediction' "
                            "FROM judgments j JOIN responses r USING (model, task, item_id) "
                            "WHERE model = ? AND task = 'bbq_generate' AND r.text IN ('A', 'C')", THINKER)  # fmt: skip
    assert rows and all(parsed for _, parsed, _, _ in rows)
    assert {(reply, prediction) for _, _, reply, prediction in rows} == {("A", "0"), ("C", "2")}


@requires_mirror
def test_the_default_model_is_judged_as_before(graph: Callable[[str, str], Path]) -> None:
    """No reasoning declared: its replies (cut at the cap or not) reach the task's parser unchanged, no new metrics."""
    warehouse = graph(DEFAULT_MODEL_ID, "bbq_generate")
    responses = _rows(warehouse, "SELECT text, reasoning, finish_reason FROM responses WHERE model = ? "
                                 "AND task = 'bbq_generate'", DEFAULT_MODEL_ID)  # fmt: skip
    assert all(reasoning is None for _, reasoning, _ in responses)
    assert any(finish == "length" for *_, finish in responses)  # truncated, yet parsed as it always was
    assert any(SENTINEL in (text or "") for text, *_ in responses)  # no parser splits its replies
    outcomes = {row[0] for row in _rows(warehouse, "SELECT DISTINCT outcome FROM judgments WHERE model = ? "
                                                   "AND task = 'bbq_generate'", DEFAULT_MODEL_ID)}  # fmt: skip
    assert not outcomes & {"reasoning_unfinished", "truncated"}
    metrics = {row[0] for row in _rows(warehouse, "SELECT DISTINCT metric FROM metric_values WHERE model = ? "
                                                  "AND task = 'bbq_generate'", DEFAULT_MODEL_ID)}  # fmt: skip
    assert not metrics & {"reasoning_unfinished_rate", "truncated_rate"}


@pytest.mark.parametrize("parser", ["qwen3", "deepseek_r1"])
def test_the_default_models_tokenizer_has_no_think_markers(parser: str) -> None:
    """The check the engine runs once its tokenizer is loaded, before any request (engines/vllm/engine.py)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(default_model_folder())
    with pytest.raises(ConfigError, match=f"model '{DEFAULT_MODEL_ID}'"):
        ReasoningSplitter.load(DEFAULT_MODEL_ID, ReasoningSpec(parser=parser, budget_tokens=8), tokenizer)


@requires_mirror
def test_a_budget_that_does_not_fit_fails_before_the_engine_starts(tmp_path: Path) -> None:
    overrides = write_overrides(tmp_path / "overrides.yaml", {"bbq_generate": {"limit": 1}})
    resources = make_resources(tmp_path / "w.duckdb", overrides)
    themis = resources["themis"]
    assert isinstance(themis, ThemisConfig)
    models = write_thinker(tmp_path, max_model_len=1024, budget_tokens=1000)  # bbq_generate answers in 32 tokens
    resources["themis"] = ThemisConfig(**themis.model_dump() | {"models_file": str(models)})
    resources["engine"] = ScriptedEngineResource()
    loads = ScriptedEngineResource.loads
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [THINKER])
        result = materialize(evaluation_assets, partition_key=evaluation_key(THINKER, "bbq_generate"),
                             resources=resources, instance=instance, raise_on_error=False)  # fmt: skip
    assert not result.success
    failure = next(event for event in result.all_events if event.is_step_failure)
    message = str(failure.step_failure_data.error)
    assert failure.step_key == "raw_responses"
    assert "reasoning.budget_tokens (1000)" in message and "max_tokens (32" in message and "(1024)" in message
    assert ScriptedEngineResource.loads == loads  # no engine was built
