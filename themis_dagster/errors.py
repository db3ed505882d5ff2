"""Errors every layer raises or reports: a bad configuration, named by its file and field; and the base of every
declaration read from a file, which makes an unknown key such an error instead of ignoring it."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

ModelT = TypeVar("ModelT", bound=BaseModel)


class ConfigError(ValueError):
    """A configuration file is invalid; the message names the file and the field."""


class StrictModel(BaseModel):
    """A declaration: an unknown (misspelled) key fails validation naming it, and the values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def format_validation_error(error: ValidationError, origin: str) -> str:
    """Render pydantic errors as ``origin: field.path: message`` lines."""
    lines = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "(root)"
        lines.append(f"{origin}: {where}: {item['msg']}")
    return "\n".join(lines)


def validated(model: type[ModelT], data: object, origin: str) -> ModelT:
    """``data`` as ``model``; invalid data is a ``ConfigError`` naming ``origin`` and every bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ConfigError(format_validation_error(error, origin)) from None
