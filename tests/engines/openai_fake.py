"""A tiny in-process OpenAI-style HTTP server for the OpenAICompatibleEngine tests (no model, no network).

It answers like vLLM (``/version``, ``/tokenize``, ``prompt_logprobs``) or like a generic
OpenAI-style API (echo + ``text_offset``), and can be told to fail, stall or send junk; with the
engine and request builders the tests share.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from themis_dagster.engines.openai.config import OpenAIEngineConfig
from themis_dagster.engines.openai.engine import OpenAICompatibleEngine
from themis_dagster.exchange import ChatMessage, GenerationParams, Request

SECRET = "sk-test-DO-NOT-LEAK-0123456789"
BOS = 1


def toy_encode(text: str) -> list[int]:
    """Character-level tokenizer: '<s>' is the BOS token, every other character one token."""
    ids, i = [], 0
    while i < len(text):
        if text.startswith("<s>", i):
            ids.append(BOS)
            i += 3
        else:
            ids.append(ord(text[i]) + 10)
            i += 1
    return ids


def toy_logprob(token: int) -> float:
    return -0.25 - (token % 5) * 0.5


def toy_rank(token: int) -> int:
    return 1 if token % 3 else 2


Reply = tuple[int, dict[str, str], bytes]


def json_reply(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    return status, headers or {}, json.dumps(data).encode()


@dataclass
class FakeServer:
    """Routes (method, path) to a responder; records requests and the most requests in flight."""

    vllm: bool = True
    max_model_len: int = 64
    responder: Callable[[str, str, dict[str, Any]], Reply | None] | None = None
    delay_s: float = 0.0
    requests: list[tuple[str, str, dict[str, Any], str]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0
    dropped: int = 0  # replies cut half-way (``drops``)

    def count(self, path: str) -> int:
        return sum(1 for _, p, _, _ in self.requests if p == path)

    def drops(self, path: str, body: dict[str, Any]) -> bool:
        """Whether this reply dies half-way (headers and half the body, then the connection): never, here."""
        return False

    def handle(self, method: str, path: str, body: dict[str, Any]) -> Reply:
        if self.responder is not None:
            custom = self.responder(method, path, body)
            if custom is not None:
                return custom
        if self.vllm:
            if path == "/version":
                return json_reply({"version": "0.32.0+fake"})
            if path == "/tokenize":
                tokens = toy_encode(body["prompt"])
                return json_reply({"tokens": tokens, "count": len(tokens), "max_model_len": self.max_model_len})
            if path == "/tokenizer_info":
                return json_reply({"tokenizer_class": "Toy", "bos_token": "<s>", "eos_token": "</s>"})
        if path == "/v1/completions":
            return self.completion(body)
        if path == "/v1/chat/completions":
            reply = "echo: " + body["messages"][-1]["content"]
            data: dict[str, Any] = {
                "choices": [{"message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 3},
            }
            if body.get("return_prompt_text"):
                data["prompt_text"] = "<rendered>" + body["messages"][-1]["content"]
            return json_reply(data)
        return json_reply({"error": {"message": f"no route {path}"}}, status=404)

    def completion(self, body: dict[str, Any]) -> Reply:
        prompt = body["prompt"]
        if body.get("prompt_logprobs") is not None and self.vllm:
            entries: list[Any] = [None]
            for token in prompt[1:]:
                entries.append(
                    {str(token): {"logprob": toy_logprob(token), "rank": toy_rank(token), "decoded_token": "x"}}
                )
            choice: dict[str, Any] = {"text": "z", "finish_reason": "length", "prompt_logprobs": entries}
            return json_reply({"choices": [choice], "usage": {"prompt_tokens": len(prompt), "completion_tokens": 1}})
        if body.get("echo"):
            # whitespace-free toy: every character is a token, offsets are character positions
            tokens = [*prompt, "!"]
            scores = [toy_logprob(ord(c) + 10) for c in tokens[1:]]
            values: list[float | None] = [None, *scores]
            tops: list[dict[str, float] | None] = [None]
            tops += [
                {c: v + (0.0 if toy_rank(ord(c) + 10) == 1 else 1.0)} for c, v in zip(tokens[1:], scores, strict=True)
            ]
            logprobs: dict[str, Any] = {
                "tokens": tokens,
                "token_logprobs": values,
                "top_logprobs": tops,
                "text_offset": list(range(len(tokens))),
            }
            choice = {"text": prompt + "!", "finish_reason": "length", "logprobs": logprobs}  # type: ignore[no-redef]
            return json_reply({"choices": [choice], "usage": {"prompt_tokens": len(prompt), "completion_tokens": 1}})
        text = f"completion of {prompt}"
        choice = {"text": text, "finish_reason": "stop"}
        return json_reply({"choices": [choice], "usage": {"prompt_tokens": len(prompt), "completion_tokens": 2}})

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@contextmanager
def running_fake_server(state: FakeServer | None = None) -> Iterator[FakeServer]:
    """``state`` (a new ``FakeServer`` by default) listening on a free local port until the block ends."""
    state = state if state is not None else FakeServer()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else {}
            with state.lock:
                state.requests.append((method, self.path, body, self.headers.get("Authorization", "")))
                state.in_flight += 1
                state.max_in_flight = max(state.max_in_flight, state.in_flight)
            try:
                if state.delay_s:
                    time.sleep(state.delay_s)
                status, headers, payload = state.handle(method, self.path, body)
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if state.drops(self.path, body):
                    self.wfile.write(payload[: len(payload) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    with state.lock:
                        state.dropped += 1
                    return
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                with state.lock:
                    state.in_flight -= 1

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    """The server for one test (engine tests get it from their conftest; others import it)."""
    with running_fake_server() as state:
        yield state


class Sleeps(list[float]):
    """Records backoff delays instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make_engine(fake: FakeServer, sleeps: Sleeps | None = None, **overrides: Any) -> OpenAICompatibleEngine:
    settings: dict[str, Any] = {"base_url": fake.base_url, "model": "toy", "backoff_s": 0.5, "max_retries": 3}
    settings.update(overrides)
    return OpenAICompatibleEngine(OpenAIEngineConfig(**settings), sleep=sleeps if sleeps is not None else Sleeps())


GREEDY = GenerationParams(max_tokens=8)


def completions(*prompts: str) -> list[Request]:
    return [Request.completion(prompt) for prompt in prompts]


def conversations(*messages: list[ChatMessage]) -> list[Request]:
    return [Request.conversation(conversation) for conversation in messages]
