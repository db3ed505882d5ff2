"""Looking inside the in-process vLLM engine for the playground (``engines/inspection.py``).

Through the loaded ``VLLMEngine``'s own ``vllm.LLM``, tokenizer and LoRA adapter (no second
engine): each continuation token's log-probability is ``prompt_logprobs=k`` on the same tokens
``VLLMEngine.loglikelihood`` scores, the next token's top k one greedy token with ``logprobs=k``.
"""

from __future__ import annotations

from typing import Any

from themis_dagster.engines.token_scores import NotSupportedError, ScoredTokens, TokenScore
from themis_dagster.exchange import ChatMessage


class VLLMInspector:
    """``VLLMEngine.inspector()``: through its own ``vllm.LLM``, tokenizer and LoRA adapter (no second engine)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def _decode(self, token_id: int) -> str:
        return str(self.engine.tokenizer.decode([token_id]))

    def token_logprobs(self, context: str, continuation: str, top_k: int) -> ScoredTokens:
        from vllm import SamplingParams, TokensPrompt

        from themis_dagster.engines.tokenization import encode_pair, truncate_left

        engine = self.engine
        context_ids, continuation_ids = encode_pair(engine._encode, engine.prefix_token_id, context, continuation)
        tokens, context_len, truncated = truncate_left(context_ids, continuation_ids, engine.max_len - 1)
        params = SamplingParams(max_tokens=1, prompt_logprobs=top_k, detokenize=False, temperature=0.0)
        outputs = engine.llm.generate(
            [TokensPrompt(prompt_token_ids=tokens)], params, use_tqdm=False, lora_request=engine.lora_request
        )
        logprobs = outputs[0].prompt_logprobs
        scored = []
        for position in range(max(context_len, 1), len(tokens)):
            entries = logprobs[position]
            actual = entries[tokens[position]]
            top = sorted(((tid, e) for tid, e in entries.items() if e.rank <= top_k), key=lambda pair: pair[1].rank)
            scored.append(
                TokenScore(
                    self._decode(tokens[position]),
                    float(actual.logprob),
                    int(actual.rank),
                    [(self._decode(tid), float(e.logprob)) for tid, e in top],
                )
            )
        return ScoredTokens(context, continuation, scored, context_len, truncated)

    def next_tokens(self, prompt: str, k: int, templated: bool) -> list[tuple[str, float]]:
        from vllm import SamplingParams, TokensPrompt

        engine = self.engine
        ids = list(engine.tokenizer.encode(prompt, add_special_tokens=not templated))
        params = SamplingParams(max_tokens=1, logprobs=k, temperature=0.0, detokenize=False)
        outputs = engine.llm.generate(
            [TokensPrompt(prompt_token_ids=ids[-(engine.max_len - 1) :])],
            params,
            use_tqdm=False,
            lora_request=engine.lora_request,
        )
        entries = outputs[0].outputs[0].logprobs[0]
        ranked = sorted(entries.items(), key=lambda pair: -pair[1].logprob)[:k]
        return [(self._decode(token_id), float(entry.logprob)) for token_id, entry in ranked]

    def chat_text(self, messages: list[ChatMessage]) -> str:
        if self.engine.spec.chat_template is None:
            raise NotSupportedError(f"{self.engine.spec.id} declares no chat template (a base model)")
        return str(self.engine.render_chat(messages))
