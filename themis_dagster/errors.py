"""Errors every layer raises or reports: a bad configuration, named by its file and field; the base of every
declaration read from a file, which makes an unknown key such an error instead of ignoring it; and the one
YAML reader those files go through."""

from __future__ import annotations

from typing import Any, TypeVar, overload

import yaml
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

ModelT = TypeVar("ModelT", bound=BaseModel)
T = TypeVar("T")


# libyaml's parser where PyYAML was built with it (its wheels are): the same safe documents as yaml.safe_load
# (SafeConstructor, the same resolvers), about ten times faster; the definitions read every task and family file
_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, with libyaml's parser; a bad document raises ``yaml.YAMLError`` as it does."""
    return yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506 (a safe loader)


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


@overload
def validated(model: type[ModelT], data: object, origin: str, *, error: type[ValueError] = ...) -> ModelT: ...


@overload
def validated(model: TypeAdapter[T], data: object, origin: str, *, error: type[ValueError] = ...) -> T: ...


def validated(model: Any, data: object, origin: str, *, error: type[ValueError] = ConfigError) -> Any:
    """``data`` as ``model`` (a pydantic model, or a ``TypeAdapter`` of a union of them); invalid data is an
    ``error`` (a ``ConfigError`` unless a reader names its own) naming ``origin`` and every bad field."""
    try:
        if isinstance(model, TypeAdapter):
            return model.validate_python(data)
        return model.model_validate(data)
    except ValidationError as invalid:
        raise error(format_validation_error(invalid, origin)) from None
