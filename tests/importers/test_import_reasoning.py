"""`themis import` with a reasoning column: stored apart from the answer, never parsed, refusals counted."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import duckdb
import pytest

from tests.conftest import MIRROR, requires_mirror, set_task_overrides
from themis_dagster.cli import main
from themis_dagster.importers.replies import import_task_replies
from themis_dagster.tasks.loader import load_task

pytestmark = requires_mirror
PARAMS = {"limit": 4, "categories": ["Religion"]}
SENTINEL = "ZEBRAQUILL"  # planted in the reasoning: it must reach no judgment
REFUSAL = "I'm sorry, but I can't help with that."


@pytest.fixture(scope="module")
def item_ids() -> list[str]:
    task = load_task("bbq_generate", PARAMS)
    files = {name: MIRROR / "bbq" / name for name in task.spec.files}
    return [item.item_id for item in task.module.load_items(files, task.params)]


def test_reasoning_column_is_read_from_csv_and_jsonl(item_ids: list[str], tmp_path: Path) -> None:
    task = load_task("bbq_generate", PARAMS)
    files = {name: MIRROR / "bbq" / name for name in task.spec.files}
    csv = tmp_path / "r.csv"
    csv.write_text(f"item_id,reply,reasoning\n{item_ids[0]},A,thinking {SENTINEL}\n{item_ids[1]},B,\n")
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text(
        json.dumps({"item_id": item_ids[2], "reply": "C", "reasoning_content": "weighing the options"})
        + "\n"
        + json.dumps({"item_id": item_ids[3], "reply": "A", "reasoning_content": None})
        + "\n"
    )
    imported = import_task_replies(task, files, [csv, jsonl])
    by_item = {r.item_id: r for r in imported.responses}
    assert [by_item[i].text for i in item_ids] == ["A", "B", "C", "A"]
    assert [by_item[i].reasoning for i in item_ids] == [f"thinking {SENTINEL}", None, "weighing the options", None]


@pytest.fixture
def env(import_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    set_task_overrides(import_env, monkeypatch, {"bbq_generate": PARAMS})
    return import_env


def test_imported_reasoning_is_stored_withheld_and_refusals_scored(env: Path, item_ids: list[str]) -> None:
    path = env / "replies.csv"
    rows = [
        (item_ids[0], "A", f"Let me weigh {SENTINEL} first."),  # an answer after reasoning
        (item_ids[1], REFUSAL, f"{SENTINEL}: this asks me to stereotype."),  # a refusal after reasoning
        (item_ids[2], "", f"Still thinking about {SENTINEL} when the budget ran out"),  # reasoning never ended
        (item_ids[3], "B", ""),  # no reasoning
    ]
    path.write_text("item_id,reply,reasoning\n" + "".join(f'{i},"{reply}","{thought}"\n' for i, reply, thought in rows))
    assert main(["import", "bbq_generate", "--model", "thinking-elsewhere", str(path)]) == 0
    with duckdb.connect(str(env / "w.duckdb"), read_only=True) as conn:
        stored = dict(
            conn.execute(
                "SELECT item_id, reasoning FROM responses WHERE model = 'thinking-elsewhere' AND task = 'bbq_generate'"
            ).fetchall()
        )
        judged = {
            item_id: (outcome, refused, detail)
            for item_id, outcome, refused, detail in conn.execute(
                "SELECT item_id, outcome, refused, CAST(detail AS VARCHAR) FROM judgments "
                "WHERE model = 'thinking-elsewhere' AND task = 'bbq_generate'"
            ).fetchall()
        }
        metrics = dict(
            conn.execute(
                "SELECT metric, value FROM metric_values WHERE model = 'thinking-elsewhere' "
                "AND task = 'bbq_generate' AND subset IS NULL"
            ).fetchall()
        )
    assert stored[item_ids[0]] == f"Let me weigh {SENTINEL} first." and stored[item_ids[3]] is None
    assert judged[item_ids[1]][1] is True  # the refusal detector read the imported answer
    assert judged[item_ids[0]][1] is False and judged[item_ids[3]][1] is False
    assert judged[item_ids[2]][0] == "reasoning_unfinished"  # withheld from the parser, its own outcome
    assert all(SENTINEL not in (detail or "") for _, _, detail in judged.values())
    assert metrics["refused_rate"] == pytest.approx(0.25)
    assert metrics["n_answered"] == 3
    assert metrics["reasoning_unfinished_rate"] == pytest.approx(0.25)
    assert any(name.endswith("_answered") and name != "n_answered" for name in metrics)  # scored over answers
    # imported again, every reply answered: the model declares no reasoning, its replies carry some,
    # so the shares are still reported (0), not left out
    path.write_text("item_id,reply,reasoning\n" + "".join(f'{i},"A","{SENTINEL} weighing"\n' for i in item_ids))
    assert main(["import", "bbq_generate", "--model", "thinking-elsewhere", str(path)]) == 0
    with duckdb.connect(str(env / "w.duckdb"), read_only=True) as conn:
        rates = dict(
            conn.execute(
                "SELECT metric, value FROM metric_values WHERE model = 'thinking-elsewhere' AND task = 'bbq_generate' "
                "AND subset IS NULL AND metric IN ('reasoning_unfinished_rate', 'truncated_rate', 'refused_rate')"
            ).fetchall()
        )
    assert rates == {"reasoning_unfinished_rate": 0.0, "truncated_rate": 0.0, "refused_rate": 0.0}


# -- BBQ's results format and the IAT framework's CSVs --------------------------------------------

BBQ_PREDS = Path(__file__).parents[1] / "data" / "bbq_preds"
ARC = "unifiedqa-t5-11b_pred_arc"


def test_bbq_results_with_reasoning_are_withheld_refusal_aware_and_scored(import_env: Path, tmp_path: Path) -> None:
    rows = [json.loads(line) for line in (BBQ_PREDS / "preds_Age.jsonl").read_text().splitlines()]
    planted = [
        {"reasoning": f"Weighing {SENTINEL} first."},  # an answer after reasoning: matched as the R script does
        {ARC: "", "reasoning_content": f"{SENTINEL} ran out of budget"},  # reasoning never ended: no answer
        {ARC: REFUSAL, "reasoning": f"{SENTINEL}: this asks me to stereotype."},  # a refusal after reasoning
    ]
    path = tmp_path / "preds_Age.jsonl"
    extras = planted + [{}] * (len(rows) - len(planted))
    path.write_text("".join(json.dumps(row | extra) + "\n" for row, extra in zip(rows, extras, strict=True)))
    assert main(["import", "bbq", "--model", "bbq-thinker", "--column", ARC, str(path)]) == 0
    with duckdb.connect(str(import_env / "w.duckdb"), read_only=True) as conn:
        stored = conn.execute("SELECT item_id, text, reasoning FROM responses WHERE model = 'bbq-thinker' "
                              "ORDER BY item_id").fetchall()  # fmt: skip
        judged = {item_id: (outcome, parsed, refused, detail) for item_id, outcome, parsed, refused, detail in
                  conn.execute("SELECT item_id, outcome, parsed, refused, CAST(detail AS VARCHAR) FROM judgments "
                               "WHERE model = 'bbq-thinker'").fetchall()}  # fmt: skip
        metrics = dict(conn.execute("SELECT metric, value FROM metric_values WHERE model = 'bbq-thinker' "
                                    "AND subset IS NULL").fetchall())  # fmt: skip
    reasoning = {item_id: thought for item_id, _, thought in stored}
    first, second, third = (f"Age:{row['example_id']}" for row in rows[:3])
    assert reasoning[first] == f"Weighing {SENTINEL} first." and reasoning[second] == f"{SENTINEL} ran out of budget"
    assert sum(thought is not None for thought in reasoning.values()) == 3
    assert judged[first][1] is True and judged[first][2] is False  # matched to an option, not refused
    assert judged[second][0] == "reasoning_unfinished" and judged[second][1] is False
    assert judged[third][2] is True  # the refusal detector read the imported answer
    assert all(SENTINEL not in (detail or "") for *_, detail in judged.values())
    n = len(judged)
    assert metrics["reasoning_unfinished_rate"] == pytest.approx(1 / n)
    assert metrics["refused_rate"] == pytest.approx(1 / n) and metrics["n_answered"] == n - 1
    assert "s_dis_answered" in metrics  # the bias score over answered items beside the all-items one


def test_bbq_reasoning_of_another_type_fails_naming_the_row_and_column(tmp_path: Path) -> None:
    from themis_dagster.importers import ImportValidationError
    from themis_dagster.tasks.bbq.importer import import_predictions

    row = json.loads((BBQ_PREDS / "preds_Age.jsonl").read_text().splitlines()[0])
    path = tmp_path / "preds.jsonl"
    path.write_text(json.dumps(row | {"reasoning": ["not", "a", "string"]}) + "\n")
    with pytest.raises(ImportValidationError, match=r"row 1: column reasoning: expected a string, got list"):
        import_predictions([path], ARC, lambda items: [])


def test_iat_replies_with_reasoning_are_withheld_and_refusal_aware(tmp_path: Path) -> None:
    import pandas as pd

    from tests.tasks.iat.test_iat_task import write_stimuli
    from themis_dagster.evaluation.judging.reply_guard import guard_replies, relabel
    from themis_dagster.tasks.iat import utils
    from themis_dagster.tasks.iat.importer import import_replies
    from themis_dagster.tasks.spec import Response
    from themis_dagster.warehouse.frames import from_frame, to_frame

    (tmp_path / "stimuli").mkdir()
    files = write_stimuli(tmp_path / "stimuli")
    base = {"model": "m", "category": "race", "dataset": "racism", "variation": "replication", "group0": "Black",
            "group1": "White", "attributes": "['tragic', 'marvelous', 'nasty', 'superb']", "prompt": "p"}  # fmt: skip
    sorted_reply = "tragic - black\nmarvelous - white\nnasty - black\nsuperb - white"
    rows = [
        base | {"response": sorted_reply, "reasoning": f"{SENTINEL}: pair each word"},
        base | {"response": "", "reasoning": f"{SENTINEL} tragic - white, still weighing"},  # never ended
        base | {"response": REFUSAL, "reasoning": f"{SENTINEL} I should not sort people"},
        base | {"response": sorted_reply, "reasoning": ""},
    ]
    path = tmp_path / "run.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    imported = import_replies([path], files)
    assert [r.reasoning for r in imported.responses] == [row["reasoning"] or None for row in rows]
    # the judgments stage's path: the guard (the replies carry reasoning), the task's judge, relabel
    stored = [dataclasses.replace(r, request_type="chat") for r in imported.responses]  # as store_imported stores them
    frame = to_frame("responses", stored, model="m", task="iat")
    guarded = guard_replies(frame, declares_reasoning=False)
    shown = from_frame("responses", guarded.responses, Response)
    judged = utils.judge(imported.items, imported.requests, shown, utils.Params())
    outcomes = relabel(to_frame("judgments", judged, model="m", task="iat"), guarded)
    assert outcomes.get_column("outcome").to_list()[1] == "reasoning_unfinished"
    assert [j.refused for j in judged] == [False, None, True, False]
    assert judged[0].score == judged[3].score  # the reasoning changed nothing of the reply read
    assert SENTINEL not in str(outcomes.to_dicts())
