"""Mitigation variants on the fake engine: validation, rewrites, fingerprints, the request cache."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml
from dagster import DagsterInstance, materialize

from tests.conftest import requires_mirror, write_overrides
from tests.mitigation_fixtures import (
    FAIR_TEXT,
    LOGIT_BIAS,
    SYSTEM_PROMPT,
    resources_with_variants,
    variant,
    write_models,
)
from themis_dagster.assets import evaluation_assets
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.engines.fingerprint import model_fingerprint
from themis_dagster.errors import ConfigError
from themis_dagster.exchange import GenerationParams, Request, Response
from themis_dagster.mitigations import MitigatedEngine, mitigated
from themis_dagster.mitigations.engine import BiasedParams
from themis_dagster.mitigations.requests import filtered_reply, with_instruction, with_system_prompt, word_token_ids
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.registry.mitigation import LogitBias, ReplyFilter, SystemPrompt, stage_of
from themis_dagster.registry.models import DEFAULT_MODEL_ID, load_models, parse_models
from themis_dagster.registry.weights import ResolvedWeights

BASE = {"id": "base", "source": {"kind": "local", "path": "/m"}}


def _parse(*variants: dict[str, object]) -> dict[str, object]:
    return parse_models({"models": [BASE, *variants]})  # type: ignore[return-value]


def test_a_variant_inherits_its_parents_settings() -> None:
    models = _parse({"id": "base-fair", "parent": "base", "mitigation": {"kind": "system_prompt", "text": "Be fair."}})
    fair = models["base-fair"]
    assert fair.source == models["base"].source and fair.parent == "base"  # type: ignore[attr-defined]
    assert stage_of(fair.mitigation) == "pre-processing"  # type: ignore[attr-defined,arg-type]


SRC = BASE["source"]
SAY = {"kind": "system_prompt", "text": "x"}


def _v(mitigation: dict[str, object], **fields: object) -> dict[str, object]:
    return {"id": "v", "parent": "base", "mitigation": mitigation} | fields


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"id": "v", "source": SRC, "mitigation": SAY}, "parent"),
        (_v(SAY, parent="nobody", source=SRC), "parent"),
        (_v({"kind": "system_prompt", "text": ""}), "mitigation.system_prompt.text"),
        (_v({"kind": "shout"}), "mitigation"),
        (_v({"kind": "logit_bias", "words": {"he": -500}}), "mitigation.logit_bias.words"),
        (_v({"kind": "logit_bias"}), "mitigation.logit_bias"),
        (_v({"kind": "instruction", "template": "no placeholder"}), "mitigation.instruction.template"),
        (_v({"kind": "reply_filter", "pattern": "(unclosed"}), "mitigation.reply_filter.pattern"),
        (_v(SAY, id="v|x"), "models.1.id"),
        (_v(SAY, dtype="float32", source=SRC), "differs from its parent 'base' in dtype"),
    ],
)
def test_bad_variants_fail_naming_the_field(entry: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=r"parent|mitigation|id|differs") as raised:
        _parse(entry)
    assert field in str(raised.value), str(raised.value)


def test_the_commented_example_variants_in_models_yaml_are_valid(tmp_path: Path) -> None:
    text = (Path(__file__).parents[2] / "data" / "models.yaml").read_text()
    uncommented = "\n".join(line[1:] if line.startswith("#  ") else line for line in text.splitlines())
    models = parse_models(yaml.safe_load(uncommented))
    kinds = {spec.mitigation.kind for spec in models.values() if spec.mitigation is not None}
    assert kinds == {"system_prompt", "logit_bias"}


def test_system_prompt_reaches_every_kind_of_request() -> None:
    prompt = SystemPrompt(text="Be fair.")
    chat = with_system_prompt(Request.conversation([{"role": "user", "content": "Hi"}]), prompt)
    assert chat.messages == [{"role": "system", "content": "Be fair."}, {"role": "user", "content": "Hi"}]
    joined = with_system_prompt(Request.conversation([{"role": "system", "content": "Rules."}]), prompt)
    assert joined.messages == [{"role": "system", "content": "Be fair.\n\nRules."}]
    assert with_system_prompt(Request.completion("Q:"), prompt).prompt == "Be fair.\n\nQ:"
    scored = with_system_prompt(Request.loglikelihood("", "He cried."), prompt)
    assert scored.pair == ("Be fair.\n\n", "He cried.")  # the sentence is now scored given the system prompt


def test_instruction_wraps_the_last_user_message_and_leaves_scores_alone() -> None:
    from themis_dagster.registry.mitigation import InstructionTemplate

    template = InstructionTemplate(template="Be fair.\n{text}\nAnswer:")
    chat = with_instruction(
        Request.conversation(
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
        ),
        template,
    )
    assert [m["content"] for m in chat.messages or []] == ["a", "b", "Be fair.\nc\nAnswer:"]
    assert with_instruction(Request.loglikelihood("x", "y"), template).pair == ("x", "y")


def test_reply_filter_rewrites_text_only() -> None:
    rule = ReplyFilter(pattern=r"\bhe\b", replacement="they")
    assert filtered_reply(Response("r", "i", text="He said he would."), rule).text == "they said they would."
    scored = Response("r", "i", logprob=-1.0)
    assert filtered_reply(scored, rule) == scored


def test_word_token_ids_take_each_forms_first_token() -> None:
    vocabulary = {"he": [1], " he": [2], "He": [3], " He": [4, 9]}
    assert word_token_ids(lambda text: vocabulary[text], "he") == {1, 2, 3, 4}


class _Tokenizer:
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [sum(map(ord, text))]


def test_logit_bias_is_sent_as_sampling_params_and_not_to_loglikelihoods() -> None:
    seen: list[GenerationParams] = []

    class Recording(FakeEngine):
        tokenizer = _Tokenizer()

        def generate(self, requests, params):  # type: ignore[no-untyped-def]
            seen.append(params)
            return super().generate(requests, params)

    inner = Recording()
    engine = MitigatedEngine(inner, LogitBias(words={"he": -100.0}, token_ids={7: 5.0}))
    engine.generate([Request.completion("x", "r")], GenerationParams())
    assert isinstance(seen[0], BiasedParams)
    assert seen[0].logit_bias == {104 + 101: -100.0, 32 + 205: -100.0, 72 + 101: -100.0, 32 + 173: -100.0, 7: 5.0}
    request = Request.loglikelihood("a", "b", "r")
    assert engine.loglikelihood([request]) == inner.loglikelihood([request])
    assert engine.info.settings["mitigation"]["stage"] == "in-processing"
    with pytest.raises(ValueError, match=r"mitigation\.words needs a local tokenizer"):
        MitigatedEngine(FakeEngine(), LogitBias(words={"he": -1.0})).generate(
            [Request.completion("x")], GenerationParams()
        )


def test_no_mitigation_is_the_engine_itself() -> None:
    engine = FakeEngine()
    assert mitigated(engine, None) is engine


def test_the_mitigation_is_part_of_the_model_fingerprint(tmp_path: Path) -> None:
    models = load_models(write_models(tmp_path))
    weights = ResolvedWeights(path="/m", weights_sha256="w" * 64, revision="r")
    identity = {"engine": "VLLMResource"}
    prints = {model: model_fingerprint(spec, weights, identity) for model, spec in models.items()}
    assert len(set(prints.values())) == len(prints), "every variant answers differently from its parent"
    parent = models[DEFAULT_MODEL_ID]
    # lineage alone changes no answer: the unmitigated model keeps the fingerprint it had before variants
    assert (
        model_fingerprint(parent.model_copy(update={"parent": "older"}), weights, identity) == prints[DEFAULT_MODEL_ID]
    )


@requires_mirror
def test_variants_never_reuse_their_parents_answers(tmp_path: Path) -> None:
    """Parent then variants on one warehouse: each variant's requests are sent, not read from the cache."""
    warehouse = tmp_path / "w.duckdb"
    tasks = {"crows_pairs": {"limit": 6}, "bbq_generate": {"limit": 2}}
    overrides = write_overrides(tmp_path / "overrides.yaml", tasks)
    resources = resources_with_variants(warehouse, overrides)
    runs = {
        "crows_pairs": [DEFAULT_MODEL_ID, variant(SYSTEM_PROMPT)],
        "bbq_generate": [DEFAULT_MODEL_ID, variant(SYSTEM_PROMPT)],
    }
    models = runs["crows_pairs"]
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, models)
        for task, task_models in runs.items():
            for model in task_models:
                result = materialize(evaluation_assets, partition_key=evaluation_key(model, task),
                                     resources=resources, instance=instance)  # fmt: skip
                assert result.success
                event = instance.get_latest_materialization_event(evaluation_assets[2].key)
                assert event is not None and event.asset_materialization is not None
                metadata = {k: v.value for k, v in event.asset_materialization.metadata.items()}
                if model != DEFAULT_MODEL_ID:
                    assert metadata["answers_reused"] == 0, (model, task)
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        prompts = dict(conn.execute(
            "SELECT model, min(prompt_text) FROM responses WHERE task = 'bbq_generate' GROUP BY model"
        ).fetchall())  # fmt: skip
        scores = dict(conn.execute(
            "SELECT model, list(logprob ORDER BY request_id) FROM responses WHERE task = 'crows_pairs' GROUP BY model"
        ).fetchall())  # fmt: skip
        records = dict(conn.execute(
            "SELECT model, [config->>'$.model.mitigation.kind', config->>'$.engine.settings.mitigation.stage'] "
            "FROM evaluation_runs WHERE task = 'crows_pairs'"
        ).fetchall())  # fmt: skip
    assert FAIR_TEXT in prompts[variant(SYSTEM_PROMPT)] and FAIR_TEXT not in prompts[DEFAULT_MODEL_ID]
    assert scores[variant(SYSTEM_PROMPT)] != scores[DEFAULT_MODEL_ID]  # the context changed
    assert records[variant(SYSTEM_PROMPT)] == ["system_prompt", "pre-processing"]  # the spec and the engine record
    assert records[DEFAULT_MODEL_ID] == [None, None]
    # the logit bias and the instruction template run on the real engine: tests/mitigations/test_mitigation_engine.py


