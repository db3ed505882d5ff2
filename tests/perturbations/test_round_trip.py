"""A swap one way followed by the swap the other way gives the text back, on every list.

Each pair of every list is put into sentences in every case shape the swap keeps (lower,
Capitalised, UPPER, Title-Cased), with a possessive and a contraction after it; the two-way swap
applied twice, and each one-way swap followed by the other, must return each sentence unchanged.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import MIRROR
from themis_dagster.perturbations import Mirror, build, builtin_perturbations
from themis_dagster.perturbations.pairs import PairList
from themis_dagster.perturbations.sources import declared_lists, load_list, read_user_pairs
from themis_dagster.perturbations.swap import BOTH, Swapper, with_shape

MIRRORED = Mirror(MIRROR, Path("/nonexistent-cache"), allow_download=False)
SHAPES = ("lower", "capitalized", "upper", "title")
FRAMES = ("Yesterday {w} arrived.", "{w}'s friend waved", "so {w}'ll come: {w}, {w}!", "({w})")


def sentences(word: str) -> list[str]:
    """The word in every case shape a swap keeps: Capitalised for a single word, Title-Cased for a phrase."""
    shapes = [shape for shape in SHAPES if shape != ("title" if word.isalpha() else "capitalized")]
    return [frame.format(w=with_shape(word, shape)) for shape in shapes for frame in FRAMES]


def _all_lists() -> list[PairList]:
    lists = [load_list(name, MIRRORED) for name in declared_lists().lists]
    descriptor_swaps = [build(d, MIRRORED) for d in builtin_perturbations().values() if d.kind == "descriptors"]
    return lists + [p.pairs for p in descriptor_swaps if p.pairs is not None]


LISTS = _all_lists()


@pytest.mark.parametrize("pairs", LISTS, ids=[pairs.name for pairs in LISTS])
def test_every_pair_comes_back_both_ways(pairs: PairList) -> None:
    a_class, b_class = pairs.classes
    two_way, to_b, to_a = Swapper(pairs, BOTH), Swapper(pairs, b_class), Swapper(pairs, a_class)
    failures = []
    for a, b in pairs.pairs:
        for text in sentences(a):
            there = to_b.apply(text)
            if there.replaced == 0 or to_a.apply(there.text).text != text:
                failures.append((text, there.text, to_a.apply(there.text).text))
            if two_way.apply(two_way.apply(text).text).text != text:
                failures.append((text, "two-way", two_way.apply(two_way.apply(text).text).text))
        for text in sentences(b):
            there = to_a.apply(text)
            if there.replaced == 0 or to_b.apply(there.text).text != text:
                failures.append((text, there.text, to_b.apply(there.text).text))
    assert failures == []
    assert len(pairs.pairs) >= 1


def test_the_lists_hold_what_their_files_give() -> None:
    sizes = {pairs.name: len(pairs.pairs) for pairs in LISTS}
    assert sizes["iat_gender_names"] == 9  # career (5) and power (4) rows
    assert sizes["iat_arab_muslim_names"] == 10
    assert sizes["iat_black_surnames"] == sizes["iat_asian_surnames"] == sizes["iat_hispanic_surnames"] == 4
    gendered = next(pairs for pairs in LISTS if pairs.name == "gendered_words")
    assert gendered.pronouns and gendered.classes == ("male", "female")
    assert ("actor", "actress") in gendered.pairs and ("gentleman", "lady") in gendered.pairs
    # lines left out of the bijection are kept with their reasons, never silently lost
    reasons = {(d.a, d.b): d.reason for d in gendered.dropped}
    assert reasons[("lord", "lady")] == "'lady' is already paired with 'gentleman' (extra_gendered_words.txt:48)"
    assert reasons[("tailors", "seamstress'")] == "not a word"
    words = [word.lower() for pair in gendered.pairs for word in pair]
    assert len(words) == len(set(words))  # a bijection


PRONOUN_SENTENCES = [
    "He said his dog likes him.",
    "I told him the truth about his own car.",
    "The book is his.",
    "Is that his? It is his, and he knows it himself.",
    "She said her dog likes her.",
    "I told her the truth about her own car.",
    "The book is hers.",
    "Ask her. Then ask her to come with her sister.",
    "HE and SHE, His and Hers.",
]


@pytest.mark.parametrize("text", PRONOUN_SENTENCES)
def test_pronouns_invert_by_their_role(text: str) -> None:
    gendered = load_list("gendered_words", MIRRORED)
    two_way = Swapper(gendered, BOTH)
    assert two_way.apply(two_way.apply(text).text).text == text


def test_his_and_him_both_become_her_and_come_back_apart() -> None:
    """The two-way swap's one ambiguity, resolved by the next word: "his" -> "her" and "him" -> "her"."""
    gendered = load_list("gendered_words", MIRRORED)
    to_female, to_male = Swapper(gendered, "female"), Swapper(gendered, "male")
    assert to_female.apply("his book").text == "her book"
    assert to_female.apply("give him the book").text == "give her the book"
    assert to_male.apply("her book").text == "his book"
    assert to_male.apply("give her the book").text == "give him the book"
    assert to_female.apply("The book is his.").text == "The book is hers."
    assert to_male.apply("The book is hers.").text == "The book is his."
    # where English itself is ambiguous the rule reads a determiner (docs/counterfactuals.md)
    assert to_male.apply(to_female.apply("gave him flowers").text).text == "gave his flowers"


def test_one_pass_never_swaps_back() -> None:
    """HELM's word-by-word substitution turns "he" into "she" and back; one pass swaps each word once."""
    gendered = load_list("gendered_words", MIRRORED)
    swapped = Swapper(gendered, BOTH).apply("He and she met the king and the queen; Mr. Smith's wife.")
    assert swapped.text == "She and he met the queen and the king; Mrs. Smith's husband."
    assert swapped.replaced == 6


def test_a_users_csv_comes_back_too(tmp_path: Path) -> None:
    path = tmp_path / "pairs.csv"
    path.write_text("group_a,group_b,group_a,group_b\nnurse,engineer,nurses,engineers\nSeattle,Atlanta,,\n")
    with pytest.raises(Exception, match="column 3"):
        read_user_pairs(path)
    path.write_text("group_a,group_b,group_a,group_b\nnurse,engineer,nurses,engineers\nSeattle Center,Atlanta,x,y\n")
    pairs = read_user_pairs(path, "jobs")
    assert pairs.classes == ("group_a", "group_b")
    assert pairs.pairs == (("nurse", "engineer"), ("nurses", "engineers"), ("Seattle Center", "Atlanta"), ("x", "y"))
    two_way = Swapper(pairs, BOTH)
    text = "The NURSE from Seattle Center met engineers."
    assert two_way.apply(text).text == "The ENGINEER from Atlanta met nurses."
    assert two_way.apply(two_way.apply(text).text).text == text
