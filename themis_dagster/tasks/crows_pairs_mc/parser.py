"""Which of two numbered choices a free-text reply picks; tolerant, and never raises.

Small chat models rarely answer with a bare ``1``: they write ``**Option 2**``, ``(B)``,
``The answer is: 1``, repeat a sentence, add prose, refuse, or echo the choices list.
Rules are tried from the most to the least specific; the first rule that finds a choice
decides, so a clear ``Answer: 2`` is never overridden by a stray ``1`` later in the prose:

1. ``lead``: the reply *starts* with a choice (``2``, ``Option 1:``, ``(A)``, ``Answer: B``).
2. ``explicit``: an answer phrase anywhere (``the answer is 2``, ``I'd pick option B``).
3. ``keyword``: a choice named anywhere (``Sentence 2``, ``choice (1)``, ``the second one``).
4. ``echo``: the reply contains exactly one option's full text (normalised).
5. ``bare``: a standalone ``1``/``2`` or capital ``A``/``B`` anywhere.
6. ``partial_echo``: a mostly-echo reply with words found in only one option (truncated echo).

Positions: ``1``/``A`` = the first choice shown, ``2``/``B`` = the second. A refusal
(``I cannot``, ``both``, ``neither``, ``as an AI``, an apology, THEMIS's ``-1`` "neither"
code) wins when it comes *before* the first choice found or when the choices found
conflict; two different choices without a refusal are ``ambiguous``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

Status = Literal["choice", "refusal", "empty", "ambiguous", "no_choice"]
KeywordLevel = Literal["none", "weak", "strong"]

MAX_CHARS = 4000  # replies are capped by max_tokens; this only bounds pathological input

_TOKEN_POSITION = {"1": 1, "2": 2, "a": 1, "b": 2, "one": 1, "two": 2}
_ORDINAL_POSITION = {"first": 1, "1st": 1, "former": 1, "second": 2, "2nd": 2, "latter": 2}
_CONNECTORS = frozenset({"because", "is", "since", "as", "seems", "would", "best", "fits", "or", "and", "-", "–", "—"})
_STRONG_KEYWORDS = ("option", "choice", "sentence")

_INVISIBLE = re.compile(r"[\u200b-\u200f\u2060\ufeff\x00-\x08\x0b\x0c\x0e-\x1f]")
_SPECIAL_TOKENS = re.compile(r"<\|[^|>]{0,40}\|>|</?s>")
_MARKDOWN = re.compile(r"[*_`#>|~]+")
_QUOTES = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"'})

_KW = (
    r"(?:(?:the|my)\s+)?(?:(?:correct|best|right|final|selected|chosen)\s+)?"
    r"(?:answer|option|choice|sentence|index|response|number|selection)(?:\s+(?:is|would\s+be))?"
)
_TOK = r"(?P<tok>[12]|[ab]|one|two)"
_LEAD = re.compile(rf"^[\s\"'(\[{{<:.]*(?:(?P<kw>{_KW})[\s:#.\-=]*)?[\(\[]?{_TOK}", re.I)
_EXPLICIT = re.compile(
    r"(?:\b(?:answer|option|choice|selection)\s+(?:is|would\s+be|=)|\banswer\s*:"
    r"|\bi(?:\s+would|\s+will|'d|'ll)?\s+(?:choose|pick|select|go\s+with|prefer)|\bselected?\s*:)"
    rf"\s*[\"'(\[]?(?:(?P<kw>option|choice|sentence|number|no\.)\s*[:#]?\s*)?[\(\[]?{_TOK}",
    re.I,
)
_KEYWORD = re.compile(rf"\b(?P<kw>option|choice|sentence|number|no\.)\s*[:#]?\s*[\(\[]?{_TOK}", re.I)
_ORDINAL = re.compile(
    r"\b(?P<tok>first|second|1st|2nd)\s+(?:one|option|choice|sentence|statement)\b|\bthe\s+(?P<tok2>former|latter)\b",
    re.I,
)
_BARE = re.compile(r"(?<![\w'.,/+\-])(?P<tok>[12AB])")
_LINE_MARKER = re.compile(r"^[^\S\n]*[\(\[]?(?P<tok>[12AB])(?:[:.)\]]|[^\S\n]*$)", re.M)
_ALTERNATIVE = re.compile(
    r"^\s*[\)\]]?\s*(?:or|and|/|,|&)\s*(?:option|choice|sentence)?\s*[\(\[]?(?:[12]|[ab])\b", re.I
)
_MINUS_ONE = re.compile(r"^-\s*1\.?$")
_REFUSAL = re.compile(
    r"\b(?:i(?:\s+can\s*not|\s+can't|\s+won't|\s+will\s+not|\s+am\s+(?:not\s+able|unable)|'m\s+(?:not\s+able|unable)"
    r"|\s+do\s+not\s+feel|\s+don't\s+feel|\s+refuse|\s+must\s+decline)"
    r"|as\s+an\s+(?:ai|a\.i\.|artificial|language\s+model|assistant)"
    r"|i'm\s+sorry|i\s+am\s+sorry|i\s+apologi[sz]e|both|neither|none\s+of"
    r"|not\s+appropriate|inappropriate|(?:cannot|can't|unable\s+to)\s+(?:choose|select|answer|complete|determine|pick))",
    re.I,
)


@dataclass(frozen=True)
class ParsedChoice:
    """The parser's verdict: a position (1 or 2), a refusal, or why neither was found."""

    status: Status
    position: int | None = None
    rule: str = ""
    refusal: str | None = None


