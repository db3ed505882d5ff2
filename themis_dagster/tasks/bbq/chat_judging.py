"""Judging a BBQ-family chat reply: the one loop the translated BBQs (MBBQ, KoBBQ, CBBQ) share.

Each of those tasks asks its question with lettered choices (``rendering.lettered_chat_request``)
and reads the reply with ``parser.parse_answer`` once its language's "answer" words are rewritten
to the parser's English ones. What differs per task is passed in: that rewrite, how a choice's
own text is recognised where the parser (ASCII words only) finds none, and how a chosen choice
becomes a judgment. Refusals are marked by the caller, in the reply's language.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from themis_dagster.tasks.bbq.parser import parse_answer
from themis_dagster.tasks.spec import Item, Judgment, Response

Announcements = Callable[[str | None], str | None]
ChoiceByText = Callable[[str | None, list[str]], int | None]


def judge_lettered_replies(
    items: list[Item],
    responses: list[Response],
    *,
    choices_field: str,
    announcements: Announcements,
    detail_of: Callable[[Item], dict[str, object]],
    answered: Callable[[Item, int, Mapping[str, object]], Judgment],
    by_text: ChoiceByText | None = None,
    by_text_rule: str = "choice_text",
) -> list[Judgment]:
    """Per item, the choice its ``<item_id>:chat`` reply names, or why none could be read.

    No response: ``missing_response``; an engine error: ``engine_error``; a reply naming no
    choice: ``unparsed_<reason>`` (not scored, its reply kept in the detail). ``by_text`` reads
    a choice's text where the letter parser found nothing (judged with ``parse_rule``
    ``by_text_rule``).
    """
    by_id = {response.request_id: response for response in responses}
    judgments: list[Judgment] = []
    for item in items:
        response = by_id.get(f"{item.item_id}:chat")
        if response is None or response.error is not None:
            reason = "missing_response" if response is None else "engine_error"
            judgments.append(Judgment(item.item_id, item.subset, reason, None, False, detail_of(item)))
            continue
        choices = list(item.fields[choices_field])
        result = parse_answer(announcements(response.text), choices, (), None)
        extra = {"parse_rule": result.how, "reply": (response.text or "")[:300]}
        chosen = by_text(response.text, choices) if result.index is None and by_text is not None else None
        if chosen is not None:
            judgments.append(answered(item, chosen, extra | {"parse_rule": by_text_rule}))
        elif result.index is None:
            detail = detail_of(item) | extra
            judgments.append(Judgment(item.item_id, item.subset, f"unparsed_{result.reason}", None, False, detail))
        else:
            judgments.append(answered(item, result.index, extra))
    return judgments
