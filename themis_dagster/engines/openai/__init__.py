"""An engine for models behind an OpenAI-style HTTP API: vLLM's own server or a hosted provider.

Generation goes through ``/v1/completions`` (plain prompts) and ``/v1/chat/completions``
(conversations). Loglikelihoods need prompt-token logprobs, which not every server gives:

- ``prompt_logprobs`` (vLLM): the (context, continuation) pair is tokenized through the
  server's ``/tokenize`` endpoint with lm-eval's rules (``tokenization.encode_pair``), sent
  as token ids with ``prompt_logprobs: 0, max_tokens: 1``, and the continuation's logprobs
  are summed -- the same numbers, token for token, as the in-process ``VLLMEngine``.
- ``echo`` (legacy OpenAI completions): the text is sent with ``echo: true, logprobs: 1,
  max_tokens: 1`` and split at the context's length using the returned ``text_offset``.
  A token that straddles the boundary counts as context, which can differ from lm-eval's
  token split; an empty context cannot be scored (the first token has no logprob).
- ``none``: ``loglikelihood`` raises ``LoglikelihoodUnsupportedError`` naming the endpoint.

Failures: connection errors, timeouts, HTTP 408/429/5xx and malformed JSON are retried
with exponential backoff (``Retry-After`` honoured, capped). No call raises for the requests
that still fail: each gets a ``Response`` with ``error`` set (a loglikelihood one without a
logprob, a generation one without text) and the others keep their answers. Successful
scores are also kept in the engine, so re-sending a batch only re-sends the failures. A
server that cannot score at all raises ``LoglikelihoodUnsupportedError`` for the whole call.

The API key is read from the environment variable *named* in the config. It is sent as a
header and otherwise never stored in a readable attribute, settings, logs or messages:
every error text is redacted before it is raised or returned.

The modules, by concern:

- ``config``: ``OpenAIEngineConfig``, validated before any request is sent.
- ``errors``: what the engine raises.
- ``client``: the HTTP client: the key, retries and backoff, redaction, request counters.
- ``payloads``: request bodies built from ``GenerationParams`` and tokens, replies read into ``Response``s.
- ``logprobs``: continuation scores read from ``prompt_logprobs`` or echoed ``logprobs``.
- ``inspection``: the playground's look inside a served model (per-token log-probabilities).
- ``engine``: ``OpenAICompatibleEngine``, the ``Engine`` over all of these.

The package imports nothing on its own: ``config`` needs only pydantic, the rest httpx.
"""
