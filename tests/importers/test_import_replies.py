"""`themis import <task>`: replies produced elsewhere for any generation or chat task, or rejected whole."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from tests.conftest import MIRROR, requires_mirror, set_task_overrides
from themis_dagster.cli import main
from themis_dagster.importers import ImportValidationError
from themis_dagster.importers.replies import NO_REPLY, import_task_replies, prompt_text
from themis_dagster.settings import PROJECT_ROOT
from themis_dagster.tasks.loader import load_task

pytestmark = requires_mirror
LIBRARY = {path.name: path for path in (MIRROR / "langbite").glob("prompts_*.csv")}


def english_only() -> dict:
    raw = json.loads((PROJECT_ROOT / "data/langbite/example_scenario.json").read_text(encoding="utf-8"))
    for requirement in raw["requirements"]:
        requirement["languages"] = ["en_us"]
        requirement["communities"] = {"en_us": requirement["communities"]["en_us"]}
    return raw


@pytest.fixture(scope="module")
def langbite():
    task = load_task("langbite_example", {"scenario": english_only(), "n_templates_scope": "requirement"})
    items = task.module.load_items(LIBRARY, task.params)
    return task, task.module.build_requests(items, task.params, task.templates)


def test_replies_by_request_id_and_by_prompt_are_judged_like_the_engines(langbite, tmp_path: Path) -> None:
    task, requests = langbite
    group = [r for r in requests if r.item_id == "REQ_RELIGION/en_us/193"]  # allEqualExpected No, 3 instances
    by_id = tmp_path / "by_id.csv"
    by_id.write_text("request_id,reply\n" + "".join(f"{r.request_id},No.\n" for r in group[:2]))
    by_prompt = tmp_path / "by_prompt.jsonl"
    by_prompt.write_text(json.dumps({"prompt": prompt_text(group[2]), "reply": "Yes, they are."}) + "\n")
    imported = import_task_replies(task, LIBRARY, [by_id, by_prompt])
    assert [item.item_id for item in imported.items] == ["REQ_RELIGION/en_us/193"]  # only answered items
    assert [r.text for r in imported.responses] == ["No.", "No.", "Yes, they are."]
    (judgment,) = task.module.judge(imported.items, imported.requests, imported.responses, task.params)
    assert (judgment.outcome, judgment.detail["matched"]) == ("failed", [True, True, False])
    # a group with a reply missing: that request is an error, the group is not judged
    partial = import_task_replies(task, LIBRARY, [by_id])
    assert [r.error for r in partial.responses] == [None, None, NO_REPLY]
    (judgment,) = task.module.judge(partial.items, partial.requests, partial.responses, task.params)
    assert judgment.outcome == "error_engine_error" and not judgment.parsed


def test_item_id_key_for_one_request_per_item(tmp_path: Path) -> None:
    task = load_task("bbq_generate", {"limit": 4, "categories": ["Religion"]})
    files = {name: MIRROR / "bbq" / name for name in task.spec.files}
    items = task.module.load_items(files, task.params)
    path = tmp_path / "r.csv"
    path.write_text("item_id,response\n" + "".join(f"{item.item_id},A\n" for item in items))
    imported = import_task_replies(task, files, [path])
    assert len(imported.responses) == 4 and {r.text for r in imported.responses} == {"A"}


def test_bad_files_name_file_row_and_column(langbite, tmp_path: Path) -> None:
    task, requests = langbite
    first, second = requests[0], requests[1]
    bad = tmp_path / "bad.csv"
    bad.write_text(
        f"request_id,reply\n{first.request_id},No\nnope#0,No\n{first.request_id},Yes\n,No\n{first.item_id},No\n"
    )
    no_reply = tmp_path / "no_reply.csv"
    no_reply.write_text(f"request_id,text\n{second.request_id},No\n")
    no_key = tmp_path / "no_key.jsonl"
    no_key.write_text(json.dumps({"id": 1, "reply": "x"}) + "\n")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    header_only = tmp_path / "header.csv"
    header_only.write_text("request_id,reply\n")
    item_key = tmp_path / "item.csv"
    item_key.write_text(f"item_id,reply\n{first.item_id},No\n")
    with pytest.raises(ImportValidationError) as caught:
        import_task_replies(task, LIBRARY, [bad, no_reply, no_key, empty, header_only, item_key])
    text = str(caught.value)
    assert f"{bad}: row 2: column request_id: unknown request id 'nope#0'" in text
    assert f"{bad}: row 3: column request_id: duplicate reply for request '{first.request_id}'" in text
    assert f"{bad}: row 4: column request_id: empty" in text
    assert f"{bad}: row 5: column request_id: unknown request id" in text
    assert f"{no_reply}: column reply (or response): missing" in text
    assert f"{no_key}: column request_id, item_id or prompt: missing" in text
    assert f"{empty}: empty file" in text and f"{header_only}: empty file" in text
    assert f"{item_key}: row 1: column item_id: item '{first.item_id}' has 2 requests: give request_id" in text


def test_loglikelihood_tasks_are_refused(tmp_path: Path) -> None:
    task = load_task("bbq", {"limit": 4, "categories": ["Religion"]})
    files = {name: MIRROR / "bbq" / name for name in task.spec.files}
    path = tmp_path / "r.csv"
    path.write_text("item_id,reply\nReligion:0,A\n")
    with pytest.raises(ImportValidationError, match="only generation or chat tasks"):
        import_task_replies(task, files, [path])


@pytest.fixture
def env(import_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    overrides = {"langbite_example": {"scenario": english_only(), "n_templates_scope": "requirement"}}
    set_task_overrides(import_env, monkeypatch, overrides)
    return import_env


def test_cli_scores_imported_replies_and_replaces_them(env: Path, langbite, capsys: pytest.CaptureFixture[str]) -> None:
    _, requests = langbite
    path = env / "replies.csv"
    path.write_text("request_id,reply\n" + "".join(f"{r.request_id},No.\n" for r in requests))
    assert main(["import", "langbite_example", "--model", "elsewhere-llm", str(path)]) == 0
    assert "into langbite_example (new model)" in capsys.readouterr().out
    path.write_text("request_id,reply\n" + "".join(f"{r.request_id},Yes.\n" for r in requests[:3]))
    assert main(["import", "langbite_example", "--model", "elsewhere-llm", str(path)]) == 0
    with duckdb.connect(str(env / "w.duckdb"), read_only=True) as conn:
        texts = conn.execute(
            "SELECT DISTINCT text FROM responses WHERE model = 'elsewhere-llm' AND task = 'langbite_example'"
        ).fetchall()
        judged = conn.execute(
            "SELECT count(*) FROM judgments WHERE model = 'elsewhere-llm' AND task = 'langbite_example'"
        ).fetchone()
        headline = conn.execute(
            "SELECT count(*) FROM metric_values WHERE model = 'elsewhere-llm' AND task = 'langbite_example' "
            "AND metric = 'pass_rate' AND subset IS NULL"
        ).fetchone()
    assert set(texts) <= {("Yes.",), (None,)}  # the "No." replies are gone; a group's unanswered request: None
    assert judged is not None and judged[0] >= 1 and headline == (1,)
    bad = env / "bad.csv"
    bad.write_text("request_id,reply\nnope,No\n")
    assert main(["import", "langbite_example", "--model", "other-llm", str(bad)]) == 2
    assert "nothing was written" in capsys.readouterr().err
    assert main(["import", "no_such_task", "--model", "other-llm", str(bad)]) == 2
    with duckdb.connect(str(env / "w.duckdb"), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM responses WHERE model = 'other-llm'").fetchone() == (0,)