@requires_mirror
def test_a_variant_on_iat_weat_embeds_as_its_parent(tmp_path: Path) -> None:
    """A mitigation changes no word vector: the variant's embeddings are its parent's, none fails."""
    warehouse = tmp_path / "w.duckdb"
    fast = {"datasets": ["career"], "bootstrap_resamples": 200, "permutation_resamples": 200}
    resources = resources_with_variants(warehouse, write_overrides(tmp_path / "o.yaml", {"iat_weat": fast}))
    models = [DEFAULT_MODEL_ID, variant(SYSTEM_PROMPT), variant(LOGIT_BIAS)]
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, models)
        for model in models:
            result = materialize(evaluation_assets, partition_key=evaluation_key(model, "iat_weat"),
                                 resources=resources, instance=instance)  # fmt: skip
            assert result.success, model
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        errors = conn.execute("SELECT count(*) FROM responses WHERE error IS NOT NULL").fetchone()
        vectors = dict(conn.execute(
            "SELECT model, list(text ORDER BY request_id) FROM responses WHERE task = 'iat_weat' GROUP BY model"
        ).fetchall())  # fmt: skip
    assert errors == (0,) and len(vectors) == len(models) and vectors[DEFAULT_MODEL_ID]
    assert all(vectors[model] == vectors[DEFAULT_MODEL_ID] for model in models)


def test_the_openai_compatible_engine_sends_the_logit_bias() -> None:
    from themis_dagster.engines.openai.config import OpenAIEngineConfig
    from themis_dagster.engines.openai.engine import OpenAICompatibleEngine

    engine = object.__new__(OpenAICompatibleEngine)  # no server: only the payload is built
    engine.config = OpenAIEngineConfig(base_url="http://127.0.0.1:9/v1", model="toy")
    biased = BiasedParams(**GenerationParams().model_dump(), logit_bias={42: -100.0})
    assert engine._sampling(biased)["logit_bias"] == {"42": -100.0}  # the API's keys are token ids as strings
    assert "logit_bias" not in engine._sampling(GenerationParams())
