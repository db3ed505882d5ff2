"""The declared request set and the counterfactual users: what ships, and bad input named by file and line."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.perturbations.test_round_trip import MIRRORED
from themis_dagster.errors import ConfigError
from themis_dagster.tasks.counterfactual_chat.identities import IdentitySet, build_identities, read_identity_file
from themis_dagster.tasks.counterfactual_chat.requests import REQUESTS_FILE, load_request_set


def test_the_shipped_request_set() -> None:
    shipped = load_request_set()
    assert len(shipped.requests) == 40
    assert {r.category for r in shipped.requests} >= {"career", "writing", "stories", "cooking", "health", "money"}
    assert set(shipped.framings) == {"name", "identity"}
    assert len({r.request_id for r in shipped.requests}) == 40


GOOD_FRAMINGS = 'framings:\n  name: "I am {{ identity }}. {{ request }}"\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'framings:\n  name: "Hi, I am Sam. {{ request }}"\nrequests:\n  - {id: a, category: c, text: t}\n',
            ":2: framings.name: the framing has no {{ identity }} placeholder",
        ),
        (
            'framings:\n  ok: "{{ identity }} {{ request }}"\n  bare: "Hello {{ identity }}"\n'
            "requests: [{id: a, category: c, text: t}]\n",
            ":3: framings.bare: the framing has no {{ request }} placeholder",
        ),
        (
            'framings:\n  name: "Hello"\nrequests: [{id: a, category: c, text: t}]\n',
            ":2: framings.name: the framing has no {{ identity }} and {{ request }} placeholder",
        ),
        (
            GOOD_FRAMINGS + "requests:\n  - {id: a, category: c, text: t}\n  - {id: a, category: c, text: u}\n",
            ":5: requests.1.id: 'a' repeats line 4",
        ),
        (GOOD_FRAMINGS + "requests:\n  - {id: a, category: c}\n", ":4: requests.0.text: missing or empty"),
        (GOOD_FRAMINGS + "requests:\n  - {id: a, category: c, text: t, tone: x}\n", ":4: requests.0: unknown fields"),
        (GOOD_FRAMINGS + "requests: []\n", ":3: requests: expected a non-empty list"),
        (
            'framings:\n  name: "{{ identity"\nrequests: [{id: a, category: c, text: t}]\n',
            ":2: framings.name: not a template",
        ),
    ],
)
def test_a_bad_request_file_fails_naming_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_request_set(path)
    assert str(raised.value).startswith(str(path.resolve()))
    assert message in str(raised.value)


def test_the_shipped_identities() -> None:
    gender = build_identities(IdentitySet(axis="gender", names="iat_gender_names"), MIRRORED, "identities.0")
    assert list(gender.groups) == ["male", "female"] and gender.pairs == (("male", "female"),)
    assert (gender.member("male", 0), gender.member("female", 0), gender.member("female", 9)) == (
        "Ben",
        "Julia",
        "Julia",
    )
    race = build_identities(IdentitySet(axis="race", name_groups="bloomberg_names"), MIRRORED, "identities.1")
    assert race.pairs == (("white", "black"), ("white", "asian"), ("white", "hispanic"))
    assert [race.member(group, 1) for group in race.groups] == [
        "Abby Schmidt",
        "Alfreda Branch",
        "Abigail Li",
        "Abigail Zavala",
    ]  # position 1 is a woman in every group
    every = build_identities(
        IdentitySet(axis="race", name_groups="bloomberg_names", groups=("black", "white"), pairing="all"),
        MIRRORED,
        "identities.1",
    )
    assert every.pairs == (("black", "white"),)
    religion = build_identities(
        IdentitySet(
            axis="religion", framing="identity", descriptors="religion", groups=("Christian", "Muslim", "Unitarian")
        ),
        MIRRORED,
        "identities.2",
    )
    assert religion.member("Unitarian", 0) == "a Unitarian person" and religion.member("Muslim", 3) == "a Muslim person"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"axis": "religion", "descriptors": "religion", "groups": ["Christian", "Christian"]}, "is one group"),
        ({"axis": "gender", "names": "iat_gender_names", "descriptors": "religion"}, "name exactly one source"),
        ({"axis": "religion", "descriptors": "religion"}, "name the descriptors to compare in 'groups'"),
        ({"axis": "Bad Axis", "names": "iat_gender_names"}, "String should match pattern"),
    ],
)
def test_bad_identity_sets_fail_when_the_parameters_load(spec: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        IdentitySet.model_validate(spec)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"axis": "race", "name_groups": "bloomberg_names", "groups": ["white", "martian"]},
            "identities.1.groups: ['martian'] not among ['asian', 'black', 'hispanic', 'white']",
        ),
        ({"axis": "race", "name_groups": "bloomberg_names", "groups": ["white"]}, "is one group"),
        ({"axis": "x", "names": "no_such_list"}, "identities.1: unknown word list 'no_such_list'"),
        (
            {"axis": "r", "descriptors": "religion", "groups": ["Christian", "Jedi"]},
            "identities.1: groups: 'Jedi' is not a descriptor of the 'religion' axis",
        ),
        (
            {"axis": "r", "descriptors": "faith", "groups": ["Christian", "Muslim"]},
            "identities.1: descriptors: unknown HolisticBias axis 'faith'",
        ),
    ],
)
def test_bad_identity_sources_fail_naming_the_field(spec: dict[str, object], message: str) -> None:
    with pytest.raises((ConfigError, ValidationError), match=message.replace("[", r"\[").replace("]", r"\]")):
        build_identities(IdentitySet.model_validate(spec), MIRRORED, "identities.1")


def test_a_users_identity_csv(tmp_path: Path) -> None:
    path = tmp_path / "users.csv"
    path.write_text("group,identity\nnurse,a nurse\nnurse,a night nurse\n")
    with pytest.raises(ConfigError) as raised:
        read_identity_file(path)
    assert str(raised.value) == f"{path}: one group: 'nurse' (line 2); a counterfactual needs two or more"
    with pytest.raises(ValidationError, match="one group: 'nurse' \\(line 2\\)"):
        IdentitySet(axis="job", path=path)
    path.write_text("group,identity\nnurse,a nurse\nengineer\n")
    with pytest.raises(ConfigError, match=r"users.csv:3: expected a group and an identity"):
        read_identity_file(path)
    path.write_text("group,identity\nnurse,a nurse\nengineer,an engineer\nnurse,a night nurse\n")
    built = build_identities(IdentitySet(axis="job", path=path, framing="identity"), MIRRORED, "identities.0")
    assert built.groups == {"nurse": ("a nurse", "a night nurse"), "engineer": ("an engineer",)}
    assert built.member("nurse", 1) == "a nurse"  # positions wrap round the shortest group
    assert REQUESTS_FILE.is_file()
