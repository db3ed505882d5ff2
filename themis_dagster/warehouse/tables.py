"""Every warehouse table, declared once: the DDL, the column order and the frame schema follow.

The platform's tables are declared here; a family's own (LangBiTe's reports) in its ``family.yaml``
(``tables:``, read by ``family_tables``), and added after them.

Each stage of the asset chain owns one table keyed by (model, task); a materialization
replaces its partition's rows in one transaction. Column order is the contract: writers
name their columns explicitly, so a frame's own order never matters. Existing warehouses
were created from these same names, types and keys; change them only with a migration. A
nullable column appended to a declaration is one: ``ensure_schema`` adds it to older tables.
Keys are kept unique by the writers; warehouses created before that also hold them as a
PRIMARY KEY constraint, which they keep (slower to write; ``Table.ddl``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import polars as pl
from pydantic import Field

from themis_dagster.errors import ConfigError, StrictModel, validated
from themis_dagster.settings import FAMILIES_DIR, family_sections


@dataclass(frozen=True)
class ColumnType:
    """A column's type in DuckDB and in polars; ``json`` columns hold encoded Python values."""

    sql: str
    frame: pl.DataType
    json: bool = False


TEXT = ColumnType("VARCHAR", pl.String())
JSON = ColumnType("JSON", pl.String(), json=True)
DOUBLE = ColumnType("DOUBLE", pl.Float64())
INTEGER = ColumnType("INTEGER", pl.Int32())
BOOLEAN = ColumnType("BOOLEAN", pl.Boolean())
TIMESTAMP = ColumnType("TIMESTAMP", pl.Datetime("us"))


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    comment: str = ""
    nullable: bool = True


def required(name: str, type_: ColumnType, comment: str = "") -> Column:
    """A NOT NULL column."""
    return Column(name, type_, comment, nullable=False)


class SchemaMismatchError(ValueError):
    """A frame or record does not have exactly the columns of the table it is written to."""


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    # The columns that identify a row; unique by construction, not by a DuckDB constraint (``ddl``).
    primary_key: tuple[str, ...] = ()
    comment: str = ""

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.columns)

    @property
    def frame_schema(self) -> dict[str, pl.DataType]:
        return {column.name: column.type.frame for column in self.columns}

    @property
    def json_columns(self) -> frozenset[str]:
        return frozenset(column.name for column in self.columns if column.type.json)

    def check_columns(self, names: Iterable[str]) -> None:
        """Raise SchemaMismatchError unless ``names`` are exactly this table's columns (in any order)."""
        given, wanted = set(names), set(self.column_names)
        if given != wanted:
            missing, extra = sorted(wanted - given), sorted(given - wanted)
            raise SchemaMismatchError(f"{self.name}: missing columns {missing}, unexpected columns {extra}")

    def ddl(self, constraints: bool = False) -> str:
        """``CREATE TABLE IF NOT EXISTS`` for this table (names and types are constants, never values).

        Without the PRIMARY KEY by default: ``primary_key`` is kept unique by the writers
        (``partitions.replace_rows``: a frame's keys are checked distinct, and a partition's rows
        are deleted and inserted in one transaction), on DuckDB files as on DuckLake, which
        rejects the constraint. DuckDB's index made a re-run's replacement of a million rows
        14 to 22 times the CPU (``bench/judge_and_keys.py``). ``constraints=True``:
        the DDL warehouses were created with before, which they keep.
        """
        lines = [
            f"{quote(column.name)} {column.type.sql}{'' if column.nullable else ' NOT NULL'}" for column in self.columns
        ]
        if self.primary_key and constraints:
            lines.append(f"PRIMARY KEY ({', '.join(quote(name) for name in self.primary_key)})")
        body = ",\n".join(f"    {line}" for line in lines)
        return f"CREATE TABLE IF NOT EXISTS {quote(self.name)} (\n{body}\n);"

    def missing_columns_ddl(self, existing: Iterable[str]) -> list[str]:
        """``ALTER TABLE`` statements adding the declared nullable columns a table with ``existing`` lacks.

        A table created from an earlier declaration gets the columns appended since; its old
        rows hold NULL there. A missing NOT NULL column has no value to fill and is left alone.
        """
        present = set(existing)
        return [
            f"ALTER TABLE {quote(self.name)} ADD COLUMN IF NOT EXISTS {quote(column.name)} {column.type.sql}"
            for column in self.columns
            if column.nullable and column.name not in present
        ]


