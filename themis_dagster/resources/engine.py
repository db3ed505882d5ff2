"""Engine resources: one engine per run, started on first use, released at teardown.

Assets ask ``engine.engine_for(spec, weights)``; the resource chooses the implementation.
Which resource backs the ``engine`` key is decided by configuration (``THEMIS_ENGINE``),
not by editing assets.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, ClassVar, Self

from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr

from themis_dagster.engines.base import Engine, EngineInfo
from themis_dagster.engines.fake import DEFAULT_STEP_SIZE, FakeEngine
from themis_dagster.engines.precision import resolved
from themis_dagster.engines.reasoning import ReasoningSplitter, with_reasoning_budget
from themis_dagster.mitigations.engine import mitigated
from themis_dagster.registry.engine_args import FakeEngineArgs
from themis_dagster.registry.model_engine import kind_args
from themis_dagster.registry.models import ApiSource, ModelSpec
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources.openai_config import openai_config_for
from themis_dagster.runs.devices import assign_devices, parse_devices, release_devices
from themis_dagster.settings import Settings

# Engines kept alive across runs of one process (``keep_warm``), e.g. by ``themis run``,
# which evaluates every task of a model in successive in-process runs.
_WARM: dict[tuple[str, str], Engine] = {}
_WARM_LOCK = threading.Lock()


class EngineResource(ConfigurableResource):  # type: ignore[type-arg]
    """Base class: hands out the run's engine for a model, loading it at most once per run."""

    keep_warm: bool = False
    devices: str = (
        ""  # accelerators this host lends runs, e.g. "0,1,2,3" (THEMIS_DEVICES; themis_dagster/runs/devices.py)
    )
    claims_devices: ClassVar[bool] = True  # False where the engine lives outside the run (a shared server)

    _engine: Any = PrivateAttr(default=None)
    _served: Any = PrivateAttr(default=None)  # _engine, or _engine with the model's mitigation around it
    _context: InitResourceContext | None = PrivateAttr(default=None)
    _claimed: bool = PrivateAttr(default=False)
    _key: tuple[str, str] | None = PrivateAttr(default=None)
    _loaded_now: bool = PrivateAttr(default=False)
    loads: ClassVar[int] = 0  # engines built by this process (tests count loads with it)

    @classmethod
    def from_settings(cls, settings: Settings, keep_warm: bool = False) -> Self:
        """This resource for a deployment; a resource with settings of its own reads them here."""
        return cls(keep_warm=keep_warm, devices=settings.devices)

    def _build(self, spec: ModelSpec, weights: ResolvedWeights) -> Engine:
        raise NotImplementedError

    def output_identity(self) -> dict[str, str]:
        """What about this engine can change an answer (part of every request fingerprint)."""
        return {"engine": type(self).__name__}

    def _build_for(self, spec: ModelSpec, weights: ResolvedWeights) -> Engine:
        """Models behind an API are always answered over HTTP; the others by this resource's engine."""
        if isinstance(spec.source, ApiSource):
            from themis_dagster.engines.openai.engine import OpenAICompatibleEngine

            config = openai_config_for(
                spec,
                base_url=spec.source.base_url,
                model=spec.source.model,
                api_key_env=spec.source.api_key_env,
                max_concurrency=spec.source.max_concurrency,
            )
            return OpenAICompatibleEngine(config, model_path=weights.path)
        return self._build(spec, weights)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._context = context

    def _claim_devices(self, spec: ModelSpec) -> None:
        """Point this run's engine at GPUs no other run holds (only where ``devices`` lends some)."""
        context = self._context
        if not (self.devices and self.claims_devices) or self._claimed or isinstance(spec.source, ApiSource):
            return
        if context is None or context.instance is None or context.run_id is None:
            return
        log = context.log.info if context.log is not None else None
        chosen = assign_devices(
            context.instance, context.run_id, spec.engine.gpu_count, parse_devices(self.devices), log
        )
        if log is not None:
            log(f"engine of {spec.id} on devices {','.join(chosen)} (CUDA_VISIBLE_DEVICES)")
        self._claimed = True

    def engine_for(self, spec: ModelSpec, weights: ResolvedWeights) -> Engine:
        declared_spec = spec  # the engine resolves dtype: auto itself and says why (a resolved spec reads as pinned)
        spec, _ = resolved(spec, Path(weights.path))  # dtype: auto and its resolution share one engine
        # a mitigation variant shares its parent's loaded engine, wrapped (themis_dagster/mitigations/)
        declared = spec.model_dump_json(exclude={"id", "description", "parent", "mitigation"})
        key = (declared, f"{weights.weights_sha256}+{weights.lora_sha256 or ''}")
        if self._engine is not None and self._key == key:
            self._loaded_now = False
            self._served = mitigated(with_reasoning_budget(self._engine, spec.reasoning), spec.mitigation)
            return self._served  # type: ignore[no-any-return]
        self.release()
        self._claim_devices(spec)
        with _WARM_LOCK:
            engine = _WARM.get(key) if self.keep_warm else None
            self._loaded_now = engine is None
            if engine is None:
                engine = self._build_for(declared_spec, weights)
                EngineResource.loads += 1
                if self.keep_warm:
                    _WARM[key] = engine
        self._engine, self._key = engine, key
        self._served = mitigated(with_reasoning_budget(engine, spec.reasoning), spec.mitigation)
        return self._served  # type: ignore[no-any-return]

    def loaded_info(self) -> EngineInfo | None:
        """The facts of the engine this run holds (None before ``engine_for``)."""
        return None if self._served is None else self._served.info  # a variant's: with its mitigation

    @property
    def loaded_in_last_call(self) -> bool:
        """Whether the last ``engine_for`` built the engine (False: reused a warm one)."""
        return self._loaded_now

    def release(self) -> None:
        """Drop this run's engine; shut it down unless it is kept warm for later runs."""
        if self._engine is not None and not self.keep_warm:
            self._engine.shutdown()
        self._engine, self._key, self._served = None, None, None

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        self.release()
        if self._claimed and context.instance is not None and context.run_id is not None:
            release_devices(context.instance, context.run_id, record=True)
            self._claimed = False


