"""The playground's engine calls: the engine loaded with its progress shown, replies streamed, the sampling
settings, completion probabilities and the next token.

The engine is the deployment's (``engine_slot``: the ``engine`` pool slot runs take). Loading one
can take minutes on a CPU (vLLM compiles on first use): it runs beside the page, which says what it
is doing (waiting for the pool, loading) and for how long, against how long the model's last load
took. A greedy chat reply is streamed in chunks: each chunk continues the chat template's text so
far with ``generate`` (greedy decoding: the text one request would give); a sampled reply, a
reasoning model's and one over HTTP (a server or an API answers a chat as a whole) come in one piece.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd
import streamlit as st

from themis_dagster.engines import inspection
from themis_dagster.engines.openai.errors import LoglikelihoodUnsupportedError
from themis_dagster.exchange import ChatMessage, GenerationParams, Request
from themis_dagster.explorer import data, ui
from themis_dagster.explorer.engine_slot import EngineBusyError, EngineSlot, shared_slot
from themis_dagster.registry.models import ApiSource, ModelSpec

WAIT_S = 30.0
CHUNK_TOKENS = 16


def redact_secrets(text: str, spec: ModelSpec) -> str:
    """``text`` without the value of the model's API key variable (an error message may echo it)."""
    variable = spec.source.api_key_env if isinstance(spec.source, ApiSource) else None
    for name in (variable, "THEMIS_OPENAI_API_KEY", "OPENAI_API_KEY"):
        secret = os.environ.get(name or "")
        if secret and len(secret) >= 4:
            text = text.replace(secret, data.REDACTED)
    return text


def sampling(stored: dict[str, Any] | None, key: str) -> GenerationParams:
    """The sampling settings, shown and editable (preset from the stored request's own)."""
    preset: dict[str, Any] = {}
    if stored and isinstance(stored.get("gen_params"), dict):
        preset = {k: v for k, v in stored["gen_params"].items() if k in GenerationParams.model_fields}
    try:
        base = GenerationParams(**preset)
    except ValueError:
        base = GenerationParams()
    cols = st.columns(4)
    max_tokens = cols[0].number_input("max_tokens", 1, 8192, base.max_tokens, key=f"{key}-max_tokens")
    temperature = cols[1].number_input("temperature", 0.0, 5.0, float(base.temperature), 0.1, key=f"{key}-temp")
    top_p = cols[2].number_input("top_p", 0.01, 1.0, float(base.top_p), 0.05, key=f"{key}-top_p")
    seed = cols[3].number_input("seed", 0, 2**31 - 1, base.seed or 0, key=f"{key}-seed")
    return GenerationParams(
        max_tokens=int(max_tokens), temperature=float(temperature), top_p=float(top_p), seed=int(seed), stop=base.stop
    )


def load_with_progress(slot: EngineSlot, spec: ModelSpec) -> None:
    """Make ``spec``'s engine warm, saying what the load is doing and for how long; errors are raised here."""
    if slot.loaded() == spec.id:
        return
    failed: list[BaseException] = []
    settings = ui.settings()

    def load() -> None:
        try:
            slot.preload(spec, settings, wait_s=WAIT_S)
        except BaseException as error:  # noqa: BLE001 - handed to the page's thread, which shows it
            failed.append(error)

    worker = threading.Thread(target=load, name="themis-ui-engine-load", daemon=True)
    started = time.monotonic()
    worker.start()
    expected = slot.last_load_s.get(spec.id)
    with st.status(f"Loading {spec.id}...", expanded=True) as status:
        bar = st.progress(0.0, text="starting")
        while worker.is_alive():
            elapsed = time.monotonic() - started
            loading = slot.loading
            phase = loading.phase if loading is not None else "starting"
            hint = f"its last load took {expected:.0f} s" if expected else "a first load compiles (minutes on a CPU)"
            bar.progress(
                min(elapsed / expected, 0.99) if expected else (elapsed % 30) / 30,
                text=f"{phase} · {elapsed:.0f} s ({hint})",
            )
            worker.join(timeout=0.5)
        elapsed = time.monotonic() - started
        if failed:
            status.update(label=f"{spec.id} could not be loaded ({elapsed:.0f} s)", state="error")
            raise failed[0]
        bar.progress(1.0, text=f"loaded in {elapsed:.0f} s")
        status.update(label=f"{spec.id} loaded in {elapsed:.0f} s", state="complete", expanded=False)