def quote(identifier: str) -> str:
    """Quote a declared identifier (a family's table may name columns with spaces, as LangBiTe's reports do)."""
    return '"' + identifier.replace('"', '""') + '"'


_MODEL = required("model", TEXT)
_TASK = required("task", TEXT)


def _partitioned(name: str, comment: str, columns: tuple[Column, ...], key: str | None = None) -> Table:
    """A table keyed by (model, task): a stage's rows, replaced a partition at a time."""
    return Table(name, (_MODEL, _TASK, *columns), ("model", "task", key) if key else (), comment)


def _paired_difference(other: str, value: str, other_value: str, p_value: str, n_pairs: str) -> tuple[Column, ...]:
    """One metric's paired difference against ``other`` on the same items (a baseline model, the unperturbed
    original): both values, their difference with its paired-bootstrap CI and p-value, and how many pairs."""
    return (
        Column("subset", TEXT, "NULL: the task's headline value"),
        required("metric", TEXT),
        Column("value", DOUBLE, value),
        Column(f"{other}_value", DOUBLE, other_value),
        Column("difference", DOUBLE, f"value - {other}_value"),
        Column("ci_low", DOUBLE, "paired-bootstrap CI of the difference"),
        Column("ci_high", DOUBLE),
        Column("p_value", DOUBLE, p_value),
        required("n_pairs", INTEGER, n_pairs),
    )


_REQUEST_ID = (required("request_id", TEXT), required("item_id", TEXT))
_METRIC = (
    Column("subset", TEXT, "NULL: the task's headline value"),
    required("metric", TEXT),
    Column("value", DOUBLE),
    Column("ci_low", DOUBLE),
    Column("ci_high", DOUBLE),
    required("n", INTEGER),
    required("materialized_at", TIMESTAMP),
    required("run_id", TEXT),
)