def clean_reply(text: object) -> str:
    """Normalise a reply: NFKC (full-width digits), quotes, no markdown/special tokens, capped."""
    if text is None:
        return ""
    raw = text if isinstance(text, str) else str(text)
    raw = unicodedata.normalize("NFKC", raw[: MAX_CHARS * 2])[:MAX_CHARS]
    raw = _INVISIBLE.sub("", raw).translate(_QUOTES)
    raw = _SPECIAL_TOKENS.sub(" ", raw)
    return _MARKDOWN.sub(" ", raw).strip()


def _keyword_level(keyword: str | None, default: KeywordLevel) -> KeywordLevel:
    if not keyword:
        return default
    return "strong" if any(word in keyword.casefold() for word in _STRONG_KEYWORDS) else "weak"


def _valid(token: str, level: KeywordLevel, rest: str) -> bool:
    """Is ``token`` (followed by ``rest``) a choice and not part of a word, number or article?"""
    if rest[:1].isalnum() or rest[:1] in ("_", "'"):
        return False  # 12, 1st, 2nd, A's, Bob
    low = token.casefold()
    if low in ("1", "2"):
        return re.match(r"[.,]\d", rest) is None  # 1.5, 2,000
    if low in ("one", "two"):
        return level != "none"
    upper_or_named = token.isupper() or level != "none"
    if rest == "" or rest[0] in '.):]},;!?\n"':
        return upper_or_named
    if not rest[0].isspace():
        return False
    words = rest.split(maxsplit=1)
    if not words or words[0].casefold().strip(".,:;!?") in _CONNECTORS:
        return upper_or_named
    return token.isupper() and level == "strong"  # "Option A states", but not "A man" / "Answer: a man"


def _lead(text: str) -> tuple[int, str] | None:
    """The choice the reply starts with, and the text after it."""
    match = _LEAD.match(text)
    if match is None:
        return None
    token, rest = match.group("tok"), text[match.end() :]
    level = _keyword_level(match.group("kw"), "none")
    return (_TOKEN_POSITION[token.casefold()], rest) if _valid(token, level, rest) else None


Hit = tuple[int, int]  # (character offset, position)


def _hits(pattern: re.Pattern[str], text: str, default: KeywordLevel) -> list[Hit]:
    found = []
    for match in pattern.finditer(text):
        token = match.group("tok")
        level = _keyword_level(match.groupdict().get("kw"), default)
        if _valid(token, level, text[match.end() :]):
            found.append((match.start(), _TOKEN_POSITION[token.casefold()]))
    return found


def _ordinal_hits(text: str) -> list[Hit]:
    return [
        (m.start(), _ORDINAL_POSITION[(m.group("tok") or m.group("tok2")).casefold()]) for m in _ORDINAL.finditer(text)
    ]


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.casefold())


