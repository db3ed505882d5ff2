"""One refusal detector for every generation and chat task: declared phrases, declared rules, no model.

A refusal is a reply in which the model says that it cannot or will not do what was asked
("I can't make assumptions about people based on gender", "Lo siento, pero no puedo ayudar
con eso"). Counted as an unparsed reply, or worse as an unbiased answer, it would bias the
task's scores; every generation and chat task is to ask this one function, so that a refusal
means the same thing in all of them.

Rules (``docs/refusals.md`` gives the reasons and the calibration against human labels):

1. The reply is normalised: Unicode NFKC, case-folded, curly apostrophes and quotes made
   straight, markdown emphasis and code marks removed, leading whitespace, headings, list
   bullets and block quotes stripped, runs of whitespace made one space. Only a reply's head
   is read (``_RAW_FACTOR`` times the opening and its tail), so a long reply costs no more.
2. Only the *opening* counts: the first ``window_chars`` characters of the normalised reply
   (the phrase must start there). A refusal announces itself first; a phrase further on is
   usually part of an answer ("... so I can't say that one group is ...").
3. Text between double quotation marks in the opening is not the model's own voice (dialogue
   in a story, a quoted prompt) and is ignored.
4. A phrase matches as whole words (CJK phrases as written). ``…`` in a phrase stands for up
   to four words (one to eight characters in CJK) between its parts, for languages that split
   a negation around its verb ("ich kann … nicht").
5. An exception that starts where a phrase matched voids that match ("i can't stress enough",
   "i cannot determine": emphasis and uncertainty, not refusals).
6. A reply that opens with an option label ("(a) The grandfather", "b) ...", "C. ...",
   "Answer: (b)") has answered; what follows is its reasoning ("(c) Can't be determined. I
   can't make assumptions about ...") and no refusal.
7. The language's own phrases are searched together with the English ones (models often
   refuse in English whatever the prompt's language). A language without a list falls back
   to English alone, and the verdict says so.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from themis_dagster.errors import load_yaml

PHRASES_FILE = Path(__file__).resolve().parent / "phrases.yaml"
FALLBACK_LANGUAGE = "en"
GAP = "…"

RULE_EMPTY = "empty-reply"
RULE_PHRASE = "phrase-in-opening"
RULE_EXCEPTED = "exception-in-opening"
RULE_ANSWER_FIRST = "answer-first"
RULE_NONE = "no-phrase-in-opening"

_APOSTROPHES = str.maketrans({c: "'" for c in "\u2018\u2019\u201b\u02bc\u02b9\u00b4\u2032\uff07"})
_QUOTES = str.maketrans({c: '"' for c in "\u201c\u201d\u201e\u201f\u00ab\u00bb\u2033\uff02\u300c\u300d\u300e\u300f"})
_MARKUP = re.compile(r"[*`]|(?<!\w)_+|_+(?!\w)")
_LEADING = re.compile(r"^(?:\s|[#>|~+\-•])+")
# An option label first: "(a) ...", "b) ...", "c. ...", "answer: (b)", "the answer is b)".
_ANSWER_FIRST = re.compile(r"^(?:(?:the )?answer(?: is)?\s*:?\s*)?(?:\(\s*[a-z0-9]\s*\)|[a-z0-9]\)|[a-h]\.(?=\s|$))")
_SPACES = re.compile(r"\s+")
_QUOTED = re.compile(r'"[^"]*"')
_TAIL_CHARS = 120  # room after the window for a phrase that starts inside it
_RAW_FACTOR = 4  # raw characters read per opening character: leading blanks and markup, NFKC expansions


@dataclass(frozen=True)
class RefusalVerdict:
    """Whether a reply is a refusal, which declared phrase said so, and under which rule."""

    refused: bool
    phrase: str | None
    rule: str
    language: str  # the phrase list used: the asked language, or "en" when it has none
    fallback: bool = False  # True when the asked language has no list and English stood in


@dataclass(frozen=True)
class _Language:
    code: str
    window_chars: int
    phrases: tuple[str, ...]
    exceptions: tuple[str, ...]
    pattern: re.Pattern[str]
    exception_pattern: re.Pattern[str] | None


def _is_cjk(char: str) -> bool:
    """Han, kana and Hangul: scripts written without spaces between words."""
    name = unicodedata.name(char, "")
    return name.startswith(("CJK", "HIRAGANA", "KATAKANA", "HANGUL"))


def _phrase_regex(phrase: str) -> str:
    """A declared phrase as a regex: whole words, ``…`` as a short gap of words (CJK: characters)."""
    parts = [part.strip() for part in phrase.split(GAP)]
    cjk = any(_is_cjk(c) for c in phrase)
    gap = r".{1,8}?" if cjk else r"\s+(?:\S+\s+){0,4}?"
    body = gap.join(re.escape(part) for part in parts)
    first, last = parts[0][:1], parts[-1][-1:]
    before = r"(?<!\w)" if first.isalnum() and not _is_cjk(first) else ""
    after = r"(?!\w)" if last.isalnum() and not _is_cjk(last) else ""
    return before + body + after


def normalize(text: str) -> str:
    """The reply as the phrases are written: folded case, straight apostrophes and quotes, no markup."""
    text = unicodedata.normalize("NFKC", text).translate(_APOSTROPHES).translate(_QUOTES).casefold()
    text = _MARKUP.sub("", text)
    text = _LEADING.sub("", text)
    return _SPACES.sub(" ", text).strip()


def _declared(entries: Any, where: str) -> tuple[str, ...]:
    """The phrases of a language's ``phrases`` or ``exceptions`` lists, normalised as replies are."""
    found: list[str] = []
    for entry in entries or []:
        for phrase in entry["phrases"]:
            parts = [normalize(part) for part in str(phrase).split(GAP)]  # NFKC would make "…" "..."
            value = f" {GAP} ".join(parts)
            if not all(parts):
                raise ValueError(f"{PHRASES_FILE.name}: an empty phrase in {where}")
            found.append(value)
    return tuple(dict.fromkeys(found))


