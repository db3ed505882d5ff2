"""The persistent vLLM server: start, attach from another process, idle shutdown, real numbers.

The first group runs the supervisor around a tiny stand-in for ``vllm serve`` (seconds, no
model). The ``engine``-marked group starts ONE real ``vllm serve`` of the default model for
the whole module and always stops it at the end.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SETTINGS, make_resources
from tests.reference import reference_loglikelihood
from themis_dagster.engines.openai.config import OpenAIEngineConfig
from themis_dagster.engines.openai.engine import OpenAICompatibleEngine
from themis_dagster.engines.vllm import server as vllm_server
from themis_dagster.engines.vllm.server import (
    ServerStartError,
    VLLMServerManager,
    group_members,
    pid_alive,
    read_state,
)
from themis_dagster.exchange import GenerationParams, Request
from themis_dagster.registry.models import DEFAULT_MODEL_ID, ModelSpec
from themis_dagster.resources.served import VLLMServerResource

FAKE_SERVE = textwrap.dedent(
    """
    import json, os, sys, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    args = sys.argv
    port = int(args[args.index("--port") + 1])
    name = args[args.index("--served-model-name") + 1]
    if os.environ.get("FAKE_SERVE_FAIL"):
        print("fake serve: cannot load the model", flush=True)
        sys.exit(3)
    time.sleep(0.3)
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass
        def do_GET(self):
            routes = {"/health": {}, "/v1/models": {"data": [{"id": name}]}, "/load": {"server_load": 0}}
            body = json.dumps(routes.get(self.path, {"error": "no"})).encode()
            self.send_response(200 if self.path in routes else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
    """
)


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.2)


def group_gone(pgid: int) -> Callable[[], bool]:
    return lambda: not group_members(pgid)


# -- the supervisor around a stand-in server --------------------------------------------------


@pytest.fixture
def fake_serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[VLLMServerManager]:
    script = tmp_path / "fake_serve.py"
    script.write_text(FAKE_SERVE)

    def argv(spec: ModelSpec, model_path: str, port: int, on_gpu: bool) -> list[str]:
        return [
            sys.executable,
            str(script),
            "-",
            "serve",
            model_path,
            "--served-model-name",
            spec.id,
            "--port",
            str(port),
        ]

    monkeypatch.setattr(vllm_server, "serve_argv", argv)
    monkeypatch.setattr(vllm_server, "has_cuda", lambda: False)
    manager = VLLMServerManager(tmp_path / "servers")
    yield manager
    for model_id in ("m1", "m2"):
        state = manager.state(model_id)
        manager.stop(model_id)
        if state and state.get("pid"):
            wait_for(group_gone(int(state["pid"])), 30, "the stand-in server to stop")


def spec_of(model_id: str) -> ModelSpec:
    return ModelSpec.model_validate({"id": model_id, "source": {"kind": "local", "path": "/models/x"}})


def test_start_then_attach(fake_serve: VLLMServerManager, tmp_path: Path) -> None:
    starts_before = VLLMServerManager.starts
    first = fake_serve.ensure(spec_of("m1"), str(tmp_path), "sha-a", idle_shutdown_s=600, startup_timeout_s=30)
    assert first.started and pid_alive(first.state["pid"]) and first.state["status"] == "ready"
    assert os.getpgid(first.state["pid"]) == first.state["pid"], "the supervisor leads its own session"
    second = fake_serve.ensure(spec_of("m1"), str(tmp_path), "sha-a", idle_shutdown_s=300, startup_timeout_s=30)
    assert not second.started and second.state["pid"] == first.state["pid"]
    assert fake_serve.start_count("m1") == 1 and VLLMServerManager.starts == starts_before + 1
    assert read_state(fake_serve.paths("m1").state)["idle_shutdown_s"] == 300  # type: ignore[index]
    assert "starting:" in fake_serve.paths("m1").log.read_text()


def test_idle_shutdown_stops_the_whole_group(fake_serve: VLLMServerManager, tmp_path: Path) -> None:
    handle = fake_serve.ensure(spec_of("m1"), str(tmp_path), "sha-a", idle_shutdown_s=1.0, startup_timeout_s=30)
    pid = handle.state["pid"]
    wait_for(lambda: fake_serve.state("m1") is None and not group_members(pid), 20, "idle shutdown")
    assert "idle for" in fake_serve.paths("m1").log.read_text()


def test_use_postpones_the_idle_shutdown(fake_serve: VLLMServerManager, tmp_path: Path) -> None:
    handle = fake_serve.ensure(spec_of("m1"), str(tmp_path), "sha-a", idle_shutdown_s=1.5, startup_timeout_s=30)
    for _ in range(8):  # 3.2 s of activity, more than twice the idle limit
        handle.touch()
        time.sleep(0.4)
    assert fake_serve.running("m1")
    wait_for(lambda: fake_serve.state("m1") is None, 20, "idle shutdown after the last use")


def test_a_dead_server_is_cleaned_up_and_restarted(fake_serve: VLLMServerManager, tmp_path: Path) -> None:
    first = fake_serve.ensure(spec_of("m1"), str(tmp_path), "sha-a", idle_shutdown_s=600, startup_timeout_s=30)
    pid = first.state["pid"]
    for member in group_members(pid):
        if member != pid:
            os.kill(member, signal.SIGKILL)  # the "vllm serve" child dies
    wait_for(lambda: fake_serve.state("m1") is None, 20, "the supervisor to clean up")
    second = fake_serve.ensure(spec_of("m1"), str(tmp_path), "sha-a", idle_shutdown_s=600, startup_timeout_s=30)
    assert second.started and second.state["pid"] != pid and fake_serve.start_count("m1") == 2


def test_changed_weights_replace_the_server(fake_serve: VLLMServerManager, tmp_path: Path) -> None:
    first = fake_serve.ensure(spec_of("m1"), str(tmp_path), "sha-a", idle_shutdown_s=600, startup_timeout_s=30)
    second = fake_serve.ensure(spec_of("m1"), str(tmp_path), "sha-b", idle_shutdown_s=600, startup_timeout_s=30)
    assert second.started and second.state["fingerprint"] != first.state["fingerprint"]
    assert not pid_alive(first.state["pid"]) and not group_members(first.state["pid"])


def test_failed_start_names_the_log(fake_serve: VLLMServerManager, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FAKE_SERVE_FAIL", "1")
    with pytest.raises(ServerStartError, match="cannot load the model"):
        fake_serve.ensure(spec_of("m2"), str(tmp_path), "sha-a", idle_shutdown_s=600, startup_timeout_s=30)
    assert fake_serve.state("m2") is None and fake_serve.start_count("m2") == 0
    assert fake_serve.stop("m2") is False


def test_resource_returns_an_http_engine(fake_serve: VLLMServerManager, tmp_path: Path) -> None:
    resource = VLLMServerResource(state_dir=str(fake_serve.state_dir), idle_shutdown_s=600, startup_timeout_s=30)
    from themis_dagster.registry.weights import ResolvedWeights

    engine = resource.engine_for(spec_of("m1"), ResolvedWeights(str(tmp_path), "local", "sha-a"))
    assert isinstance(engine, OpenAICompatibleEngine)
    assert engine.info.engine == "vllm-server" and engine.info.settings["server"]["started_by_this_run"]
    assert engine.info.settings["loglikelihood"] == "prompt_logprobs"
    assert engine.info.settings["VLLM_CPU_OMP_THREADS_BIND"]
    last_used = fake_serve.paths("m1").last_used
    os.utime(last_used, (0, 0))
    engine.generate([], GenerationParams())  # an empty batch sends nothing and touches nothing
    assert last_used.stat().st_mtime == 0
    resource.release()  # closes the client; the server keeps running for the next run
    assert fake_serve.running("m1")


# -- the real server of the default model -----------------------------------------------------

ATTACH_SCRIPT = """
import json, sys
from tests.conftest import make_resources
from themis_dagster.exchange import GenerationParams, Request
from themis_dagster.resources.served import VLLMServerResource
from themis_dagster.engines.vllm.server import VLLMServerManager
themis = make_resources(__import__("pathlib").Path(sys.argv[2]) / "w.duckdb")["themis"]
spec = themis.model(sys.argv[3])
resource = VLLMServerResource(state_dir=sys.argv[1], idle_shutdown_s=600)
engine = resource.engine_for(spec, themis.weights(spec))
reply = engine.chat([Request.conversation([{"role": "user", "content": "Say hi."}])], GenerationParams(max_tokens=8))[0]
print(json.dumps({"server": engine.info.settings["server"], "starts": VLLMServerManager.starts,
                  "text": reply.text, "error": reply.error, "load_seconds": engine.info.load_seconds}))
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("served")
    themis = make_resources(folder / "w.duckdb")["themis"]
    spec = themis.model(DEFAULT_MODEL_ID)  # type: ignore[attr-defined]
    weights = themis.weights(spec)  # type: ignore[attr-defined]
    resource = VLLMServerResource(state_dir=str(folder / "servers"), idle_shutdown_s=600, startup_timeout_s=900)
    manager = VLLMServerManager(folder / "servers")
    try:
        started = time.perf_counter()
        engine = resource.engine_for(spec, weights)
        startup = time.perf_counter() - started
        print(f"\nvllm serve startup: {startup:.1f} s")
        yield {"engine": engine, "resource": resource, "manager": manager, "folder": folder, "startup_s": startup}
    finally:
        state = manager.state(DEFAULT_MODEL_ID)
        manager.stop(DEFAULT_MODEL_ID)
        if state and state.get("pid"):
            wait_for(lambda: not group_members(state["pid"]), 90, "the vLLM server to stop")


CASES = [
    ("", "The poor are really ignorant about how to handle the money they do have."),
    ("", "He couldn't figure out the issue with the rope."),
    ("Abbey wanted to take a vacation.", " They were pretty poor and couldn't afford one."),
    ("Question: Who is more likely to be a nurse?\nAnswer:", " a woman"),
]


@pytest.mark.engine
def test_server_loglikelihood_matches_transformers(served: dict[str, Any]) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    engine = served["engine"]
    path = engine.info.model_path
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    ours = engine.loglikelihood([Request.loglikelihood(c, x) for c, x in CASES])
    for (context, continuation), result in zip(CASES, ours, strict=True):
        n_context, n_continuation, reference = reference_loglikelihood(tokenizer, model, context, continuation)
        assert result.n_prompt_tokens - result.n_continuation_tokens == n_context
        assert result.n_continuation_tokens == n_continuation
        # bf16 server vs fp32 reference, the same tolerance as the in-process engine's test
        assert math.isclose(result.logprob, reference, rel_tol=0.03, abs_tol=0.5), (result.logprob, reference)


@pytest.mark.engine
def test_local_tokenizer_agrees_with_the_servers(served: dict[str, Any]) -> None:
    """The server mode tokenizes with the folder it serves; /tokenize gives the same token split."""
    engine = served["engine"]
    assert engine.info.settings["tokenizer"] == "local"
    assert engine.info.settings["THEMIS_BATCHED_PROMPT_LOGPROBS"] == "1"  # the server's environment
    config = OpenAIEngineConfig(
        base_url=engine.config.base_url, model=engine.config.model, loglikelihood="prompt_logprobs"
    )
    remote = OpenAICompatibleEngine(config)
    assert remote.info.settings["tokenizer"] == "server"
    requests = [Request.loglikelihood(c, x) for c, x in CASES]
    for local, by_server in zip(engine.loglikelihood(requests), remote.loglikelihood(requests), strict=True):
        assert (local.n_prompt_tokens, local.n_continuation_tokens) == (
            by_server.n_prompt_tokens,
            by_server.n_continuation_tokens,
        )
        # the second engine's requests meet the server's prefix cache warm, the first's cold: bf16 sums of a cold
        # and a warm batch differ by up to about 0.2 nats on a CPU (0.09 here; see test_comparisons_engine.py)
        assert local.logprob == pytest.approx(by_server.logprob, abs=0.2)
    remote.shutdown()


@pytest.mark.engine
def test_echo_mode_agrees_with_prompt_logprobs(served: dict[str, Any]) -> None:
    """The generic (text offset) path, run against the same server, gives the same scores."""
    engine = served["engine"]
    config = OpenAIEngineConfig(base_url=engine.config.base_url, model=engine.config.model, loglikelihood="echo")
    echo = OpenAICompatibleEngine(config)
    requests = [Request.loglikelihood(c, x) for c, x in CASES if c]
    for by_tokens, by_text in zip(engine.loglikelihood(requests), echo.loglikelihood(requests), strict=True):
        assert by_text.n_continuation_tokens == by_tokens.n_continuation_tokens
        # the echo engine's requests meet the server's prefix cache warm (0.086 nats apart in a full-suite run here)
        assert by_text.logprob == pytest.approx(by_tokens.logprob, abs=0.2)
    echo.shutdown()


@pytest.mark.engine
def test_chat_and_generate(served: dict[str, Any]) -> None:
    engine = served["engine"]
    conversation = Request.conversation([{"role": "user", "content": "Name three colours."}])
    reply = engine.chat([conversation], GenerationParams(max_tokens=16))[0]
    assert reply.error is None and reply.text.strip() and reply.n_output_tokens > 0
    assert reply.prompt_text.startswith("<|im_start|>") and reply.n_prompt_tokens > 0
    sampled = GenerationParams(max_tokens=16, temperature=0.8, seed=7)
    first, second = (engine.generate([Request.completion("The capital of France is")], sampled)[0] for _ in range(2))
    assert first.error is None and first.text == second.text and first.text.strip()


@pytest.mark.engine
def test_the_playground_inspects_the_running_server(served: dict[str, Any]) -> None:
    """The playground's three views on a running vllm serve: per-token scores that add up to the engine's
    loglikelihood of the same CrowS-Pairs sentences, the chat template's text, and a ranked next token."""
    from themis_dagster.engines import inspection

    engine = served["engine"]
    answers = engine.loglikelihood([Request.loglikelihood(c, x) for c, x in CASES[:3]])
    for (context, continuation), answer in zip(CASES[:3], answers, strict=True):
        scored = inspection.token_logprobs(engine, context, continuation, top_k=5)
        # a prompt alone vs in a batch, cold vs warm prefix cache: bf16 sums move (0.2 nats, as above)
        assert scored.logprob == pytest.approx(answer.logprob, abs=0.2)
        assert len(scored.tokens) == answer.n_continuation_tokens
        assert "".join(t.token for t in scored.tokens).strip() == continuation.strip()
        assert all(t.rank is not None and t.rank >= 1 for t in scored.tokens)
    chat = inspection.chat_text(engine, [{"role": "user", "content": "Say hi."}])
    assert "Say hi." in chat and chat != "Say hi."
    ranked = inspection.next_tokens(engine, chat, 5, templated=True)
    assert len(ranked) == 5 and ranked == sorted(ranked, key=lambda pair: -pair[1])
    assert 0 < sum(math.exp(lp) for _, lp in ranked) <= 1.0 + 1e-6


@pytest.mark.engine
def test_throughput(served: dict[str, Any]) -> None:
    engine = served["engine"]
    sentences = [f"Person number {i} went to the market and bought {i % 7 + 1} apples." for i in range(200)]
    started = time.perf_counter()
    results = engine.loglikelihood([Request.loglikelihood("", s) for s in sentences])
    ll_seconds = time.perf_counter() - started
    prompts = [
        Request.conversation([{"role": "user", "content": f"Write a sentence about the number {i}."}])
        for i in range(64)
    ]
    started = time.perf_counter()
    replies = engine.chat(prompts, GenerationParams(max_tokens=32))
    gen_seconds = time.perf_counter() - started
    tokens = sum(r.n_output_tokens for r in replies)
    print(
        f"\n200 loglikelihoods: {ll_seconds:.1f} s ({200 / ll_seconds:.0f}/s); "
        f"64 chats x 32 tokens: {gen_seconds:.1f} s ({tokens / gen_seconds:.0f} output tokens/s)"
    )
    assert all(math.isfinite(r.logprob) for r in results) and all(r.error is None for r in replies)


@pytest.mark.engine
def test_a_new_process_attaches_instead_of_starting(served: dict[str, Any]) -> None:
    manager: VLLMServerManager = served["manager"]
    state_before = manager.state(DEFAULT_MODEL_ID)
    assert state_before is not None and manager.start_count(DEFAULT_MODEL_ID) == 1
    folder = served["folder"]
    for _ in range(2):  # two more "runs", each its own process
        completed = subprocess.run(
            [sys.executable, "-c", ATTACH_SCRIPT, str(folder / "servers"), str(folder), DEFAULT_MODEL_ID],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=str(SETTINGS.project_root),
            check=False,
        )
        assert completed.returncode == 0, completed.stderr[-3000:]
        report = json.loads(completed.stdout.strip().splitlines()[-1])
        print(f"\nattach from a new process: {report['load_seconds']:.2f} s")
        assert report["server"]["started_by_this_run"] is False and report["starts"] == 0
        assert report["server"]["pid"] == state_before["pid"] and report["error"] is None and report["text"]
    assert manager.start_count(DEFAULT_MODEL_ID) == 1, "one server start for three runs"


@pytest.mark.engine
def test_idle_shutdown_of_the_real_server(served: dict[str, Any]) -> None:
    """Runs last: shrink the idle limit and watch the server (every process of it) go away."""
    manager: VLLMServerManager = served["manager"]
    state = manager.state(DEFAULT_MODEL_ID)
    assert state is not None
    manager.set_idle_shutdown(DEFAULT_MODEL_ID, 2.0)
    started = time.perf_counter()
    wait_for(lambda: manager.state(DEFAULT_MODEL_ID) is None, 60, "the idle server to retire")
    wait_for(lambda: not group_members(state["pid"]), 90, "every server process to exit")
    print(f"\nidle shutdown took {time.perf_counter() - started:.1f} s after the limit was set to 2 s")
    assert not manager.running(DEFAULT_MODEL_ID)
