"""What a reasoning model's declaration is checked against: vLLM's parser names and the token budgets.

A model that thinks before it answers (Qwen3's ``<think>...</think>``, gpt-oss's analysis
channel, DeepSeek-R1 distills) declares ``reasoning:`` in the registry (``ReasoningSpec`` in
``registry/models.py``). Its ``parser`` must be one of vLLM's own reasoning parsers, by the name
vLLM registers it under (``vllm serve --reasoning-parser NAME``). Those names are read here from
vLLM's source without importing vLLM (importing it takes tens of seconds and loads torch), so a
registry is checked in milliseconds, before any engine starts.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

# vllm/reasoning/__init__.py registers its parsers lazily from this dict (vLLM 0.32): name -> (file, class)
_REGISTRY_DICT = "_REASONING_PARSERS_TO_REGISTER"


def _vllm_folder() -> Path | None:
    """Where the installed ``vllm`` package lives, found without importing it (None: not installed)."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _names_in_source(init_file: Path) -> list[str] | None:
    """The keys of vLLM's lazy-registration dict in ``vllm/reasoning/__init__.py`` (None: not found there)."""
    try:
        tree = ast.parse(init_file.read_text())
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Dict):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(target, ast.Name) and target.id == _REGISTRY_DICT for target in targets):
                keys = [key.value for key in node.value.keys if isinstance(key, ast.Constant)]
                return sorted(key for key in keys if isinstance(key, str))
    return None


@functools.cache
def vllm_reasoning_parsers() -> tuple[str, ...] | None:
    """The names of vLLM's registered reasoning parsers (``ReasoningParserManager.list_registered()``).

    Read from vLLM's source where its registration dict is found; otherwise (another vLLM layout)
    from vLLM itself, which imports it. None where vLLM is not installed: a model answered only
    over HTTP may then name its server's parser unchecked.
    """
    folder = _vllm_folder()
    if folder is None:
        return None
    names = _names_in_source(folder / "reasoning" / "__init__.py")
    if names is None:  # pragma: no cover - a vLLM release that registers its parsers another way
        from vllm.reasoning import ReasoningParserManager

        names = ReasoningParserManager.list_registered()
    return tuple(names)


def check_parser_name(name: str) -> str:
    """``name`` if vLLM registers a reasoning parser by it; ValueError listing vLLM's parsers otherwise."""
    known = vllm_reasoning_parsers()
    if known is not None and name not in known:
        raise ValueError(f"unknown reasoning parser {name!r}; vLLM's reasoning parsers: {', '.join(known)}")
    return name
