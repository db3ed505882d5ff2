"""Playground: chat with a registered model, score completions token by token, see the next token's top k.

Requests go through the platform's engine (``THEMIS_ENGINE``, from the engine registry; the
OpenAI-compatible engine for a running ``vllm-server`` and API models). An engine that loads on
this host's devices is built only while the playground holds a slot of the ``engine`` pool runs
take (``engine_slot``); while runs hold every slot it waits and says so. What an engine cannot
give (an API without log-probabilities) is said on the page, not raised. "Ask again" links from the
drill-down open here with the stored request (``?model=...&task=...&request=...``).
"""

from __future__ import annotations

import math
import os
from typing import Any

import pandas as pd
import streamlit as st

from themis_dagster.engines import inspection
from themis_dagster.engines.openai.errors import LoglikelihoodUnsupportedError
from themis_dagster.exchange import ChatMessage, GenerationParams, Request
from themis_dagster.explorer import data, ui
from themis_dagster.explorer.engine_slot import EngineBusyError, needs_slot, shared_slot
from themis_dagster.registry.models import ApiSource, ModelSpec

WAIT_S = 30.0


def redact_secrets(text: str, spec: ModelSpec) -> str:
    """``text`` without the value of the model's API key variable (an error message may echo it)."""
    variable = spec.source.api_key_env if isinstance(spec.source, ApiSource) else None
    for name in (variable, "THEMIS_OPENAI_API_KEY", "OPENAI_API_KEY"):
        secret = os.environ.get(name or "")
        if secret and len(secret) >= 4:
            text = text.replace(secret, data.REDACTED)
    return text


def _stored(model: str) -> dict[str, Any] | None:
    """The request an "ask again" link names (``task`` and ``request``), read from the warehouse."""
    task, request_id = ui.param("task"), ui.param("request")
    if task is None and request_id is None:
        return None
    if task is None or request_id is None:
        ui.fail("an ask-again link names both the task and the request (?task=...&request=...)")
    with ui.warehouse() as conn:
        data.check_task(conn, task, model)
        found = data.stored_request(conn, model, task, request_id)
    if found is None:
        ui.fail(f"unknown request {request_id!r}: {model} has no such request on {task}")
    return {**found, "task": task, "request_id": request_id}


def _sampling(stored: dict[str, Any] | None, key: str) -> GenerationParams:
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


def _say(place: Any, message: str) -> None:
    place.info(message)


def _with_engine(spec: ModelSpec, action: Any) -> Any:
    """Run ``action(engine)`` on the playground's engine; a busy pool or an engine error is shown, not raised."""
    notice = st.empty()
    try:
        with (
            st.spinner(f"Asking {spec.id}..."),
            shared_slot().engine(
                spec, ui.settings(), wait_s=WAIT_S, on_wait=lambda message: _say(notice, message)
            ) as engine,
        ):
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
    notice.empty()
    return result


