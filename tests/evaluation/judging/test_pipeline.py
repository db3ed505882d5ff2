"""The judgments pipeline, one test per step (guard, judge, second opinion or panel, refusal judge, relabel),
and the pipeline running them in order. The toy task is in ``toy_task.py``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.evaluation.judging.toy_task import (
    KEY,
    AskJudge,
    AskPanel,
    answerers,
    chat,
    outcomes,
    replies,
    toy_task,
)
from themis_dagster.evaluation.judging.pipeline import judge_partition
from themis_dagster.evaluation.judging.refusal_judge import asks_refusal_judge, refusal_judge
from themis_dagster.evaluation.judging.reply_guard import guard_replies, relabel
from themis_dagster.evaluation.judging.second_opinion import second_opinion
from themis_dagster.evaluation.judging.task_judge import (
    judge_by_chunks,
    judge_frame,
    judge_records,
    judged_in_chunks,
    reads_prompts,
)
from themis_dagster.exchange import Response
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.spec import Item, Judgment
from themis_dagster.warehouse.frames import from_frame, to_frame

REPLIES = [
    chat("1", "yes"),
    chat("2", "maybe"),  # open: a judge decides
    chat("3", "", "length", reasoning="still thinking"),  # reasoning unfinished: withheld
    chat("4", "I'm sorry, but I can't answer that."),  # a refusal by the phrase lists
]


def _no_judge_asked(judge: str, question: str) -> str:
    raise AssertionError(f"{judge} asked {question!r}")


def test_step_1_the_guard_withholds_replies_that_are_no_answer() -> None:
    rows = replies(REPLIES)
    assert guard_replies(rows.responses, declares_reasoning=False).withheld == {"3": "reasoning_unfinished"}
    guarded = guard_replies(rows.responses, declares_reasoning=True)
    shown = {r.request_id: r for r in from_frame("responses", guarded.responses, Response)}
    assert shown["3"].text is None and str(shown["3"].error).startswith("reasoning_unfinished:")
    assert shown["1"].text == "yes" and all(r.reasoning is None for r in shown.values())
    plain = replies([chat("1", "yes")]).responses
    assert guard_replies(plain, declares_reasoning=False).responses is plain  # off: nothing touched


def test_step_2_the_tasks_judge_reads_the_guarded_replies_whole_or_by_chunks() -> None:
    task, rows = toy_task(), replies(REPLIES)
    responses = guard_replies(rows.responses, declares_reasoning=True).responses
    assert not judged_in_chunks(task) and reads_prompts(task)  # not item-local: the whole partition
    records = judge_records(task, rows.items, rows.the_prompts(), responses)
    assert [(j.item_id, j.outcome) for j in records] == [("1", "yes"), ("2", "unsure"), ("3", "engine_error"),
                                                         ("4", "unsure")]  # fmt: skip
    # an item-local task without a second opinion: a chunk of items at a time, the same judgments
    local = replace(task, hooks=replace(task.hooks, ITEM_LOCAL=True))
    assert judged_in_chunks(local)
    chunked = judge_frame(local, KEY, rows.items, rows.the_prompts, responses)
    assert chunked.equals(judge_by_chunks(local, KEY, rows.items, rows.the_prompts(), responses))
    assert from_frame("judgments", chunked, Judgment) == records
    # crows_pairs judges a column at a time and reads no prompts
    crows = load_task("crows_pairs")
    assert judged_in_chunks(crows) and not reads_prompts(crows)


def test_step_3_a_second_opinion_or_a_panel_re_judges_what_the_rules_left_open(tmp_path: Path) -> None:
    judged = [Judgment("1", None, "yes", 1.0, True), Judgment("2", None, "unsure", None, False)]
    none_asked, asked = answerers(tmp_path, _no_judge_asked)
    assert second_opinion(toy_task(AskJudge()), judged, none_asked).judgments == judged  # params name no judge
    assert asked == []

    one, asked = answerers(tmp_path, lambda judge, question: "no")
    opinions = second_opinion(toy_task(AskJudge(), judge_model="j1"), judged, one)
    assert [j.outcome for j in opinions.judgments] == ["yes", "judged_no"]
    assert (opinions.questions, asked, opinions.answering.sent) == (1, ["j1"], 1)

    votes = {"j1": "no", "j2": "yes", "j3": "yes"}
    panel, asked = answerers(tmp_path, lambda judge, question: votes[judge])
    first = second_opinion(toy_task(AskPanel(), judge_model="j1", panel=("j2", "j3")), judged, panel)
    majority = second_opinion(toy_task(AskPanel(), judge_model="j1", panel=("j2", "j3"), majority=True), judged, panel)
    assert [j.outcome for j in first.judgments] == ["yes", "judged_no"]  # judge_model's label
    assert [j.outcome for j in majority.judgments] == ["yes", "judged_yes"]  # the panel's majority
    assert first.questions == 3 and asked == ["j1", "j2", "j3"] * 2  # every judge, one at a time


def test_step_4_a_refusal_judge_decides_refused(tmp_path: Path) -> None:
    rows = replies([chat("1", "yes"), chat("4", "I'm sorry, but I can't answer that.")])
    task = toy_task(refusal_judge_model="refuser")
    records = task.hooks.judge(
        from_frame("task_items", rows.items, Item), [], from_frame("responses", rows.responses, Response), task.params
    )
    frame = to_frame("judgments", records, model="m", task="toy")
    assert frame.get_column("refused").to_list() == [False, True]  # the phrase lists
    none_asked, asked = answerers(tmp_path, _no_judge_asked)
    assert refusal_judge(toy_task(), frame, rows.the_prompts, rows.responses, none_asked).judgments is frame
    assert not asks_refusal_judge(toy_task(), frame) and asks_refusal_judge(task, frame)
    # the judge model reads the first reply as a refusal and the second as compliance
    verdict, asked = answerers(tmp_path, lambda judge, q: "2_full_refusal" if '"yes"' in q else "1_full_compliance")
    judged = refusal_judge(task, frame, rows.the_prompts, rows.responses, verdict)
    assert judged.judgments.get_column("refused").to_list() == [True, False]
    assert (judged.questions, asked) == (2, ["refuser"])
    assert judged.judgments.drop("refused").equals(frame.drop("refused"))  # nothing else changes


def test_step_5_relabel_gives_the_guards_outcome_to_what_it_caused() -> None:
    rows = replies(REPLIES)
    guarded = guard_replies(rows.responses, declares_reasoning=True)
    records = [Judgment("1", None, "yes", 1.0, True), Judgment("3", None, "engine_error", None, False)]
    judged = to_frame("judgments", records, model="m", task="toy")
    assert outcomes(relabel(judged, guarded)) == {"1": "yes", "3": "reasoning_unfinished"}
    assert relabel(judged, guard_replies(replies([chat("1", "yes")]).responses, False)) is judged


def test_the_pipeline_runs_the_five_steps_in_order(tmp_path: Path) -> None:
    votes = {"j1": "no", "j2": "no"}

    def answer(judge: str, question: str) -> str:
        return "1_full_compliance" if judge == "refuser" else votes[judge]

    task = toy_task(AskPanel(), judge_model="j1", panel=("j2",), refusal_judge_model="refuser")
    judges, asked = answerers(tmp_path, answer)
    judged = judge_partition(task, KEY, replies(REPLIES), declares_reasoning=True, answerers=judges)
    assert outcomes(judged.frame) == {"1": "yes", "2": "judged_no", "3": "reasoning_unfinished", "4": "judged_no"}
    assert judged.frame.get_column("refused").to_list() == [False, False, None, False]  # the judge's, not the lists'
    assert judged.withheld == {"reasoning_unfinished": 1, "truncated": 0}
    assert (judged.second_opinions, judged.refusal_questions) == (4, 3)  # 2 open items x 2 judges; 3 replies read
    assert asked == ["j1", "j2", "refuser"] and judged.answering.sent == 7
    assert judged.frame.columns == to_frame("judgments", [], model="m", task="toy").columns  # written as it is
