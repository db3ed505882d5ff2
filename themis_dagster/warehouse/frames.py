"""Records <-> warehouse frames for every table, through the table's one declaration.

A record is a dataclass (``Item``, ``Request``, ``Response``, ``Judgment``, ``MetricValue``)
whose fields are named like its table's columns; the columns it does not have hold the
partition's constants (model, task, dataset hash, run id, time) and are passed by name.
JSON columns are encoded and decoded here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import polars as pl

from themis_dagster.warehouse.tables import SchemaMismatchError, Table, declared

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

RecordT = TypeVar("RecordT", bound="DataclassInstance")

# A string json.dumps writes unchanged between quotes: printable ASCII less '"' and '\'.
_NEEDS_ESCAPING = r"[^\x20\x21\x23-\x5b\x5d-\x7e]"


def _encode_json(value: Any) -> str | None:
    """A JSON column's text: keys sorted so equal values store equal text; None stays NULL."""
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


def json_strings(column: pl.Series) -> pl.Series:
    """Each value of a string column as ``json.dumps`` writes it (``null`` for None), a column at a time.

    For JSON text assembled column-wise (request fingerprints, a task's ``fields``) that must equal
    what ``json.dumps`` of the records would give.
    """
    quoted = pl.concat_str([pl.lit('"'), pl.col("s"), pl.lit('"')])
    frame = pl.DataFrame({"s": column}).with_row_index("_row")
    written = frame.select(quoted.fill_null("null").alias("s")).to_series()
    escaped = frame.filter(pl.col("s").str.contains(_NEEDS_ESCAPING))
    if escaped.height:
        values = [json.dumps(value) for value in escaped.get_column("s").to_list()]
        written = written.scatter(escaped.get_column("_row"), pl.Series(values, dtype=pl.String))
    return written


def _decode_json(text: str | None, field: dataclasses.Field[Any]) -> Any:
    """A JSON column's value; NULL reads as the field's default (an empty ``detail`` is ``{}``)."""
    if text is not None:
        return json.loads(text)
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None


def _frame(table: Table, rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    data = {
        column.name: [_encode_json(row[column.name]) if column.type.json else row[column.name] for row in rows]
        for column in table.columns
    }
    return pl.DataFrame(data, schema=table.frame_schema)


def rows_frame(table: str, rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """A frame of ``table`` from one mapping per row, each holding every column by name."""
    declaration = declared(table)
    for row in rows:
        declaration.check_columns(row.keys())
    return _frame(declaration, rows)


def to_frame(table: str, records: Sequence[DataclassInstance], **constants: Any) -> pl.DataFrame:
    """One row per record; ``constants`` fill the columns the records lack (the same in every row).

    Each record type's fields plus the constants must be exactly the table's columns. Built a
    column at a time (one list per column, no dict per row): this is on every stage's path.
    """
    declaration = declared(table)
    names = {kind: [field.name for field in dataclasses.fields(kind)] for kind in {type(record) for record in records}}
    for kind, fields in names.items():
        if overlap := sorted(constants.keys() & set(fields)):
            raise SchemaMismatchError(f"{table}: {overlap} given both as {kind.__name__} fields and constants")
        declaration.check_columns([*fields, *constants])
    if not records:
        return pl.DataFrame(schema=declaration.frame_schema)
    data: dict[str, list[Any]] = {}
    for column in declaration.columns:
        if column.name in constants:
            continue
        values = [getattr(record, column.name) for record in records]
        data[column.name] = [_encode_json(value) for value in values] if column.type.json else values
    schema = declaration.frame_schema
    frame = pl.DataFrame(data, schema={name: schema[name] for name in data})
    json_columns = declaration.json_columns
    filled = [
        pl.lit(_encode_json(value) if name in json_columns else value, dtype=schema[name]).alias(name)
        for name, value in constants.items()
    ]
    return frame.with_columns(filled).select(declaration.column_names)


def from_frame(table: str, frame: pl.DataFrame, record_type: type[RecordT]) -> list[RecordT]:
    """One ``record_type`` per row of a frame read from ``table`` (its other columns are left out).

    Read a column at a time (``to_list``), not a dict per row (``iter_rows``).
    """
    declaration = declared(table)
    fields = dataclasses.fields(record_type)
    unknown = sorted({field.name for field in fields} - set(declaration.column_names))
    if unknown:
        raise SchemaMismatchError(f"{table}: {record_type.__name__} has fields {unknown} the table does not")
    json_columns = declaration.json_columns
    # positional fields first, then keyword-only ones (Response's): no dict per row where none is needed
    ordered = sorted(fields, key=lambda field: bool(field.kw_only))
    columns = []
    for field in ordered:
        values = frame.get_column(field.name).to_list()
        columns.append([_decode_json(value, field) for value in values] if field.name in json_columns else values)
    if _plain(record_type, fields):
        return _assembled(record_type, [field.name for field in ordered], columns)
    positional = sum(1 for field in ordered if not field.kw_only)
    if positional == len(ordered):
        return [record_type(*row) for row in zip(*columns, strict=True)]
    keywords = [field.name for field in ordered[positional:]]
    return [
        record_type(*row[:positional], **dict(zip(keywords, row[positional:], strict=True)))
        for row in zip(*columns, strict=True)
    ]


def _plain(record_type: type[Any], fields: tuple[dataclasses.Field[Any], ...]) -> bool:
    """Whether ``__init__`` only stores its arguments (no ``__post_init__``, no slots, every field an argument)."""
    return (
        not hasattr(record_type, "__post_init__")
        and not hasattr(record_type, "__slots__")
        and all(field.init for field in fields)
    )


def _assembled(record_type: type[RecordT], names: list[str], columns: list[list[Any]]) -> list[RecordT]:
    """One record per row, its attributes set as ``__init__`` would set them, without calling it per row.

    A frozen dataclass's ``__init__`` goes through ``object.__setattr__`` once per field: for a
    million responses, that was most of reading them. The records are equal to ``__init__``'s
    (tests/evaluation/test_chain_scale.py).
    """
    new = object.__new__
    records = []
    for row in zip(*columns, strict=True):
        record = new(record_type)
        record.__dict__.update(zip(names, row, strict=True))
        records.append(record)
    return records


def iter_records(table: str, frame: pl.DataFrame, record_type: type[RecordT], rows: int) -> Iterator[list[RecordT]]:
    """``from_frame`` ``rows`` rows at a time, in the frame's order: never a partition's records all at once."""
    for start in range(0, frame.height, rows):
        yield from_frame(table, frame.slice(start, rows), record_type)