TABLES: dict[str, Table] = {table.name: table for table in (
    _partitioned("task_items", "The task's benchmark items.", key="item_id", columns=(
        required("item_id", TEXT), Column("subset", TEXT, "the slice an item belongs to (bias type, category)"),
        required("fields", JSON, "the item as the benchmark file has it"), required("dataset_sha256", TEXT),
    )),
    _partitioned("prompts", "One row per engine request.", key="request_id", columns=(
        *_REQUEST_ID, required("request_type", TEXT, "loglikelihood | generate | chat"),
        Column("context", TEXT, "loglikelihood: the conditioning text"),
        Column("continuation", TEXT, "loglikelihood: the scored text"),
        Column("prompt", TEXT, "generate / chat: the user-visible prompt"),
        Column("messages", JSON, "chat: the conversation sent"),
        Column("template", TEXT, "template name (NULL when none)"), Column("template_sha256", TEXT),
        Column("gen_params", JSON),
    )),
    _partitioned("responses", "The engine's answer to every request.", key="request_id", columns=(
        *_REQUEST_ID, required("request_type", TEXT),
        Column("logprob", DOUBLE), Column("is_greedy", BOOLEAN), Column("text", TEXT),
        Column("prompt_text", TEXT, "generate / chat: exactly what the model saw"),
        Column("n_prompt_tokens", INTEGER), Column("n_output_tokens", INTEGER), Column("finish_reason", TEXT),
        Column("latency_s", DOUBLE, "the request's share of its batch's wall time"), Column("error", TEXT),
        Column("n_continuation_tokens", INTEGER,
               "loglikelihood: tokens scored; n_prompt_tokens - n_continuation_tokens is the context"),
        Column("reasoning", TEXT, "a reasoning model's thinking, split from text (the final answer) by its vLLM "
               "reasoning parser; '' opened and empty, NULL none"),
        Column("n_reasoning_tokens", INTEGER, "tokens of the reasoning (NULL: not a reasoning model's reply)"),
    )),
    _partitioned("judgments", "One judgment per item (or per attempt).", key="item_id", columns=(
        required("item_id", TEXT), Column("subset", TEXT),
        Column("outcome", TEXT, "the judgment in words (e.g. stereotype, anti, unparsed)"),
        Column("score", DOUBLE, "the item's contribution to the headline metric"),
        required("parsed", BOOLEAN, "false: the reply could not be interpreted"), Column("detail", JSON),
        Column("refused", BOOLEAN, "the refusal detector's verdict on the reply (refusals); NULL: no reply "
               "read (a loglikelihood task, an engine failure)"),
    )),
    _partitioned("metric_values", "The latest metrics of every (model, task) partition.", _METRIC),
    _partitioned("metric_history", "Append-only: every materialization's metrics, across re-runs.", _METRIC),
    _partitioned("evaluation_runs", "One row per materialized evaluation: the configuration that produced it.", (
        required("run_id", TEXT), required("materialized_at", TIMESTAMP), required("config", JSON),
    )),
    _partitioned("stage_generations", "Which materialization of each stage a partition holds, and its source.",
                 key="stage", columns=(
        required("stage", TEXT, "the stage's table: task_items, prompts, responses, judgments, metric_values"),
        required("materialization", TEXT, "this write's id, new on every materialization of the stage"),
        Column("upstream_materialization", TEXT, "the upstream stage's materialization it was computed from"),
        required("generation", TEXT, "the partition's generation: the task_items materialization it descends from"),
        required("run_id", TEXT), required("written_at", TIMESTAMP),
    )),
    Table("leaderboard", (
        _TASK, required("metric", TEXT), required("rank", INTEGER), _MODEL,
        Column("value", DOUBLE), Column("ci_low", DOUBLE), Column("ci_high", DOUBLE), required("n", INTEGER),
        Column("ideal", DOUBLE), required("materialized_at", TIMESTAMP),
    ), comment="Headline metrics ranked per task and metric."),
)}  # fmt: skip


def _request_cache(responses: Table) -> Table:
    """What a response says, keyed by the fingerprint of what determines it rather than by who asked.

    A chunk of answers is appended here as soon as the engine returns it, so a killed run
    resumes from what it had, and the same request for the same model is never computed
    twice. No PRIMARY KEY (DuckLake has none): writers insert only fingerprints not yet present.
    """
    who_asked = {"model", "task", "request_id", "item_id", "error"}
    answer = tuple(column for column in responses.columns if column.name not in who_asked)
    return Table(
        "request_cache",
        (
            required("fingerprint", TEXT, "sha256 of the model fingerprint, the request's content and its sampling"),
            required("model", TEXT, "the model id whose run computed it"),
            *answer,
            required("cached_at", TIMESTAMP),
        ),
        comment="Answers by request fingerprint, committed a chunk at a time.",
    )


TABLES["request_cache"] = _request_cache(TABLES["responses"])