def _say(place: Any, message: str) -> None:
    place.info(message)


def with_engine(spec: ModelSpec, action: Callable[[Any], Any]) -> Any:
    """Run ``action(engine)`` on the playground's engine (loaded with its progress shown); a busy pool or an engine
    error is shown, not raised."""
    notice = st.empty()
    slot = shared_slot()
    try:
        load_with_progress(slot, spec)
        with slot.engine(spec, ui.settings(), wait_s=WAIT_S, on_wait=lambda said: _say(notice, said)) as engine:
            result = action(engine)
    except EngineBusyError as error:
        notice.warning(str(error))
        return None
    except (inspection.NotSupportedError, LoglikelihoodUnsupportedError) as error:
        notice.warning(f"Not available for {spec.id}: {redact_secrets(str(error), spec)}")
        return None
    except Exception as error:  # noqa: BLE001 - an engine's failure is the reader's to see, without its secrets
        notice.error(redact_secrets(f"{type(error).__name__}: {error}", spec))
        return None
    return result


def streams(spec: ModelSpec, params: GenerationParams) -> bool:
    """Whether a chat reply can be streamed exactly: greedy decoding, no reasoning to split from it, and an engine on
    this host that renders the chat template itself (a server or an API answers the chat as a whole)."""
    over_http = isinstance(spec.source, ApiSource) or ui.settings().engine in ("openai", "vllm-server")
    return params.temperature == 0.0 and spec.reasoning is None and not over_http


def stream_chat(
    engine: Any, conversation: list[ChatMessage], params: GenerationParams, sent: list[str]
) -> Iterator[str]:
    """The reply to ``conversation`` chunk by chunk (greedy: each chunk continues the template's text so far); what
    the model saw is put in ``sent``."""
    try:
        text = inspection.chat_text(engine, conversation)
    except inspection.NotSupportedError:
        answer = engine.chat([Request.conversation(conversation, "playground")], params)[0]
        sent.append(answer.prompt_text or "")
        if answer.error:
            raise RuntimeError(answer.error) from None
        yield answer.text or ""
        return
    sent.append(text)
    so_far, produced = "", 0
    while produced < params.max_tokens:
        step = min(CHUNK_TOKENS, params.max_tokens - produced)
        answer = engine.generate(
            [Request.completion(text + so_far, "playground")], params.model_copy(update={"max_tokens": step})
        )[0]
        if answer.error:
            raise RuntimeError(answer.error)
        chunk = answer.text or ""
        so_far += chunk
        produced += answer.n_output_tokens or step
        yield chunk
        if answer.finish_reason != "length" or not chunk:
            return


def _score(engine: Any, context: str, completions: list[str], top_k: int, templated: bool) -> list[dict[str, Any]]:
    """Each completion's loglikelihood (the engine's own) and its tokens, plain or after the chat template."""
    shown_context = inspection.chat_text(engine, [{"role": "user", "content": context}]) if templated else context
    requests = [Request.loglikelihood(shown_context, completion, f"c{i}") for i, completion in enumerate(completions)]
    answers = engine.loglikelihood(requests)
    scored = []
    for completion, answer in zip(completions, answers, strict=True):
        tokens = inspection.token_logprobs(engine, shown_context, completion, top_k)
        scored.append({"completion": completion, "answer": answer, "tokens": tokens, "context": shown_context})
    return scored


