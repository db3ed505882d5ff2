"""Perturbations by name: declared and checked before any engine starts; applied to a task's requests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.perturbations.test_round_trip import MIRRORED
from themis_dagster.errors import ConfigError
from themis_dagster.exchange import Request
from themis_dagster.perturbations import build, build_all, builtin_perturbations, parse_perturbations, perturb_requests
from themis_dagster.perturbations.frames import keyed_fingerprint, perturb_frame
from themis_dagster.warehouse.frames import to_frame

ORIGIN = "overrides.yaml: bbq_generate.perturbations"


def test_every_builtin_builds_from_the_mirror() -> None:
    built = build_all(list(builtin_perturbations().values()), MIRRORED)
    assert [p.name for p in built] == list(builtin_perturbations())
    assert len({p.key for p in built}) == len(built)  # each is its own key
    assert {p.name for p in built if p.swapper is None} == {"identity"}


def test_the_key_follows_the_list_and_direction(tmp_path: Path) -> None:
    path = tmp_path / "pairs.csv"
    path.write_text("a,b\nnurse,engineer\n")
    mine = {"name": "mine", "kind": "word_pairs", "path": str(path)}
    first = build(parse_perturbations([mine], ORIGIN)[0], MIRRORED)
    path.write_text("a,b\nnurse,doctor\n")
    second = build(parse_perturbations([mine], ORIGIN)[0], MIRRORED)
    one_way = build(parse_perturbations([{**mine, "to": "b"}], ORIGIN)[0], MIRRORED)
    assert len({first.key, second.key, one_way.key}) == 3


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (["gender_swap", "gendr_swap"], f"{ORIGIN}.1: unknown perturbation 'gendr_swap'; known: gender_swap, "),
        ("gender_swap", f"{ORIGIN}: expected a list of perturbation names or declarations"),
        (["gender_swap", "gender_swap"], f"{ORIGIN}.1: perturbation 'gender_swap' is named twice"),
        ([{"kind": "identity"}], f"{ORIGIN}.0: name: a declared perturbation needs a name"),
        ([{"name": "identity", "kind": "identity"}], f"{ORIGIN}.0: name: 'identity' is a built-in perturbation's name"),
        ([{"name": "x", "kind": "shuffle"}], f"{ORIGIN}.0: (root): Input tag 'shuffle' found using 'kind'"),
        ([{"name": "Bad Name", "kind": "identity"}], f"{ORIGIN}.0: identity.name: String should match pattern"),
    ],
)
def test_bad_declarations_fail_naming_the_entry(entries: object, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_perturbations(entries, ORIGIN)
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"name": "d", "kind": "descriptors", "axis": "races", "pairs": [["white", "Black"]]},
            f"{ORIGIN}: d: axis: unknown HolisticBias axis 'races'; known: ability, age,",
        ),
        (
            {"name": "d", "kind": "descriptors", "axis": "religion", "pairs": [["Muslim", "Hindu"], ["Jedi", "Sikh"]]},
            f"{ORIGIN}: d: pairs.1: 'Jedi' is not a descriptor of the 'religion' axis in descriptors_v1.1.json",
        ),
        (
            {
                "name": "d",
                "kind": "descriptors",
                "axis": "religion",
                "pairs": [["Hindu", "Muslim"], ["Sikh", "muslim"]],
            },
            f"{ORIGIN}: d: pairs.1: 'Muslim' is already paired in pairs.0",
        ),
        (
            {"name": "g", "kind": "list", "list": "gendered_words", "to": "femal"},
            f"{ORIGIN}: g: to: 'femal' is not a class of its list; use one of ['male', 'female', 'both']",
        ),
        (
            {"name": "g", "kind": "list", "list": "gender_words"},
            f"{ORIGIN}: g: unknown word list 'gender_words'; known: gendered_words, iat_arab_muslim_names,",
        ),
    ],
)
def test_bad_lists_fail_naming_the_field(entry: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        build(parse_perturbations([entry], ORIGIN)[0], MIRRORED, ORIGIN)
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("male,female\nactor,actress,actors\n", "pairs.csv:2: 3 columns; word pairs need an even number"),
        ("male,female\nactor,\n", "pairs.csv:2: column 2 (female) is empty"),
        ("male,female\n,actress\n", "pairs.csv:2: column 1 (male) is empty"),
        ("male,female\nactor,actress\n\nkings,kings\n", "pairs.csv:4: 'kings' is paired with itself"),
        ("male,female\nactor,actress\nactor,diva\n", "pairs.csv:3: 'actor' is already paired with 'actress' on line 2"),
        ("male,female\nact0r,actress\n", "pairs.csv:2: column 1: 'act0r' is not a word or phrase"),
        ("male\nactor,actress\n", "pairs.csv:1: the header needs two class names per column pair"),
        ("male,male\nactor,actress\n", "pairs.csv:1: the header names two different classes"),
        ("male,female\n", "pairs.csv: no word pairs after the header"),
        ("", "pairs.csv: empty"),
    ],
)
def test_a_bad_word_pair_csv_fails_naming_its_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "pairs.csv"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:  # when the overrides are read, before any list is built
        parse_perturbations([{"name": "mine", "kind": "word_pairs", "path": "pairs.csv"}], ORIGIN, tmp_path)
    assert message in str(raised.value)
    assert str(tmp_path) in str(raised.value)


def test_requests_are_rewritten_and_unchanged_items_counted() -> None:
    gender = build(builtin_perturbations()["gender_swap"], MIRRORED)
    requests = [
        Request.loglikelihood("The nurse said he", " was tired", "q1:a", "q1"),
        Request.loglikelihood("The nurse said he", " was late", "q1:b", "q1"),
        Request.conversation(
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Her car?"}], "q2:0", "q2"
        ),
        Request.completion("The weather is fine.", "q3:0", "q3"),
        Request.loglikelihood("Who is it?", " the man", "q4:a", "q4"),
    ]
    perturbed = perturb_requests(requests, gender)
    assert [r.context for r in perturbed.requests if r.context] == ["The nurse said she"] * 2 + ["Who is it?"]
    assert perturbed.requests[2].messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "His car?"},
    ]
    assert perturbed.requests[4].continuation == " the woman"  # options change with the text, as HELM's references
    assert [(r.request_id, r.item_id) for r in perturbed.requests] == [(r.request_id, r.item_id) for r in requests]
    assert perturbed.changed == {"q1", "q2", "q4"} and perturbed.unchanged == {"q3"}
    assert perturbed.summary() == {"items": 4, "items_changed": 3, "items_unchanged": 1, "words_replaced": 4}
    identity = perturb_requests(requests, build(builtin_perturbations()["identity"], MIRRORED))
    assert identity.requests == requests and identity.changed == frozenset()


def test_a_prompts_frame_is_rewritten_as_its_requests_are() -> None:
    """The prompts stage's frame: the same rewrite as ``perturb_requests``, messages as JSON text."""
    gender = build(builtin_perturbations()["gender_swap"], MIRRORED)
    requests = [
        Request.loglikelihood("The nurse said he", " was tired", "q1:a", "q1"),
        Request.conversation([{"role": "user", "content": "Her car?"}], "q2:0", "q2"),
        Request.completion("The weather is fine.", "q3:0", "q3"),
    ]
    frame = to_frame("prompts", requests, model="m", task="t")
    rewritten, counts = perturb_frame(frame, gender)
    expected = to_frame("prompts", perturb_requests(requests, gender).requests, model="m", task="t")
    assert rewritten.equals(expected)
    assert counts == {"items": 3, "items_changed": 2, "items_unchanged": 1, "requests_changed": 2}
    same, none = perturb_frame(frame, build(builtin_perturbations()["identity"], MIRRORED))
    assert same.equals(frame) and none["items_unchanged"] == 3


def test_a_variants_answers_are_keyed_apart() -> None:
    """Folded into the model fingerprint: no answer is shared with the original or another perturbation."""
    identity, swap = (build(builtin_perturbations()[name], MIRRORED) for name in ("identity", "gender_swap"))
    keys = {keyed_fingerprint("model-fp", identity.key), keyed_fingerprint("model-fp", swap.key), "model-fp"}
    assert len(keys) == 3
    assert keyed_fingerprint("model-fp", swap.key) == keyed_fingerprint("model-fp", swap.key)