class VLLMResource(EngineResource):
    """The vLLM engine (GPU in production, vLLM's CPU build here); same code on both."""

    def _build(self, spec: ModelSpec, weights: ResolvedWeights) -> Engine:
        from themis_dagster.engines.vllm.engine import VLLMEngine

        return VLLMEngine(spec, weights.path)


class FakeEngineResource(EngineResource):
    """Deterministic fake engine for fast tests of the graph's plumbing."""

    reply: str = "1"
    latency_s: float = 0.0  # seconds each engine call takes (simulates an accelerator's batch time)
    per_request_s: float = 0.0  # seconds each answer takes inside a call
    step_size: int = DEFAULT_STEP_SIZE  # answers per engine step, handed on together

    @classmethod
    def from_settings(cls, settings: Settings, keep_warm: bool = False) -> Self:
        """A deployment's fake engine takes ``THEMIS_FAKE_ENGINE_LATENCY_S`` per call (fault and scale tests)."""
        return cls(keep_warm=keep_warm, latency_s=settings.fake_engine_latency_s)

    def output_identity(self) -> dict[str, str]:
        return super().output_identity() | {"reply": self.reply}

    def _build(self, spec: ModelSpec, weights: ResolvedWeights) -> Engine:
        args = kind_args(spec, FakeEngineArgs, "fake") or FakeEngineArgs()  # the model's own, else the resource's
        fixed = self.reply if args.reply is None else args.reply
        return FakeEngine(
            weights.path,
            reply=lambda prompt: fixed,
            latency_s=self.latency_s if args.latency_s is None else args.latency_s,
            per_request_s=self.per_request_s if args.per_request_s is None else args.per_request_s,
            step_size=self.step_size if args.step_size is None else args.step_size,
            reasoning=fake_reasoning(spec),
        )


def fake_reasoning(spec: ModelSpec) -> ReasoningSplitter | None:
    """A reasoning model's vLLM parser over the fake engine's tokenizer (imports vLLM: only for such a model)."""
    if spec.reasoning is None:
        return None
    from themis_dagster.engines.fake import FakeTokenizer

    return ReasoningSplitter.load(spec.id, spec.reasoning, FakeTokenizer())


def shutdown_warm_engines(process_exiting: bool = False) -> None:
    """Shut down engines kept warm by ``keep_warm`` (call at process end).

    With ``process_exiting`` (the ``themis`` command, which then ends with ``os._exit``),
    engines that hold nothing outside this process (an in-process vLLM) are left to the
    operating system: their teardown only frees memory for a later engine (about 2 s).
    """
    with _WARM_LOCK:
        for engine in _WARM.values():
            if process_exiting and engine.in_process:
                continue
            engine.shutdown()
        _WARM.clear()
