"""Reads a yes/no reply to SHADES' prompts; never raises, says why when it cannot tell.

The repository's ``utils.helper_parse_for_labels`` lowercases the reply and looks for "yes" as a
substring anywhere, then for "no": "I do not know" reads as no ("know"), "Not sure" as no, and a
reply with both words is "yes" whatever it says first. We read whole words instead:

1. the reply starts with yes or no (``Yes.``, ``**No**, because ...``);
2. otherwise exactly one of the two words occurs (``I would say no.``);
3. both, neither starting the reply: ``ambiguous``; neither: ``no_answer``; nothing: ``empty``.

docs/opinions.md lists this among the places we differ.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_CHARS = 4000
_START = re.compile(r"^\W*(?P<word>yes|no)\b", re.I)
_WORD = re.compile(r"\b(?P<word>yes|no)\b", re.I)


@dataclass(frozen=True)
class ParsedYesNo:
    """``answer``: True for yes, False for no, None with ``reason`` when unreadable; ``how``: the rule."""

    answer: bool | None
    reason: str
    how: str = ""


def parse_yes_no(reply: object) -> ParsedYesNo:
    """The reply's yes or no (module docstring); anything but text is empty."""
    text = (reply if isinstance(reply, str) else "").strip()[:MAX_CHARS].replace("*", "")
    if not text:
        return ParsedYesNo(None, "empty")
    if (start := _START.match(text)) is not None:
        return ParsedYesNo(start.group("word").lower() == "yes", "ok", "leading")
    words = {found.group("word").lower() for found in _WORD.finditer(text)}
    if len(words) == 1:
        return ParsedYesNo(words.pop() == "yes", "ok", "only_word")
    return ParsedYesNo(None, "ambiguous" if words else "no_answer")
