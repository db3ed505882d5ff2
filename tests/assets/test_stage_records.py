"""Records read from frames without ``__init__`` per row, and a chunk's requests built only when judged by them."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from themis_dagster.evaluation.lazy_records import LazyRecords
from themis_dagster.exchange import Request, Response
from themis_dagster.tasks.spec import Item, Judgment
from themis_dagster.warehouse import frames
from themis_dagster.warehouse.frames import from_frame, to_frame


def test_records_read_from_a_frame_equal_records_built_by_init() -> None:
    requests = [
        Request("r0", "i0", "chat", messages=[{"role": "user", "content": "é"}], gen_params={"seed": 1}),
        Request.loglikelihood("c", "d", "r1", "i1"),
    ]
    responses = [requests[1].scored(-1.0, True, n_prompt_tokens=2, n_continuation_tokens=1), Response("r2", "i2")]
    judgments = [Judgment("i0", "s", "o", 1.0, True, {"k": [1, 2]}), Judgment("i1", None, "o", None, False, {})]
    items = [Item("i0", "s", {"a": 1}), Item("i1", None, {})]
    for table, records in (("prompts", requests), ("responses", responses), ("judgments", judgments)):
        read = from_frame(table, to_frame(table, records, model="m", task="t"), type(records[0]))
        assert read == records and [vars(r).keys() for r in read] == [vars(r).keys() for r in records]
    assert (
        from_frame("task_items", to_frame("task_items", items, model="m", task="t", dataset_sha256="x"), Item) == items
    )


def test_a_record_type_with_post_init_is_still_built_by_init() -> None:
    @dataclass(frozen=True)
    class Checked:
        item_id: str

        def __post_init__(self) -> None:
            object.__setattr__(self, "item_id", self.item_id.upper())

    assert not frames._plain(Checked, Checked.__dataclass_fields__.values())  # type: ignore[arg-type]
    assert from_frame("task_items", pl.DataFrame({"item_id": ["a"]}), Checked) == [Checked("A")]


def test_lazy_records_are_built_on_first_look_only() -> None:
    built: list[int] = []

    def build() -> list[int]:
        built.append(1)
        return [3, 4]

    lazy = LazyRecords(build)
    assert built == []
    assert len(lazy) == 2 and list(lazy) == [3, 4] and lazy[1] == 4 and lazy == [3, 4] and lazy + [5] == [3, 4, 5]  # noqa: RUF005 - the operator is what is tested
    assert built == [1]
