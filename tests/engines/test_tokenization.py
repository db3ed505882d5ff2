"""Our (context, continuation) split equals lm-eval's, so scores agree with lm-eval's."""

from __future__ import annotations

from lm_eval.api.model import TemplateLM

from themis_dagster.engines.tokenization import encode_pair, truncate_left


def toy_encode(text: str) -> list[int]:
    """A word-piece-like toy tokenizer: each char's code point, spaces attached to the next char."""
    return [ord(char) for char in text]


class ToyLM(TemplateLM):  # type: ignore[misc]
    """lm-eval's own request handling, with the toy tokenizer and a recorded token split."""

    backend = "causal"

    def __init__(self) -> None:
        self.seen: list[tuple[list[int], list[int]]] = []

    @property
    def eot_token_id(self) -> int:
        return 2

    @property
    def prefix_token_id(self) -> int:
        return 1

    def tok_encode(self, string: str, **kwargs: object) -> list[int]:
        return toy_encode(string)

    def _loglikelihood_tokens(self, requests, **kwargs):  # type: ignore[no-untyped-def]
        self.seen.extend((ctx, cont) for _, ctx, cont in requests)
        return [(0.0, False)] * len(requests)

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def generate_until(self, requests, disable_tqdm: bool = False):  # type: ignore[no-untyped-def]
        raise NotImplementedError


class _Req:
    def __init__(self, context: str, continuation: str) -> None:
        self.args = (context, continuation)


def test_split_matches_lm_eval() -> None:
    cases = [("", "He is poor."), ("The context", " continues here"), ("Trailing space ", "word"), ("a  ", "b")]
    lm = ToyLM()
    lm.loglikelihood([_Req(c, x) for c, x in cases], disable_tqdm=True)
    ours = [encode_pair(toy_encode, 1, c, x) for c, x in cases]
    assert ours == lm.seen


def test_empty_context_uses_prefix_token() -> None:
    assert encode_pair(toy_encode, 1, "", "ab") == ([1], [97, 98])
    # a continuation that already starts with the prefix token is not prefixed twice
    assert encode_pair(lambda s: [1, 5, 6], 1, "", "x") == ([1], [5, 6])


def test_left_truncation_keeps_the_continuation() -> None:
    tokens, context_len, truncated = truncate_left([1, 2, 3, 4], [5, 6], 4)
    assert tokens == [3, 4, 5, 6] and context_len == 2 and truncated
    assert truncate_left([1], [2], 8) == ([1, 2], 1, False)
