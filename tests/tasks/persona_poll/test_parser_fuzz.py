"""The lettered-option parser (persona polls, OpinionQA's chat variant) and SHADES' yes/no parser under hostile replies.

The strategies are the shared ones of tests/tasks/test_fuzz_parsers.py (10,000 examples each, megabyte
replies included; ``THEMIS_FUZZ_EXAMPLES`` makes a quick run).
"""

from __future__ import annotations

from hypothesis import given

from tests.tasks.test_fuzz_parsers import FUZZ_TIMED, _twice, any_reply, megabyte_examples
from themis_dagster.tasks.persona_poll.parser import MAX_CHARS, ParsedOption, parse_option
from themis_dagster.tasks.shades.parser import ParsedYesNo, parse_yes_no

OPTIONS = [["Very safe"], ["Somewhat safe"], ["Not too safe"], ["Not at all safe"], ["Refused", "I refuse"]]


@FUZZ_TIMED
@given(reply=any_reply)
@megabyte_examples()
def test_option_parser(reply: object) -> None:
    parsed = _twice(parse_option, reply, OPTIONS)
    assert isinstance(parsed, ParsedOption)
    assert parsed.index in (None, 0, 1, 2, 3, 4)
    assert (parsed.index is not None) == (parsed.reason == "ok")
    assert parsed.reason in ("ok", "empty", "ambiguous", "no_answer")
    assert (parsed.reason == "empty") == (not isinstance(reply, str) or not reply.strip()[:MAX_CHARS].replace("*", ""))


@FUZZ_TIMED
@given(reply=any_reply)
@megabyte_examples()
def test_yes_no_parser(reply: object) -> None:
    parsed = _twice(parse_yes_no, reply)
    assert isinstance(parsed, ParsedYesNo)
    assert (parsed.answer is not None) == (parsed.reason == "ok")
    assert parsed.reason in ("ok", "empty", "ambiguous", "no_answer")