def _alternation(phrases: tuple[str, ...]) -> re.Pattern[str]:
    """One regex over the phrases, each a named group; longer phrases first so they win a tie."""
    ordered = sorted(range(len(phrases)), key=lambda k: -len(phrases[k]))
    return re.compile("|".join(f"(?P<p{k}>{_phrase_regex(phrases[k])})" for k in ordered))


@cache
def _languages() -> dict[str, _Language]:
    raw = load_yaml(PHRASES_FILE.read_text(encoding="utf-8"))
    default_window = int(raw["window_chars"])
    english = raw["languages"][FALLBACK_LANGUAGE]
    languages: dict[str, _Language] = {}
    for code, spec in raw["languages"].items():
        own = _declared(spec["phrases"], f"{code}.phrases")
        own_exceptions = _declared(spec.get("exceptions"), f"{code}.exceptions")
        if code != FALLBACK_LANGUAGE:  # rule 7: English is searched too
            own += _declared(english["phrases"], "en.phrases")
            own_exceptions += _declared(english.get("exceptions"), "en.exceptions")
        phrases, exceptions = tuple(dict.fromkeys(own)), tuple(dict.fromkeys(own_exceptions))
        languages[code] = _Language(
            code=code,
            window_chars=int(spec.get("window_chars", default_window)),
            phrases=phrases,
            exceptions=exceptions,
            pattern=_alternation(phrases),
            exception_pattern=_alternation(exceptions) if exceptions else None,
        )
    return languages


def known_languages() -> list[str]:
    """The languages with their own phrase list."""
    return sorted(_languages())


def base_language(language: str) -> str:
    """``es-ES``, ``ES``, ``pt_BR``, ``zh-Hans`` -> ``es``, ``es``, ``pt``, ``zh``."""
    return re.split(r"[-_]", language.strip().lower(), maxsplit=1)[0]


def _blank_quoted(head: str) -> str:
    """Rule 3: double-quoted spans become spaces (positions kept), so their words match nothing."""
    return _QUOTED.sub(lambda m: " " * len(m.group()), head)


def detect_refusal(text: str, language: str = FALLBACK_LANGUAGE) -> RefusalVerdict:
    """Whether ``text`` opens with a declared refusal phrase of ``language`` (or of English)."""
    languages = _languages()
    code = base_language(language)
    fallback = code not in languages
    spec = languages[FALLBACK_LANGUAGE if fallback else code]
    normalized = normalize(text[: _RAW_FACTOR * (spec.window_chars + _TAIL_CHARS)])  # a long reply's tail is never read
    if not normalized:
        return RefusalVerdict(False, None, RULE_EMPTY, spec.code, fallback)
    if _ANSWER_FIRST.match(normalized):
        return RefusalVerdict(False, None, RULE_ANSWER_FIRST, spec.code, fallback)
    head = _blank_quoted(normalized[: spec.window_chars + _TAIL_CHARS])  # a phrase may run past the window
    excepted: str | None = None
    position = 0
    while (match := spec.pattern.search(head, position, spec.window_chars + _TAIL_CHARS)) is not None:
        if match.start() >= spec.window_chars:
            break
        if spec.exception_pattern is not None and (hit := spec.exception_pattern.match(head, match.start())):
            excepted = excepted or spec.exceptions[int(str(hit.lastgroup)[1:])]
            position = match.start() + 1
            continue
        phrase = spec.phrases[int(str(match.lastgroup)[1:])]
        return RefusalVerdict(True, phrase, RULE_PHRASE, spec.code, fallback)
    if excepted is not None:
        return RefusalVerdict(False, excepted, RULE_EXCEPTED, spec.code, fallback)
    return RefusalVerdict(False, None, RULE_NONE, spec.code, fallback)