def chat_tab(spec: ModelSpec, stored: dict[str, Any] | None) -> None:
    history_key = f"chat-{spec.id}"
    if history_key not in st.session_state:
        messages = stored.get("messages") if stored and stored.get("request_type") == "chat" else None
        st.session_state[history_key] = []
        st.session_state[f"{history_key}-draft"] = ""
        if isinstance(messages, list) and messages:
            st.session_state[history_key] = [dict(m) for m in messages[:-1]]
            st.session_state[f"{history_key}-draft"] = str(messages[-1].get("content", ""))
        elif stored and stored.get("request_type") == "generate":
            st.session_state[f"{history_key}-draft"] = str(stored.get("prompt") or "")
    params = _sampling(stored, "chat")
    st.caption(f"Sampling: {params.model_dump_json()}")
    history: list[ChatMessage] = st.session_state[history_key]
    for message in history:
        with st.chat_message(message["role"]):
            st.text(message["content"])
    with st.form("chat-form"):
        text = st.text_area("Your message", key=f"{history_key}-draft")
        sent = st.form_submit_button("Send")
    if st.button("Clear the conversation", key="chat-clear"):
        st.session_state[history_key] = []
        st.rerun()
    if not sent or not text.strip():
        return
    conversation = [*history, {"role": "user", "content": text}]
    reply = _with_engine(spec, lambda engine: engine.chat([Request.conversation(conversation, "playground")], params))
    if reply is None:
        return
    answer = reply[0]
    st.session_state[history_key] = [*conversation, {"role": "assistant", "content": answer.text or ""}]
    with st.chat_message("user"):
        st.text(text)
    with st.chat_message("assistant"):
        st.text(answer.text or "")
        if answer.error:
            st.error(redact_secrets(answer.error, spec))
        st.caption(
            f"{answer.n_prompt_tokens} prompt tokens, {answer.n_output_tokens} generated, "
            f"finish: {answer.finish_reason}"
        )
    with st.expander("Exactly what the model saw"):
        st.code(answer.prompt_text or "", language=None, wrap_lines=True)


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
    if stored and stored.get("request_type") == "loglikelihood" and "score-context" not in st.session_state:
        st.session_state["score-context"] = stored.get("context") or ""
        st.session_state["score-completions"] = stored.get("continuation") or ""
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

    found = _with_engine(spec, both)
    if found is None:
        return
    rows = []
    for variant, scored in found.items():
        if isinstance(scored, str):
            st.info(f"{variant}: {scored}")
            continue
        for entry in scored:
            answer = entry["answer"]
            rows.append(
                {
                    "variant": variant,
                    "completion": entry["completion"],
                    "loglikelihood": answer.logprob,
                    "greedy": answer.is_greedy,
                    "tokens": answer.n_continuation_tokens,
                    "error": answer.error,
                }
            )
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="score-table")
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

    found = _with_engine(spec, ask)
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


def render() -> None:
    ui.header(
        "Playground",
        "Ask a registered model through the platform's engine: in process, a running vllm-server or "
        "an API. An engine is loaded here only while no run holds the accelerator (the engine pool runs take).",
    )
    models = ui.registry()
    if not models:
        ui.fail("No registered model: declare one in data/models.yaml (README, Models).")
    wanted = ui.param("model")
    if wanted is not None:
        ui.valid_model_id(wanted)
        if wanted not in models:
            ui.fail(f"unknown model {wanted!r}: it is not in the model registry ({', '.join(list(models)[:20])})")
    model = ui.choose("Model", list(models), wanted, key="model", name="model")
    ui.set_params(model=model)
    spec = models[model]
    stored = _stored(model)
    source = spec.source
    settings = ui.settings()
    from themis_dagster.resources.engine_registry import engine_kind  # Dagster's resources: on this page only

    try:
        kind = engine_kind(settings.engine)
    except ValueError as error:
        ui.fail(str(error), "Set THEMIS_ENGINE to a registered engine (README, Engines).")
    slot_needed = needs_slot(spec, settings)
    engine_name = kind.describe(spec, slot_needed)
    key_note = ""
    if isinstance(source, ApiSource):
        key_note = f" · API key from ${source.api_key_env}" if source.api_key_env else " · no API key"
    st.caption(
        f"Engine: **{engine_name}** · source: {source.kind} · dtype {spec.dtype} · "
        f"chat template: {spec.chat_template or 'none (base model)'}{key_note}"
    )
    slot = shared_slot()
    loaded = slot.loaded()
    status = st.columns([3, 1])
    status[0].caption(f"Warm engine: {loaded or 'none'}" + (f" · {_pool_state(slot)}" if slot_needed else ""))
    if loaded and status[1].button("Release the engine", key="release"):
        slot.release()
        st.rerun()
    if stored:
        st.info(f"Asking again: request {stored['request_id']} of {stored['task']} ({stored['request_type']}).")
    chat, scoring, nxt = st.tabs(["Chat", "Completion probabilities", "Next token"])
    with chat:
        chat_tab(spec, stored)
    with scoring:
        scoring_tab(spec, stored)
    with nxt:
        next_token_tab(spec)


def _pool_state(slot: Any) -> str:
    try:
        return str(slot.pool_state())
    except Exception as error:  # noqa: BLE001 - the Dagster instance may be unreachable; the page still works
        return f"engine pool unknown ({type(error).__name__})"


if __name__ == "__main__":
    render()
