"""A model's engine arguments as an engine of one kind reads them (``registry/models.py``'s ``ModelEngineArgs``).

vLLM's arguments are every model's unless its ``engine:`` names another kind: vLLM's engines
refuse another kind's (``vllm_args``); the other kinds read their own and leave vLLM's alone
(``kind_args``), as they always have.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import TypeAdapter

from themis_dagster.errors import ConfigError
from themis_dagster.registry.engine_args import FakeEngineArgs, OpenAIEngineArgs
from themis_dagster.registry.models import AnyEngineArgs, EngineArgs, ModelEngineArgs, ModelSpec


def parse_engine_args(data: object) -> AnyEngineArgs:
    """A models file's ``engine:`` mapping on its own (``ValidationError`` naming its fields as written)."""
    return TypeAdapter(ModelEngineArgs).validate_python(data)


def vllm_args(spec: ModelSpec) -> EngineArgs:
    """``spec``'s vLLM engine arguments; ConfigError naming the model where it declares another kind's."""
    if not isinstance(spec.engine, EngineArgs):
        raise ConfigError(
            f"model {spec.id!r}: engine.kind is {spec.engine.kind!r}; vLLM's engines (vllm, vllm-server) read "
            f"vLLM's engine arguments (leave kind out, or run the model with THEMIS_ENGINE={spec.engine.kind})"
        )
    return spec.engine


_Args = TypeVar("_Args", OpenAIEngineArgs, FakeEngineArgs)


def kind_args(spec: ModelSpec, kind: type[_Args], engine: str) -> _Args | None:
    """``spec``'s engine arguments where they are ``kind``'s, None where they are vLLM's.

    vLLM's are every model's unless it declares another kind: an engine of another kind (named
    ``engine``, as THEMIS_ENGINE names it) leaves them alone, as it always has. A third kind's
    arguments are a ConfigError naming the model.
    """
    args = spec.engine
    if isinstance(args, kind):
        return args
    if isinstance(args, EngineArgs):
        return None
    own = kind.model_fields["kind"].default
    raise ConfigError(
        f"model {spec.id!r}: engine.kind is {args.kind!r}; the {engine} engine reads {own}'s engine arguments "
        f"or vLLM's (run the model with THEMIS_ENGINE={args.kind})"
    )