def scoring_tab(spec: ModelSpec, stored: dict[str, Any] | None) -> None:
    siblings = stored.get("siblings") if stored else None
    if stored and stored.get("request_type") == "loglikelihood" and "score-context" not in st.session_state:
        st.session_state["score-context"] = stored.get("context") or ""
        texts = [s["continuation"] for s in siblings or [] if s.get("continuation")] or [stored.get("continuation")]
        st.session_state["score-completions"] = "\n".join(t or "" for t in texts)
    context = st.text_area("Context", key="score-context", help="empty: scored after the prefix token")
    completions_text = st.text_area("Completions, one per line", key="score-completions")
    cols = st.columns(2)
    top_k = int(cols[0].number_input("Alternatives per token (top k)", 0, 20, 5, key="score-topk"))
    cols[1].caption(
        "Each completion is scored twice: on the context as written, and on the context sent as a "
        "user message through the model's chat template (the reply's position)."
    )
    if not st.button("Score", key="score-go", type="primary"):
        return
    completions = [line for line in completions_text.splitlines() if line.strip()]
    if not completions:
        st.warning("Write at least one completion.")
        return

    def both(engine: Any) -> dict[str, list[dict[str, Any]] | str]:
        result: dict[str, list[dict[str, Any]] | str] = {"plain": _score(engine, context, completions, top_k, False)}
        try:
            result["chat template"] = _score(engine, context, completions, top_k, True)
        except inspection.NotSupportedError as error:
            result["chat template"] = str(error)
        return result

    found = with_engine(spec, both)
    if found is None:
        return
    stored_logprobs = {str(s["continuation"]).strip(): s["logprob"] for s in siblings or []}
    rows = []
    for variant, scored in found.items():
        if isinstance(scored, str):
            st.info(f"{variant}: {scored}")
            continue
        for entry in scored:
            answer = entry["answer"]
            row = {
                "variant": variant,
                "completion": entry["completion"],
                "loglikelihood": answer.logprob,
                "greedy": answer.is_greedy,
                "tokens": answer.n_continuation_tokens,
                "error": answer.error or "",
            }
            if stored_logprobs and variant == "plain":
                row["stored loglikelihood"] = stored_logprobs.get(entry["completion"].strip())
            rows.append(row)
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="score-table")
    reproduced = [r for r in rows if r.get("stored loglikelihood") is not None and r["loglikelihood"] is not None]
    if reproduced:  # the verdict in words: the table's numbers are drawn on a canvas
        same = sum(abs(r["loglikelihood"] - r["stored loglikelihood"]) <= 1e-6 for r in reproduced)
        st.markdown(
            f"**Asked again**: {same} of {len(reproduced)} options score as stored (loglikelihood within 1e-6 of "
            "the stored one)."
        )
    for variant, scored in found.items():
        if isinstance(scored, str):
            continue
        for entry in scored:
            tokens = entry["tokens"]
            with st.expander(
                f"{variant} · {entry['completion']!r}: {len(tokens.tokens)} tokens, sum {tokens.logprob:.3f}"
            ):
                if variant == "chat template":
                    st.code(entry["context"], language=None, wrap_lines=True)
                st.dataframe(
                    pd.DataFrame(
                        [
                            {
                                "token": t.token,
                                "logprob": t.logprob,
                                "rank": t.rank,
                                "top alternatives": ", ".join(f"{alt!r} {lp:.2f}" for alt, lp in t.top),
                            }
                            for t in tokens.tokens
                        ]
                    ),
                    hide_index=True,
                    width="stretch",
                )


def next_token_tab(spec: ModelSpec) -> None:
    prompt = st.text_area("Prompt", key="next-prompt")
    cols = st.columns(2)
    k = int(cols[0].number_input("k", 1, 20, 10, key="next-k"))
    templated = cols[1].checkbox("Send it as a user message through the chat template", key="next-chat")
    if not st.button("Next token", key="next-go", type="primary"):
        return

    def ask(engine: Any) -> tuple[str, list[tuple[str, float]]]:
        text = inspection.chat_text(engine, [{"role": "user", "content": prompt}]) if templated else prompt
        return text, inspection.next_tokens(engine, text, k, templated=templated)

    found = with_engine(spec, ask)
    if found is None:
        return
    text, ranked = found
    if templated:
        st.code(text, language=None, wrap_lines=True)
    frame = pd.DataFrame([{"token": token, "logprob": lp, "probability": math.exp(lp)} for token, lp in ranked])
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        key="next-table",
        column_config={
            "probability": st.column_config.ProgressColumn("probability", min_value=0.0, max_value=1.0, format="%.3f")
        },
    )
