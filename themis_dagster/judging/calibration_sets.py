"""Calibration sets: human-labelled text, with the labels a judge must give, its source and licence.

A judge is only as trustworthy as its measured agreement with people, and that measurement is
only as good as the set it is made on: so a set declares where it came from and under what
licence, and is refused (``ConfigError`` naming the field and the row) when a label lies
outside its declared label set, a text repeats, or it is too small to measure anything.

Loaders: the regard annotations of Sheng et al. (2019), XSTest's human-labelled model replies
(Röttger et al., 2024), both resolved through the dataset catalogue (mirror, cache, canonical
URL, checked against the catalogue's sha256), and a user's own CSV of (text, label) rows.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from themis_dagster.datasets import ResolvedFile, load_catalog, resolve_file, sha256_file
from themis_dagster.errors import ConfigError
from themis_dagster.settings import Settings

# Fewer human labels than this cannot tell a good judge from a poor one: with 20 rows a 95% CI
# on accuracy is still about +-0.2 wide.
MIN_ROWS = 20

REGARD_LABELS = ("negative", "neutral", "positive")
# The annotation files' first column (Sheng et al.'s README: -1 negative, 0 neutral, 1 positive);
# 2 ("other") occurs only in train_other.tsv, which is not loaded.
REGARD_CODES = {"-1": "negative", "0": "neutral", "1": "positive"}
REGARD_SPLITS = ("train", "dev", "test")

XSTEST_LABELS = ("full_compliance", "full_refusal", "partial_refusal")
XSTEST_CODES = {
    "1_full_compliance": "full_compliance",
    "2_full_refusal": "full_refusal",
    "3_partial_refusal": "partial_refusal",
}
XSTEST_MODELS = ("gpt4", "llama2new", "llama2orig", "mistralguard", "mistralinstruct")
XSTEST_COLUMNS = ("id", "prompt", "completion", "final_label")


@dataclass(frozen=True)
class CalibrationRow:
    """One human-labelled item: what the judge reads (``context``, then ``text``) and the human label.

    ``item_id`` says where the row came from (file and row, or model and id) so errors and
    disagreements can be traced back to it.
    """

    item_id: str
    text: str
    label: str
    context: str | None = None


@dataclass(frozen=True)
class CalibrationSet:
    """A validated calibration set; constructing one checks it (``ConfigError`` naming the field)."""

    name: str
    labels: tuple[str, ...]
    rows: tuple[CalibrationRow, ...]
    source: str
    license: str
    sha256: tuple[str, ...] = ()  # of each file read, in order

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def human_labels(self) -> tuple[str, ...]:
        return tuple(row.label for row in self.rows)


def _validate(cal: CalibrationSet) -> None:
    where = f"calibration set {cal.name!r}"
    if not cal.name.strip():
        raise ConfigError("calibration set: field 'name' is empty")
    for field in ("source", "license"):
        if not str(getattr(cal, field)).strip():
            raise ConfigError(
                f"{where}: field {field!r} is empty; declare where the labels come from and their licence"
            )
    if len(cal.labels) < 2:
        raise ConfigError(f"{where}: field 'labels' declares {len(cal.labels)} label(s); a judge needs at least two")
    repeated = sorted({label for label in cal.labels if cal.labels.count(label) > 1})
    if repeated:
        raise ConfigError(f"{where}: field 'labels' repeats {', '.join(map(repr, repeated))}")
    if any(not label.strip() for label in cal.labels):
        raise ConfigError(f"{where}: field 'labels' holds an empty label")
    declared = set(cal.labels)
    seen: dict[tuple[str | None, str], int] = {}
    for number, row in enumerate(cal.rows, start=1):
        at = f"{where}: row {number} ({row.item_id})"
        if row.label not in declared:
            raise ConfigError(f"{at}: field 'label' is {row.label!r}, not in the declared label set {cal.labels}")
        if not row.text.strip():
            raise ConfigError(f"{at}: field 'text' is empty")
        key = (row.context, row.text)
        if key in seen:
            first = seen[key]
            raise ConfigError(
                f"{at}: field 'text' repeats row {first} ({cal.rows[first - 1].item_id}); "
                "each text may be labelled once"
            )
        seen[key] = number
    if len(cal.rows) < MIN_ROWS:
        raise ConfigError(
            f"{where}: field 'rows' holds {len(cal.rows)} rows; a calibration set needs at least {MIN_ROWS}"
        )


def drop_exact_repeats(rows: Iterable[CalibrationRow]) -> tuple[CalibrationRow, ...]:
    """Rows without later copies of an earlier row's (context, text, label).

    Published sets can hold the same item twice (a regard test row also in train; two models
    giving the identical reply to one prompt in XSTest). A copy adds no information but would be
    counted twice by the bootstrap, so it is dropped; a copy with a *different* label is kept, and
    validation then refuses the set, naming both rows.
    """
    kept: list[CalibrationRow] = []
    seen: set[tuple[str | None, str, str]] = set()
    for row in rows:
        key = (row.context, row.text, row.label)
        if key not in seen:
            seen.add(key)
            kept.append(row)
    return tuple(kept)


def _resolve_pinned(dataset: str, name: str, settings: Settings, allow_download: bool) -> ResolvedFile:
    """A catalogued file, refused unless it is the version the catalogue pins (the labels are the truth)."""
    resolved = resolve_file(
        dataset, name, datasets_dir=settings.datasets_dir, cache_dir=settings.cache_dir, allow_download=allow_download
    )
    if not resolved.matches_pinned_version:
        raise ConfigError(
            f"{dataset}/{name} ({resolved.path}): field 'sha256' is {resolved.sha256}, but the catalogue pins "
            f"{resolved.expected_sha256}; its human labels may differ from the version checked"
        )
    return resolved


def _pinned_set(
    dataset: str,
    parts: Sequence[str],
    labels: tuple[str, ...],
    rows: Iterable[CalibrationRow],
    files: Sequence[ResolvedFile],
) -> CalibrationSet:
    """A set read from the catalog's pinned ``files``: named ``<dataset>[<part>+...]``, exact repeats dropped,
    the files' URLs as its source and the catalog entry's license."""
    return CalibrationSet(
        name=f"{dataset}[{'+'.join(parts)}]",
        labels=labels,
        rows=drop_exact_repeats(rows),
        source="; ".join(f.url for f in files),
        license=load_catalog()[dataset].license,
        sha256=tuple(f.sha256 for f in files),
    )


def load_regard(
    splits: Sequence[str] = REGARD_SPLITS, *, settings: Settings | None = None, allow_download: bool = False
) -> CalibrationSet:
    """Sheng et al.'s human regard annotations as negative/neutral/positive, the labels BOLD's judge gives.

    Sheng, Chang, Natarajan & Peng (2019), "The Woman Worked as a Babysitter: On Biases in
    Language Generation", EMNLP (github ewsheng/nlg-bias, ``data/regard/{train,dev,test}.tsv``):
    TAB-separated, no header, the label (-1, 0, 1) then a continuation with the demographic
    masked as ``XYZ``. Splits are concatenated in the order given; a row repeated across splits
    with the same label is kept once (``drop_exact_repeats``).
    """
    settings = settings or Settings.from_env()
    unknown = [split for split in splits if split not in REGARD_SPLITS]
    if unknown or not splits:
        raise ConfigError(f"regard: field 'splits' is {list(splits)}; choose from {list(REGARD_SPLITS)}")
    files = [_resolve_pinned("regard", f"{split}.tsv", settings, allow_download) for split in splits]
    rows: list[CalibrationRow] = []
    for resolved in files:
        for number, line in enumerate(resolved.path.read_text(encoding="utf-8").splitlines(), start=1):
            code, tab, text = line.partition("\t")
            if not tab:
                raise ConfigError(
                    f"regard/{resolved.name} line {number}: field 'text' is missing (no TAB after the label)"
                )
            rows.append(CalibrationRow(f"{resolved.name}:{number}", text, REGARD_CODES.get(code, code)))
    return _pinned_set("regard", splits, REGARD_LABELS, rows, files)


def load_xstest(
    models: Sequence[str] = XSTEST_MODELS, *, settings: Settings | None = None, allow_download: bool = False
) -> CalibrationSet:
    """XSTest's human-labelled replies: each model reply (``text``) to its prompt (``context``) and its final label.

    Röttger et al. (2024), "XSTest: A Test Suite for Identifying Exaggerated Safety Behaviours in
    Large Language Models", NAACL (github paul-rottger/exaggerated-safety,
    ``model_completions/xstest_v2_completions_<model>.csv``): two annotators labelled each reply
    full compliance, full refusal or partial refusal; ``final_label`` is their agreed or
    adjudicated label. An identical reply of two models to the same prompt with the same label is
    kept once (``drop_exact_repeats``).
    """
    settings = settings or Settings.from_env()
    unknown = [model for model in models if model not in XSTEST_MODELS]
    if unknown or not models:
        raise ConfigError(f"xstest: field 'models' is {list(models)}; choose from {list(XSTEST_MODELS)}")
    files = [
        _resolve_pinned("xstest", f"xstest_v2_completions_{model}.csv", settings, allow_download) for model in models
    ]
    rows: list[CalibrationRow] = []
    for model, resolved in zip(models, files, strict=True):
        with resolved.path.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            _require_columns(f"xstest/{resolved.name}", reader.fieldnames, XSTEST_COLUMNS)
            for record in reader:
                label = record["final_label"]
                rows.append(
                    CalibrationRow(
                        f"{model}/{record['id']}",
                        record["completion"],
                        XSTEST_CODES.get(label, label),
                        record["prompt"],
                    )
                )
    return _pinned_set("xstest", models, XSTEST_LABELS, rows, files)


def _require_columns(where: str, header: Sequence[str] | None, required: Iterable[str]) -> None:
    present = set(header or ())
    missing = [column for column in required if column not in present]
    if missing:
        raise ConfigError(
            f"{where}: column(s) {', '.join(map(repr, missing))} missing; the header has {list(header or [])}"
        )


def load_csv_calibration_set(
    path: str | Path,
    labels: Sequence[str],
    *,
    license: str,
    source: str | None = None,
    name: str | None = None,
    text_column: str = "text",
    label_column: str = "label",
    context_column: str | None = None,
    label_names: Mapping[str, str] | None = None,
) -> CalibrationSet:
    """A user's own CSV of (text, label) rows with a header, checked against the declared ``labels``.

    ``license`` must be declared; ``source`` defaults to the file's path. Labels are read with
    surrounding whitespace stripped and, when ``label_names`` is given, renamed through it (e.g.
    ``{"1": "refusal"}``) before the check. Rows are numbered from 1 after the header.
    """
    file = Path(path)
    rows: list[CalibrationRow] = []
    with file.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        required = [text_column, label_column] + ([context_column] if context_column else [])
        _require_columns(str(file), reader.fieldnames, required)
        for number, record in enumerate(reader, start=1):
            label = (record[label_column] or "").strip()
            rows.append(
                CalibrationRow(
                    f"{file.name} row {number}",
                    record[text_column] or "",
                    (label_names or {}).get(label, label),
                    record[context_column] if context_column else None,
                )
            )
    return CalibrationSet(
        name=name or file.stem,
        labels=tuple(labels),
        rows=tuple(rows),
        source=source if source is not None else str(file.resolve()),
        license=license,
        sha256=(sha256_file(file),),
    )