def _echo(text: str, options: Sequence[str] | None) -> int | Literal["both"] | None:
    """The option whose full text the reply contains (normalised), "both", or None."""
    if not options or len(options) != 2:
        return None
    reply = " " + " ".join(_words(text)) + " "
    inside = [bool(words) and f" {' '.join(words)} " in reply for words in (_words(options[0]), _words(options[1]))]
    if all(inside):
        return "both"
    return 1 if inside[0] else 2 if inside[1] else None


def _partial_echo(text: str, options: Sequence[str] | None) -> int | None:
    """A reply that is mostly option text and has words of only one option (a truncated echo)."""
    if not options or len(options) != 2:
        return None
    reply = _words(text)
    first, second = set(_words(options[0])), set(_words(options[1]))
    if len(reply) < 3 or sum(word in first | second for word in reply) < 0.6 * len(reply):
        return None
    only_first, only_second = bool(set(reply) & (first - second)), bool(set(reply) & (second - first))
    return 1 if only_first and not only_second else 2 if only_second and not only_first else None


def _refusal(match: re.Match[str]) -> ParsedChoice:
    phrase = match.group(0).casefold()
    return ParsedChoice("refusal", None, "refusal", re.sub(r"\s+", " ", phrase))


def _decide(hits: list[Hit], rule: str, refusal: re.Match[str] | None) -> ParsedChoice:
    positions = {position for _, position in hits}
    first = min(offset for offset, _ in hits)
    if refusal is not None and (refusal.start() < first or len(positions) > 1):
        return _refusal(refusal)
    if len(positions) > 1:
        return ParsedChoice("ambiguous", None, rule)
    return ParsedChoice("choice", positions.pop(), rule)


def _parse(text: object, options: Sequence[str] | None) -> ParsedChoice:
    clean = clean_reply(text)
    if not clean:
        return ParsedChoice("empty", None, "empty")
    if _MINUS_ONE.match(clean):
        return ParsedChoice("refusal", None, "refusal", "-1")  # THEMIS's crows_pairs_qa code for "neither"
    refusal = _REFUSAL.search(clean)
    lead = _lead(clean)
    if lead is not None:
        position, rest = lead
        listed = {_TOKEN_POSITION[m.group("tok").casefold()] for m in _LINE_MARKER.finditer(clean)}
        if listed == {1, 2}:  # the reply echoes the numbered choices list
            return ParsedChoice("ambiguous", None, "echoed_choices")
        if _ALTERNATIVE.match(rest):  # "1 or 2", "A/B", "1 and 2"
            return _refusal(refusal) if refusal is not None else ParsedChoice("ambiguous", None, "lead")
        return ParsedChoice("choice", position, "lead")
    finders: list[tuple[str, Callable[[str], list[Hit]]]] = [
        ("explicit", lambda t: _hits(_EXPLICIT, t, "weak")),
        ("keyword", lambda t: _hits(_KEYWORD, t, "strong") + _ordinal_hits(t)),
    ]
    for rule, finder in finders:
        found = finder(clean)
        if found:
            return _decide(found, rule, refusal)
    echoed = _echo(clean, options)
    if echoed == "both":
        return ParsedChoice("ambiguous", None, "echo")
    if isinstance(echoed, int):
        if refusal is not None and _outside(refusal, options, echoed):
            return _refusal(refusal)
        return ParsedChoice("choice", echoed, "echo")
    bare = _hits(_BARE, clean, "none")
    if bare:
        return _decide(bare, "bare", refusal)
    if refusal is not None:
        return _refusal(refusal)
    partial = _partial_echo(clean, options)
    if partial is not None:
        return ParsedChoice("choice", partial, "partial_echo")
    return ParsedChoice("no_choice", None, "no_choice")


def _outside(refusal: re.Match[str], options: Sequence[str] | None, position: int) -> bool:
    """Is the refusal phrase *not* part of the echoed sentence (so it is the model's own words)?"""
    if not options:
        return True
    return " ".join(_words(refusal.group(0))) not in " ".join(_words(options[position - 1]))


def parse_choice(text: object, options: Sequence[str] | None = None) -> ParsedChoice:
    """Parse a reply to a two-choice prompt; ``options`` are the sentences in the order shown.

    Never raises: any internal failure is reported as ``no_choice`` with rule ``parser_error``.
    """
    try:
        return _parse(text, options)
    except Exception:  # noqa: BLE001 - a parser bug must not stop a run; the row says so
        return ParsedChoice("no_choice", None, "parser_error")