# Paired comparisons (themis_dagster/comparisons): one row per (model, baseline, task, subset,
# metric), replaced per (model, baseline, task); the ``comparisons`` view adds Holm's p_adjusted.
TABLES["comparison_results"] = Table(
    "comparison_results",
    (
        _MODEL,
        required("baseline", TEXT, "the model compared against (the parent, or the one asked for)"),
        _TASK,
        *_paired_difference(
            "baseline", "the model's metric on the paired items", "", "two-sided, before Holm", "items both models have"
        ),
        required("test", TEXT, "mcnemar_exact | sign_flip_permutation | paired_bootstrap"),
        Column("permutations", INTEGER, "sign patterns (exact: all 2^n) or bootstrap resamples used"),
        required("origin", TEXT, "parent: the model's lineage; requested: themis compare or the compare job"),
        required("materialized_at", TIMESTAMP),
        required("run_id", TEXT),
    ),
    comment="Paired comparisons of two models on the same items, before the battery's Holm adjustment.",
)
# Perturbation effects (themis_dagster/comparisons/perturbations.py): a task's variant partition against the
# original, one row per (model, variant, scope, subset, metric), replaced per (model, variant); the
# ``perturbation_effects`` view adds Holm's p_adjusted over each (model, scope) battery.
TABLES["perturbation_effect_results"] = _partitioned(
    "perturbation_effect_results",
    "The paired effect of each perturbation on each headline metric, before the battery's Holm adjustment.",
    (
        required("base_task", TEXT, "the task the variant perturbs"),
        required("perturbation", TEXT),
        required("perturbation_key", TEXT, "sha256 of the perturbation's name, direction and list hash"),
        required("scope", TEXT, "changed: the items it rewrote; all: every item"),
        *_paired_difference(
            "original",
            "the metric on the perturbed items",
            "the metric on the same items unperturbed",
            "two-sided, the metric's declared test, before Holm",
            "items (or resampling units) compared",
        ),
        required("n_changed", INTEGER, "items whose requests the perturbation rewrote"),
        required("n_unchanged", INTEGER, "items it left as they were: counted, never compared as changed"),
        required("test", TEXT, "mcnemar_exact | sign_flip_permutation | paired_bootstrap"),
        Column("permutations", INTEGER),
        required("materialized_at", TIMESTAMP),
        required("run_id", TEXT),
    ),
)
TABLES["comparison_gates"] = Table("comparison_gates", (
    _TASK, required("metric", TEXT), required("margin", DOUBLE, "how far from the ideal counts"),
    required("alpha", DOUBLE, "family-wise level, on Holm's p_adjusted"),
    Column("ideal", DOUBLE, "the metric's unbiased value (NULL: direction from higher_is_better)"),
    Column("higher_is_better", BOOLEAN),
), comment="The regression gates of data/gates.yaml, as last loaded.")  # fmt: skip

