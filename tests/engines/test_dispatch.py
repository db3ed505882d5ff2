"""Dispatch batches requests and keeps every answer it got, even when part of a batch fails."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from themis_dagster.engines.dispatch import dispatch
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.exchange import GenerationParams, Request, Response


class PartlyFailingEngine(FakeEngine):
    def loglikelihood(self, requests: Sequence[Request]) -> list[Response]:
        first, second = requests
        return [
            first.scored(-1.0, False, n_prompt_tokens=2, n_continuation_tokens=1),
            second.failed("HTTP 503 after 4 retries"),
        ]


def test_one_call_per_request_type_and_setting() -> None:
    engine = FakeEngine(reply=lambda prompt: "ok")
    greedy = GenerationParams().model_dump(mode="json")
    hot = GenerationParams(temperature=0.7).model_dump(mode="json")
    requests = [
        Request("a", "1", "loglikelihood", "", "x"),
        Request("b", "1", "loglikelihood", "ctx", " y"),
        Request("c", "2", "chat", messages=[{"role": "user", "content": "hi"}], gen_params=greedy),
        Request("d", "3", "chat", messages=[{"role": "user", "content": "yo"}], gen_params=hot),
        Request("e", "4", "chat", messages=[{"role": "user", "content": "hey"}], gen_params=greedy),
    ]
    answers, stats = dispatch(engine, requests)
    assert [a.request_id for a in answers] == ["a", "b", "c", "d", "e"]
    assert sorted(engine.calls) == ["chat:1", "chat:2", "loglikelihood:2"]
    assert stats.errors == 0 and answers[2].text == "ok"


def test_partial_failures_keep_the_answers_received() -> None:
    requests = [Request("a", "1", "loglikelihood", "", "x"), Request("b", "1", "loglikelihood", "", "y")]
    answers, stats = dispatch(PartlyFailingEngine(), requests)
    assert answers[0].logprob == -1.0 and answers[0].error is None
    assert answers[1].logprob is None and answers[1].error == "HTTP 503 after 4 retries"
    assert stats.errors == 1


def test_requests_the_engine_could_not_answer_are_responses_with_an_error() -> None:
    """A fake engine fails part of each batch: those get ``error``, the rest keep their answers."""
    engine = FakeEngine(reply=lambda prompt: "sure", fail=lambda text: "too long" if "long" in text else None)
    chat = GenerationParams().model_dump(mode="json")
    requests = [
        Request("a", "1", "loglikelihood", "ctx", " fine"),
        Request("b", "1", "loglikelihood", "ctx", " long"),
        Request("c", "2", "chat", messages=[{"role": "user", "content": "short"}], gen_params=chat),
        Request("d", "2", "chat", messages=[{"role": "user", "content": "long one"}], gen_params=chat),
    ]
    responses, stats = dispatch(engine, requests)
    assert all(isinstance(response, Response) for response in responses)
    assert [r.request_type for r in responses] == ["loglikelihood", "loglikelihood", "chat", "chat"]
    assert [r.error for r in responses] == [None, "too long", None, "too long"]
    scored, unscored, replied, unreplied = responses
    assert scored.logprob is not None and scored.finish_reason == "scored" and scored.n_prompt_tokens == 2
    assert scored.n_continuation_tokens == 1 and unscored.n_continuation_tokens is None
    assert replied.n_continuation_tokens is None
    assert (unscored.logprob, unscored.is_greedy, unscored.n_prompt_tokens, unscored.latency_s) == (None,) * 4
    assert replied.text == "sure" and replied.finish_reason == "stop" and replied.n_output_tokens == 1
    assert unreplied.text == "" and unreplied.finish_reason == "error" and unreplied.n_output_tokens == 0
    assert stats.errors == 2 and stats.prompt_tokens == 2 + 1 + 2 and stats.output_tokens == 1
    assert sorted(engine.calls) == ["chat:2", "loglikelihood:2"], "one call per batch, failures included"

    again, stats = dispatch(engine, requests, retries=1)
    assert [r.error for r in again] == [None, "too long", None, "too long"] and stats.retried == 2


def test_a_failing_batch_is_recorded_not_raised() -> None:
    class Broken(FakeEngine):
        def chat(self, requests: Sequence[Request], params: GenerationParams) -> list[Response]:
            raise ConnectionError("refused")

    answers, stats = dispatch(Broken(), [Request("a", "1", "chat", messages=[{"role": "user", "content": "x"}])])
    assert answers[0].error == "ConnectionError: refused" and stats.errors == 1


def test_failed_requests_are_retried_alone() -> None:
    class Flaky(FakeEngine):
        def __init__(self) -> None:
            super().__init__(reply=lambda prompt: "fine")
            self.failures = 1

        def chat(self, requests: Sequence[Request], params: GenerationParams) -> list[Response]:
            if self.failures:
                self.failures -= 1
                raise TimeoutError("engine busy")
            return super().chat(requests, params)

    requests = [
        Request("a", "1", "loglikelihood", "", "x"),
        Request("b", "2", "chat", messages=[{"role": "user", "content": "x"}]),
    ]
    engine = Flaky()
    answers, stats = dispatch(engine, requests, retries=2)
    assert answers[1].text == "fine" and answers[1].error is None and stats.errors == 0
    assert stats.retried == 1 and engine.calls == ["loglikelihood:1", "chat:1"]  # only the failed one re-sent
    answers, stats = dispatch(Flaky(), requests, retries=0)
    assert answers[1].error == "TimeoutError: engine busy" and stats.errors == 1


def test_the_hand_off_of_streamed_answers_is_timed_apart_from_the_engine() -> None:
    """What ``on_answered`` costs is the platform's, inside the engine call's wall time: both are kept."""
    import time

    handed: list[str] = []

    def slow_sink(answers: Sequence[Response]) -> None:
        time.sleep(0.02)
        handed.extend(answer.request_id for answer in answers)

    requests = [Request(str(k), "1", "loglikelihood", "ctx", f" w{k}") for k in range(5)]
    answers, stats = dispatch(FakeEngine(step_size=1), requests, on_answered=slow_sink)  # a hand-off per answer
    assert handed == [answer.request_id for answer in answers] == ["0", "1", "2", "3", "4"]
    assert 0.1 <= stats.handoff_seconds <= stats.engine_seconds
    _, quiet = dispatch(FakeEngine(), requests)
    assert quiet.handoff_seconds == 0.0


def test_the_fake_engine_hands_on_a_step_of_answers_at_a_time() -> None:
    """As VLLMEngine hands on what each engine step finished: one call per step, every answer once."""
    steps: list[list[str]] = []
    requests = [Request(str(k), "1", "loglikelihood", "ctx", f" w{k}") for k in range(5)]
    answers = FakeEngine(step_size=2).loglikelihood(
        requests, on_answered=lambda a: steps.append([r.request_id for r in a])
    )
    assert steps == [["0", "1"], ["2", "3"], ["4"]]
    assert [answer.request_id for answer in answers] == ["0", "1", "2", "3", "4"]
    with pytest.raises(ValueError, match="step_size"):
        FakeEngine(step_size=0)
