"""Errors every layer raises or reports: a bad configuration, named by its file and field."""

from __future__ import annotations

from pydantic import ValidationError


class ConfigError(ValueError):
    """A configuration file is invalid; the message names the file and the field."""


def format_validation_error(error: ValidationError, origin: str) -> str:
    """Render pydantic errors as ``origin: field.path: message`` lines."""
    lines = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "(root)"
        lines.append(f"{origin}: {where}: {item['msg']}")
    return "\n".join(lines)