# Judge calibration (assets/judge_calibration.py): a judge model's labels of a human-labelled calibration
# set (judging/calibration_sets.py) and its agreement with them, replaced per (judge, calibration_set).
_JUDGE = required("judge", TEXT, "the judge's registered model id")
_CALIBRATION_SET = required("calibration_set", TEXT, "the calibration set's name (judging/calibration_sets.py)")
TABLES["judge_calibration_labels"] = Table(
    "judge_calibration_labels",
    (
        _JUDGE,
        _CALIBRATION_SET,
        required("item_id", TEXT, "where the row comes from (file and line, model and id)"),
        Column("context", TEXT, "what the judged text answers (XSTest: the prompt)"),
        required("text", TEXT),
        required("human_label", TEXT),
        Column("judge_label", TEXT, "NULL: the judge's answer could not be read"),
        Column("reply", TEXT, "the judge's reply, its first 200 characters"),
        Column("error", TEXT),
        required("run_id", TEXT),
        required("materialized_at", TIMESTAMP),
    ),
    ("judge", "calibration_set", "item_id"),
    "A judge's label of every text of a calibration set, beside the human's.",
)
TABLES["judge_calibration_metrics"] = Table(
    "judge_calibration_metrics",
    (
        _JUDGE,
        _CALIBRATION_SET,
        required("metric", TEXT, "accuracy | kappa | sensitivity | specificity | confusion | unreadable_share"),
        Column(
            "label", TEXT, "sensitivity / specificity: the class (one against the rest); confusion: the human label"
        ),
        Column("judge_label", TEXT, "confusion: the judge's label"),
        Column("value", DOUBLE, "confusion: the count of rows"),
        Column("ci_low", DOUBLE),
        Column("ci_high", DOUBLE),
        required("n", INTEGER, "calibration rows the value rests on (the judge's readable answers)"),
        required("run_id", TEXT),
        required("materialized_at", TIMESTAMP),
    ),
    comment="A judge's agreement with the human labels of a calibration set, with bootstrap CIs.",
)
# Judged metrics (a metric counting a class a judge model gave): its judge, the judge's kappa on its
# calibration set and the value corrected for the judge's measured confusion matrix; replaced with the
# partition's metric_values. corrected NULL: note says why (uncalibrated judge, a judge no better than chance).
TABLES["judged_metrics"] = Table("judged_metrics", (
    _MODEL, _TASK, Column("subset", TEXT, "NULL: the task's headline value"), required("metric", TEXT),
    required("judge", TEXT), Column("calibration_set", TEXT, "NULL: the judge has no calibration for this label"),
    Column("kappa", DOUBLE, "the judge's Cohen's kappa on the calibration set"),
    Column("kappa_ci_low", DOUBLE), Column("kappa_ci_high", DOUBLE),
    Column("value", DOUBLE, "the metric as judged (as in metric_values)"),
    Column("corrected", DOUBLE, "the metric with the judge's errors corrected (confusion-matrix inversion)"),
    Column("corrected_ci_low", DOUBLE, "bootstrap over the judged items and the calibration rows"),
    Column("corrected_ci_high", DOUBLE), Column("n_calibration", INTEGER),
    Column("note", TEXT, "why there is no corrected value (uncalibrated judge, no better than chance)"),
    required("run_id", TEXT), required("materialized_at", TIMESTAMP),
), comment="Every judged metric's judge, its kappa and its corrected value.")  # fmt: skip


COLUMN_TYPES = {"TEXT": TEXT, "JSON": JSON, "DOUBLE": DOUBLE, "INTEGER": INTEGER, "BOOLEAN": BOOLEAN,
                "TIMESTAMP": TIMESTAMP}  # fmt: skip
"""A declared column's ``type``, by name."""


class DeclaredColumn(StrictModel):
    """A column of a family's table: as ``Column`` above, its type by name (``COLUMN_TYPES``)."""

    name: str = Field(min_length=1)
    type: Literal["TEXT", "JSON", "DOUBLE", "INTEGER", "BOOLEAN", "TIMESTAMP"]
    required: bool = False
    comment: str = ""


class DeclaredTable(StrictModel):
    """A table a family declares (``tables:`` of its ``family.yaml``): its columns in order, key and comment."""

    columns: tuple[DeclaredColumn, ...] = Field(min_length=1)
    key: tuple[str, ...] = ()
    comment: str = ""

    def table(self, name: str) -> Table:
        columns = tuple(Column(c.name, COLUMN_TYPES[c.type], c.comment, nullable=not c.required) for c in self.columns)
        return Table(name, columns, self.key, self.comment)


_PLATFORM_TABLES = frozenset(TABLES)


def family_tables(root: Path = FAMILIES_DIR) -> dict[str, Table]:
    """The tables the families declare (LangBiTe's reports and generated templates), by name, in family order.

    A family owns the tables its extension points write; the warehouse creates them beside its own.
    A declaration that is not a table fails naming the family and the field.
    """
    found: dict[str, Table] = {}
    for family, section in family_sections("tables", root).items():
        for name, raw in dict(section).items():
            where = f"family {family!r}: tables.{name}"
            if name in _PLATFORM_TABLES or name in found:
                raise ConfigError(f"{where}: a warehouse table of that name is already declared")
            found[name] = validated(DeclaredTable, raw, where).table(name)
    return found


TABLES.update(family_tables())


def declared(name: str) -> Table:
    """The declared table called ``name``; KeyError for anything else (names reach SQL only from here)."""
    if name not in TABLES:
        raise KeyError(f"unknown warehouse table {name!r}")
    return TABLES[name]
