"""Calibration sets a user declares: their own CSV of (text, label) rows for a judge question the project asks.

A judged outcome without a published human-labelled set here (BOLD's toxicity, LangBiTe's
verdicts) can still be checked: the user labels replies themselves and declares the file in the
calibration-set file (``Settings.calibration_sets_file``, ``THEMIS_CALIBRATION_SETS``; default
``data/calibration_sets.yaml``) with the judge question it checks, its label set, source and
licence. Each declared set becomes a partition of ``judge_calibration`` like the published ones.
A malformed declaration fails when the definitions load, naming the file, the entry and the
field, so no engine ever starts on it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, ValidationError

from themis_dagster.errors import ConfigError, StrictModel, load_yaml
from themis_dagster.judging.calibration_sets import CalibrationSet, load_csv_calibration_set


class DeclaredCsvSet(StrictModel):
    """One user calibration set: a CSV with a header, the judge question it checks, its labels, source and licence.

    ``path`` is read relative to the declaration file's folder; ``label_names`` renames the file's
    labels (``{"1": "toxic"}``) before they are checked against ``labels``.
    """

    name: str = Field(pattern=r"^[a-z0-9_]{1,48}$", description="The partition key: lower-case, digits, underscores.")
    task: str = Field(min_length=1, description="The task whose judge is checked (e.g. bold).")
    question: str = Field(min_length=1, description="The judge's question kind (e.g. toxicity).")
    path: Path
    labels: tuple[str, ...]
    source: str = Field(min_length=1)
    license: str = Field(min_length=1)
    text_column: str = "text"
    label_column: str = "label"
    context_column: str | None = None
    label_names: dict[str, str] = Field(default_factory=dict)

    def load(self, base: Path) -> CalibrationSet:
        """The file read and validated (``ConfigError`` naming the field and row)."""
        path = self.path if self.path.is_absolute() else base / self.path
        if not path.is_file():
            raise ConfigError(f"calibration set {self.name!r}: field 'path' is {str(path)!r}, which is not a file")
        return load_csv_calibration_set(
            path,
            self.labels,
            license=self.license,
            source=self.source,
            name=self.name,
            text_column=self.text_column,
            label_column=self.label_column,
            context_column=self.context_column,
            label_names=self.label_names,
        )


def read_declared_sets(path: Path | None) -> tuple[DeclaredCsvSet, ...]:
    """The sets declared in ``path`` (``calibration_sets:`` a list); none when the file does not exist."""
    if path is None or not path.is_file():
        return ()
    document = load_yaml(path.read_text(encoding="utf-8")) or {}
    entries = document.get("calibration_sets") if isinstance(document, dict) else None
    if entries is None:
        return ()
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: field 'calibration_sets' must be a list of calibration sets")
    declared: list[DeclaredCsvSet] = []
    for number, entry in enumerate(entries, start=1):
        try:
            declared.append(DeclaredCsvSet.model_validate(entry))
        except ValidationError as error:
            problem = error.errors()[0]
            field = ".".join(str(part) for part in problem["loc"]) or "entry"
            raise ConfigError(f"{path}: calibration set {number}: field {field!r}: {problem['msg']}") from None
    names = [entry.name for entry in declared]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"{path}: field 'name' repeats {', '.join(map(repr, repeated))}")
    return tuple(declared)
