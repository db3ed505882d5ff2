"""Inference engines behind one interface (see ``base.Engine``).

- ``base``: the interface: ``exchange.Request``s in, one ``exchange.Response`` per request out.
- ``dispatch``: sends a partition's requests to an engine in as few batched calls as possible.
- ``tokenization``: lm-eval's rules for (context, continuation) token ids, shared by the engines.
- ``fake``: a deterministic engine for tests of the graph's plumbing.
- ``openai``: any OpenAI-compatible HTTP server (a hosted API, or a ``vllm serve``).
- ``vllm``: the vLLM engines and everything written against one vLLM release.

Which engine a run gets is configuration (``THEMIS_ENGINE``), resolved by
``resources.engine_registry``.
"""
