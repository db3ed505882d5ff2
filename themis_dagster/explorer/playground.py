"""Playground: chat with a registered model, ask again a stored request, ask as different people, score
completions token by token, see the next token's top k.

Requests go through the platform's engine (``THEMIS_ENGINE``, from the engine registry; the
OpenAI-compatible engine for a running ``vllm-server`` and API models), loaded only while the
playground holds a slot of the ``engine`` pool runs take (``engine_slot``), its load followed on
the page. The engine stays warm for the keep-warm time chosen here. "Ask again" links from the
drill-down open here with the stored request (``?model=...&task=...&request=...``), and the new
reply is shown beside the stored one. "Ask as" sends the same message as several people (a name or
a persona said in the first person, or a persona in a system message) and shows their replies side by side.
"""

from __future__ import annotations

import math
from typing import Any

import streamlit as st

from themis_dagster.exchange import ChatMessage, GenerationParams, Request
from themis_dagster.explorer import data, ui
from themis_dagster.explorer.engine_slot import needs_slot, shared_slot
from themis_dagster.explorer.playground_tools import (
    next_token_tab,
    redact_secrets,
    sampling,
    scoring_tab,
    stream_chat,
    streams,
    with_engine,
)
from themis_dagster.registry.models import ApiSource, ModelSpec

KEEP_WARM = {
    "2 minutes": 120.0,
    "10 minutes": 600.0,
    "30 minutes": 1800.0,
    "1 hour": 3600.0,
    "until released": math.inf,
}
FRAMINGS = {
    "My name is {who}.": "My name is {who}. {message}",
    "As {who}, ...": "As {who}, {message}",
    "I am {who}.": "I am {who}. {message}",
    "System: you are {who}.": "{message}",  # the persona in a system message, as a persona poll's chat variant asks
}
# Framings that put the persona in a system message before the conversation (the message itself unchanged). A
# comment, not a string: Streamlit writes a page script's bare strings on the page ("magic").
PERSONA_SYSTEM = {"System: you are {who}.": "You are {who}. Answer as this person would."}
DEFAULT_PEOPLE = "Emily, Lakisha, Greg, Jamal"  # names of the callback study (Bertrand & Mullainathan 2004)

__all__ = ["redact_secrets", "render"]


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


def persona_system(framing: str, who: str) -> list[ChatMessage]:
    """The system message a framing puts before the conversation for ``who`` (none for a first-person framing)."""
    said = PERSONA_SYSTEM.get(framing)
    return [] if said is None else [{"role": "system", "content": said.format(who=who)}]


def ask_as(message: str, people: list[str], framing: str) -> list[tuple[str, str]]:
    """The message as each person would send it (``framing``: one of :data:`FRAMINGS`)."""
    template = FRAMINGS[framing]
    return [(who, template.format(who=who, message=message)) for who in people]


def _answer(
    spec: ModelSpec, conversation: list[ChatMessage], params: GenerationParams, completion: bool = False
) -> tuple[str, str] | None:
    """The reply to ``conversation`` (``completion``: its last message continued as plain text, as a ``generate``
    request is), streamed where it can be; (reply, what the model saw) or None (the error is shown)."""
    sent: list[str] = []

    def ask(engine: Any) -> str:
        if streams(spec, params) and not completion:
            return str(st.write_stream(stream_chat(engine, conversation, params, sent)))
        request = (
            Request.completion(conversation[-1]["content"], "playground")
            if completion
            else Request.conversation(conversation, "playground")
        )
        answer = (engine.generate if completion else engine.chat)([request], params)[0]
        sent.append(answer.prompt_text or "")
        if answer.error:
            st.error(redact_secrets(answer.error, spec))
        st.text(answer.text or "")
        return str(answer.text or "")

    with st.chat_message("assistant"):
        reply = with_engine(spec, ask)
    return None if reply is None else (reply, sent[0] if sent else "")


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
    params = sampling(stored, "chat")
    st.caption(
        f"Sampling: {params.model_dump_json()}"
        + (
            " · streamed"
            if streams(spec, params)
            else " · not streamed (sampling, or a reasoning model: the reply comes whole)"
        )
    )
    history: list[ChatMessage] = st.session_state[history_key]
    conversation_area = st.container()
    with conversation_area:
        for message in history:
            with st.chat_message(message["role"]):
                st.text(message["content"])
    with st.expander("Ask as different people (the same message, side by side)"):
        people_text = st.text_input("People (names or personas, comma-separated)", DEFAULT_PEOPLE, key="ask-as")
        framing = st.selectbox("Said as", list(FRAMINGS), key="ask-as-framing")
        as_people = st.toggle("Ask as these people", key="ask-as-on")
    with st.form("chat-form"):
        text = st.text_area("Your message", key=f"{history_key}-draft")
        sent = st.form_submit_button("Send")
    if st.button("Clear the conversation", key="chat-clear"):
        st.session_state[history_key] = []
        st.rerun()
    if not sent or not text.strip():
        return
    people = [p.strip() for p in people_text.split(",") if p.strip()]
    with conversation_area:
        if as_people and people:
            _as_people(spec, history, text, people, str(framing), params)
            return
        conversation = [*history, {"role": "user", "content": text}]
        kind = stored.get("request_type") if stored is not None else None
        # the first message after "ask again" is the stored request itself
        again = kind in ("chat", "generate") and len(history) == len(_stored_history(stored or {}))
        completion = again and kind == "generate"
        with st.chat_message("user"):
            st.text(text + ("  (continued as plain text, as the task sent it)" if completion else ""))
        answered = _answer(spec, conversation, params, completion)
        if answered is None:
            return
        reply, seen = answered
        st.session_state[history_key] = [*conversation, {"role": "assistant", "content": reply}]
        if again and stored is not None:
            _beside_stored(stored, reply)
        with st.expander("Exactly what the model saw"):
            st.code(seen, language=None, wrap_lines=True)


