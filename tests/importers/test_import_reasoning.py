"""`themis import` with a reasoning column: stored apart from the answer, never parsed, refusals counted."""

from __future__ import annotations

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
