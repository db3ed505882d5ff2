"""Columnar request fingerprints equal ``request_fingerprint`` of each request, so existing caches stay valid."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from themis_dagster.engines.fingerprint import cacheable, request_fingerprint
from themis_dagster.evaluation.request_keys import cacheable_rows, request_fingerprints
from themis_dagster.exchange import Request
from themis_dagster.warehouse.frames import from_frame, to_frame

MODEL = "0f" * 32
AWKWARD = ["", 'say "hi"', "a\\b", "\x7f", "é ü 🙂", "\n\t\x00"]
TEXT = st.one_of(st.none(), st.text(max_size=40), st.sampled_from(AWKWARD))
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8))
GEN_PARAMS = st.one_of(
    st.none(),
    st.just({}),
    st.fixed_dictionaries(
        {},
        optional={
            "max_tokens": st.integers(1, 8192),
            "temperature": st.sampled_from([0.0, 0.7, 1e-5]),
            "seed": st.one_of(st.none(), st.integers(0, 2**40)),
            "stop": st.lists(st.text(max_size=4), max_size=2),
        },
    ),
    st.dictionaries(st.text(max_size=6), SCALAR, max_size=3),  # not valid GenerationParams: fingerprinted as they are
)
MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["user", "system"]), "content": st.text(max_size=20)})
MESSAGES = st.one_of(st.none(), st.lists(MESSAGE, max_size=3))


@st.composite
def requests(draw: st.DrawFn) -> Request:
    kind = draw(st.sampled_from(["loglikelihood", "generate", "chat", "embedding"]))
    return Request(
        draw(st.text(max_size=5)),
        draw(st.text(max_size=5)),
        kind,
        context=draw(TEXT),
        continuation=draw(TEXT),
        prompt=draw(TEXT),
        messages=draw(MESSAGES),
        template=draw(TEXT),
        gen_params=draw(GEN_PARAMS),
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(requests(), min_size=1, max_size=20))
def test_columnar_fingerprints_equal_request_fingerprint(batch: list[Request]) -> None:
    frame = to_frame("prompts", batch, model="m", task="t")
    stored = from_frame("prompts", frame, Request)  # what the answering stage fingerprinted: the warehouse's rows
    assert request_fingerprints(frame, MODEL).to_list() == [request_fingerprint(MODEL, r) for r in stored]


def test_a_dict_with_non_string_keys_is_fingerprinted_as_decoded() -> None:
    request = Request("r", "i", "generate", prompt="p", gen_params={"logit_bias": {2: 1.0, 10: -1.0}})
    frame = to_frame("prompts", [request], model="m", task="t")
    (stored,) = from_frame("prompts", frame, Request)
    assert request_fingerprints(frame, MODEL).to_list() == [request_fingerprint(MODEL, stored)]


@pytest.mark.parametrize(
    "request_",
    [
        Request.loglikelihood("a", "b"),
        Request("r", "i", "generate", prompt="p"),
        Request("r", "i", "generate", prompt="p", gen_params={"temperature": 0.7, "seed": None}),
        Request("r", "i", "chat", messages=[{"role": "user", "content": "x"}], gen_params={"temperature": 0.7}),
        Request("r", "i", "generate", prompt="p", gen_params={"temperature": 0.0, "seed": None}),
        Request.embedding("text"),
    ],
)
def test_columnar_cacheable_equals_cacheable(request_: Request) -> None:
    frame = to_frame("prompts", [request_, Request.loglikelihood("c", "d")], model="m", task="t")
    stored = from_frame("prompts", frame, Request)
    assert cacheable_rows(frame).to_list() == [cacheable(r) for r in stored]


def test_empty_frame() -> None:
    frame = to_frame("prompts", [], model="m", task="t")
    assert request_fingerprints(frame, MODEL).to_list() == []
    assert cacheable_rows(frame).to_list() == []


def test_fingerprints_a_slice_at_a_time_equal_all_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    batch = [Request.loglikelihood("c", f"sentence {i}", f"r{i}") for i in range(10)]
    frame = to_frame("prompts", batch, model="m", task="t")
    whole = request_fingerprints(frame, MODEL).to_list()
    monkeypatch.setattr("themis_dagster.evaluation.request_keys.ROWS", 3)
    assert request_fingerprints(frame, MODEL).to_list() == whole == [request_fingerprint(MODEL, r) for r in batch]


# Fingerprints computed before request_fingerprint and its columnar twin shared one definition:
# the keys of every cached answer, which any change to what goes into the hash would lose.
PINNED = [
    (
        Request.loglikelihood("The nurse said", " she was tired"),
        "77cc9f1a4c80bf191505668bc3d78c2451c1adae6d46129e936efd390536f9eb",
    ),
    (
        Request(
            "r",
            "i",
            "generate",
            prompt='Café "quoted" \\ line\n',
            gen_params={"temperature": 0.0, "max_tokens": 8, "stop": ["\n"]},
        ),
        "6669dfef8977c2776000071dcac6346f41c42ea0a658d52adf816c80dc25fc6e",
    ),
    (
        Request(
            "r",
            "i",
            "chat",
            messages=[{"role": "user", "content": "Who is a doctor? 🙂"}],
            gen_params={"seed": 7, "temperature": 0.7},
        ),
        "f4de807b743a20593c8d06008f0d0c82c27d040b5a4da90015f388112dc08e7b",
    ),
]


def test_fingerprints_are_the_ones_existing_caches_hold() -> None:
    batch = [request for request, _ in PINNED]
    pinned = [fingerprint for _, fingerprint in PINNED]
    assert [request_fingerprint(MODEL, request) for request in batch] == pinned
    frame = to_frame("prompts", batch, model="m", task="t")
    assert request_fingerprints(frame, MODEL).to_list() == pinned