def _stored_history(stored: dict[str, Any]) -> list[Any]:
    messages = stored.get("messages")
    return list(messages[:-1]) if isinstance(messages, list) else []


def _beside_stored(stored: dict[str, Any], reply: str) -> None:
    """The stored reply of the request asked again beside the new one, and whether they are the same."""
    old = str(stored.get("reply") or "")
    same = old.strip() == reply.strip()
    st.markdown(
        f"**Asked again**: the new reply is {'the same as' if same else 'not the same as'} the stored one "
        f"({stored['task']} · {stored['request_id']})."
    )
    left, right = st.columns(2)
    left.text("stored reply:")
    left.code(old, language=None, wrap_lines=True)
    right.text("new reply:")
    right.code(reply, language=None, wrap_lines=True)


def _as_people(
    spec: ModelSpec, history: list[ChatMessage], text: str, people: list[str], framing: str, params: GenerationParams
) -> None:
    """The same message sent as each person, the replies side by side (the conversation itself is not extended)."""
    asked = ask_as(text, people, framing)
    requests = [
        Request.conversation([*persona_system(framing, who), *history, {"role": "user", "content": m}], f"as-{i}")
        for i, (who, m) in enumerate(asked)
    ]
    answers = with_engine(spec, lambda engine: engine.chat(requests, params))
    if answers is None:
        return
    st.markdown(f"**The same message as {len(people)} people** ({framing})")
    for column, (who, message), answer in zip(
        st.columns(min(len(people), 4)) * math.ceil(len(people) / 4), asked, answers, strict=False
    ):
        with column:
            st.markdown(f"**{who}**")
            st.caption(" · ".join([*(m["content"] for m in persona_system(framing, who)), message]))
            st.code(answer.text or "", language=None, wrap_lines=True)
            if answer.error:
                st.error(redact_secrets(answer.error, spec))


def _engine_status(place: Any, spec: ModelSpec, slot_needed: bool) -> None:
    """The engine in words: which model is warm, how long it took to load, how long it stays warm idle."""
    slot = shared_slot()
    warm = slot.warm()
    with place:
        cols = st.columns([3, 1, 1])
        if warm is None:
            cols[0].caption("Engine: none warm; the first request loads it here (its progress is shown).")
        else:
            keep = "until released" if math.isinf(warm["keep_warm_s"]) else f"{warm['keep_warm_s'] / 60:g} min idle"
            cols[0].caption(
                f"Warm engine: **{warm['model']}** · loaded in {warm['load_s']:.0f} s · idle "
                f"{warm['idle_s']:.0f} s · kept warm {keep}"
                + (" · holds a slot of the engine pool" if warm["holds_slot"] else "")
            )
            if cols[2].button("Release the engine", key="release"):
                slot.release()
                st.rerun()
        current = slot.keep_warm_s()
        labels = list(KEEP_WARM)
        index = next((i for i, v in enumerate(KEEP_WARM.values()) if v == current), 0)
        chosen = cols[1].selectbox(
            "Keep warm",
            labels,
            index=index,
            key="keep-warm",
            help="how long an idle engine stays loaded (a run waiting for the engine pool takes it back at once)",
        )
        slot.idle_s = KEEP_WARM[str(chosen)]


def render() -> None:
    ui.header(
        "Playground",
        "Ask a registered model through the platform's engine: in process, a running vllm-server or "
        "an API. An engine is loaded here only while no run holds the accelerator (the engine pool runs take).",
    )
    models = ui.registry()
    if not models:
        ui.fail("No registered model: declare one in data/models.yaml (README, Models).")
    wanted = ui.registered_model_param(models)
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
    status = st.container()
    if stored:
        st.info(
            f"Asking again: request {stored['request_id']} of {stored['task']} ({stored['request_type']}); the "
            "new answer is shown beside the stored one."
        )
    chat, scoring, nxt = st.tabs(["Chat", "Completion probabilities", "Next token"])
    with chat:
        chat_tab(spec, stored)
    with scoring:
        scoring_tab(spec, stored)
    with nxt:
        next_token_tab(spec)
    _engine_status(status, spec, slot_needed)  # last: it says what this run's requests left warm


if __name__ == "__main__":
    render()
