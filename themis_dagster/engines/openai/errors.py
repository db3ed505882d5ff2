"""What the OpenAI-style engine raises; no message ever holds the API key."""

from __future__ import annotations


class OpenAIEngineError(RuntimeError):
    """A request to the server failed; the message names the endpoint and the reason (never the key)."""


class RequestFailedError(OpenAIEngineError):
    """One request failed for good: ``status`` is the final HTTP status (None: no usable response)."""

    def __init__(self, message: str, status: int | None = None, reachable: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.reachable = reachable  # False: the last attempt got no HTTP response at all


class LoglikelihoodUnsupportedError(OpenAIEngineError):
    """The server cannot return prompt-token logprobs, so continuations cannot be scored."""
