"""The ``themis`` command skips the interpreter's teardown only after an in-process vLLM engine."""

from __future__ import annotations

import sys
import types

import pytest

from themis_dagster import cli


def test_quick_exit_after_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    exits: list[int] = []

    def quick_exit(code: int) -> None:
        exits.append(code)
        raise SystemExit(code)  # os._exit does not return

    monkeypatch.setattr(cli, "main", lambda: 3)
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setattr(cli.os, "_exit", quick_exit)
    with pytest.raises(SystemExit):
        cli.console_main()
    assert exits == [3]  # the exit code survives


def test_normal_exit_without_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "main", lambda: 0)
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    monkeypatch.setattr(cli.os, "_exit", lambda code: pytest.fail("os._exit without vLLM"))
    with pytest.raises(SystemExit) as raised:
        cli.console_main()
    assert raised.value.code == 0


def test_exiting_leaves_in_process_engines_to_the_os(monkeypatch: pytest.MonkeyPatch) -> None:
    from themis_dagster.resources import engine as engine_module

    stopped: list[str] = []

    class Engine:
        def __init__(self, name: str, in_process: bool) -> None:
            self.name, self.in_process = name, in_process

        def shutdown(self) -> None:
            stopped.append(self.name)

    warm = {("m", "vllm"): Engine("vllm", True), ("m", "server"): Engine("server", False)}
    monkeypatch.setattr(engine_module, "_WARM", dict(warm))
    engine_module.shutdown_warm_engines(process_exiting=True)
    assert stopped == ["server"] and engine_module._WARM == {}
    monkeypatch.setattr(engine_module, "_WARM", dict(warm))
    engine_module.shutdown_warm_engines()  # a process that goes on frees everything
    assert stopped == ["server", "vllm", "server"]
