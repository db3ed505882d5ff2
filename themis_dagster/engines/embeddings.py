"""A model's own word vectors, read with transformers from the same weights folder the engine serves.

vLLM runs a generating model; its in-process engine exposes neither the embedding matrix nor
the hidden states (a pooling runner would be a second engine on the same weights). So the
engines answer ``embedding`` requests through this side path, loaded on first use:

- ``input``: the rows of the input embedding matrix for the text's tokens, averaged;
- ``hidden_mean``: the last layer's hidden states (after the final norm, as transformers
  returns ``hidden_states[-1]``) of the text run alone, averaged over its tokens.

The text is tokenized as written, without special tokens; a word of several tokens is
mean-pooled over them, and the tokens are returned so a task can report them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from themis_dagster.exchange import Request, Response

KINDS = ("input", "hidden_mean")


class TransformersEmbedder:
    """Loads tokenizer and causal LM (float32, CPU unless CUDA is there) from ``model_path`` once."""

    def __init__(self, model_path: str) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.tokenizer: Any = AutoTokenizer.from_pretrained(model_path)
        self.model: Any = AutoModelForCausalLM.from_pretrained(model_path, torch_dtype=torch.float32)
        self.model.requires_grad_(False)  # inference only (eval mode is the from_pretrained default)

    def embed(self, requests: Sequence[Request]) -> list[Response]:
        """One response per request; a text with no tokens is a failed request naming it."""
        answers = []
        matrix = self.model.get_input_embeddings().weight
        for request in requests:
            text = request.prompt or ""
            ids = list(self.tokenizer.encode(text, add_special_tokens=False))
            if not ids:
                answers.append(request.failed(f"{text!r} has no tokens"))
                continue
            with self.torch.no_grad():
                tensor = self.torch.tensor([ids])
                hidden = self.model(input_ids=tensor, output_hidden_states=True).hidden_states[-1][0]
                vectors = {
                    "input": matrix[tensor[0]].mean(dim=0).tolist(),
                    "hidden_mean": hidden.mean(dim=0).tolist(),
                }
            answers.append(request.embedded(vectors, list(self.tokenizer.convert_ids_to_tokens(ids))))
        return answers
