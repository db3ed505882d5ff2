"""``reading_disagreements`` and its read functions on a small warehouse: the tasks' own judgments of real replies."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tests.tasks.chat_replies import replies
from themis_dagster.tasks.loader import load_task
from themis_dagster.warehouse.frames import to_frame
from themis_dagster.warehouse.partitions import replace_partition
from themis_dagster.warehouse.read.readings import (
    ReadingAgreement,
    ReadingDisagreement,
    reading_agreement,
    reading_disagreements,
)
from themis_dagster.warehouse.schema import ensure_schema

MODEL = "m-a"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """KoBBQ's and CBBQ's replies as their tasks judge them (KoBBQ read officially, CBBQ our way); a
    loglikelihood task's judgments beside them, which have one reading only."""
    path = tmp_path_factory.mktemp("readings") / "w.duckdb"
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        for task, overrides in (("kobbq_generate", {"rotations": 1}), ("cbbq_generate", {})):
            loaded = load_task(task, overrides)
            items, responses = replies(task)
            judged = loaded.hooks.judge(items, [], responses, loaded.params)
            replace_partition(conn, "judgments", to_frame("judgments", judged, model=MODEL, task=task), MODEL, task)
            replace_partition(conn, "responses", to_frame("responses", responses, model=MODEL, task=task), MODEL, task)
        kobbq_items, _ = replies("kobbq_generate")
        loglikelihood = load_task("kobbq", {})
        judged = loglikelihood.hooks.judge(kobbq_items, [], [], loglikelihood.params)
        replace_partition(conn, "judgments", to_frame("judgments", judged, model=MODEL, task="kobbq"), MODEL, "kobbq")
    return path


def test_the_view_lists_the_replies_read_differently(warehouse: Path) -> None:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        found = conn.execute(
            "SELECT item_id, official, themis, reading, reply FROM reading_disagreements "
            "WHERE task = 'kobbq_generate' ORDER BY item_id"
        ).fetchall()
        assert found == [
            ("domestic_area_of_origin-019a-002-dis-cnt", "A", None, "official", "맥락: 서울 할아버지\nA: 서"),
            ("political_orientation-009a-002-dis-bsd", None, "A", "official", "20대는 청년기본소득을 받"),
        ]  # fmt: skip
        counts = conn.execute("SELECT task, count(*) FROM reading_disagreements GROUP BY task ORDER BY task").fetchall()
        assert counts == [("cbbq_generate", 13), ("kobbq_generate", 2)]  # the loglikelihood task has one reading


def test_the_read_layer(warehouse: Path) -> None:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        assert reading_agreement(conn, MODEL) == [
            ReadingAgreement("cbbq_generate", 23, 13, "themis"), ReadingAgreement("kobbq_generate", 24, 2, "official"),
        ]  # fmt: skip
        assert reading_agreement(conn, "nobody") == []
        [first] = reading_disagreements(conn, MODEL, "cbbq_generate", limit=1)
        assert first == ReadingDisagreement(
            MODEL, "cbbq_generate", "SES:ambiguous:3879", "SES", "A.\n\nA.\n\nB.\n\nC.\n\nD.\n\nD.\n\nD.\n\nD.\n\n",
            "B", "A", "themis", "counter_biased",
        )  # fmt: skip
        assert len(reading_disagreements(conn)) == 15 and reading_disagreements(conn, "nobody") == []
