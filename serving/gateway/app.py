"""The gateway's HTTP API: OpenAI-compatible ``/v1/chat/completions``, ``/v1/completions``
(both with SSE streaming) and ``/v1/models``.

Each request gets its user's arm, a lease on the arm's checkpoint, and is streamed from the
backend with token ids and logprobs; the client gets what it asked for plus the checkpoint
(``checkpoint_id`` and ``arm`` fields, ``X-Rewardstream-Checkpoint`` / ``-Arm`` headers), and
the finished completion is emitted as ``completion.served``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from infra.settings import Settings
from schemas.checkpoints import CheckpointEvent
from schemas.events import SamplingParams
from schemas.ids import uuid7
from serving.gateway.arms import ArmSplit, assign_arm
from serving.gateway.backend import BackendClient
from serving.gateway.errors import BackendError, GatewayError
from serving.gateway.follower import follow_checkpoints
from serving.gateway.metadata import RequestMetadata, extract_metadata
from serving.gateway.registry import Target
from serving.gateway.router import Router
from serving.gateway.sampling import resolve_sampling, sampling_bias_warnings
from serving.gateway.served import completion_served, event_finish_reason
from serving.gateway.sinks import EventSink
from serving.gateway.stream import ClientView, Kind, StreamAccumulator, assemble_response, \
    client_chunk
from serving.sse import sse_data, sse_done

__all__ = ["GatewayConfig", "create_gateway_app"]

log = logging.getLogger(__name__)
_PATHS: dict[Kind, str] = {"chat": "/v1/chat/completions", "completion": "/v1/completions"}


@dataclass(frozen=True)
class GatewayConfig:
    split: ArmSplit = field(default_factory=ArmSplit)
    public_model: str = "rewardstream"  # the name /v1/models lists
    base_checkpoint_id: str = "base"  # what events name the backend's base model as
    base_path: str | None = None  # full-model checkpoints at this path are the base itself
    backend_model: str | None = None  # the backend's base model name; asked when None
    default_max_tokens: int = 256
    reference_temperature: float = 1.0  # the trainer's; other temperatures are flagged
    model_family: str | None = None  # follow only checkpoints of this model
    follow: Settings | None = None  # follow the checkpoints topic of this deployment
    initial_registry: tuple[CheckpointEvent, ...] = ()
    catch_up_timeout_s: float = 15.0


@dataclass
class _Exchange:
    """One request in flight: what it was asked, where it goes, what came back so far."""

    kind: Kind
    body: dict[str, Any]
    meta: RequestMetadata
    arm: str
    sampling: SamplingParams
    view: ClientView
    started_s: float
    completion_id: str
    acc: StreamAccumulator
    target: Target | None = None
    first_token_s: float | None = None
    warnings: list[str] = field(default_factory=list)

    def stamp(self, public_model: str) -> dict[str, Any]:
        assert self.target is not None
        return {"id": self.completion_id, "model": self.body.get("model") or public_model,
                "checkpoint_id": self.target.checkpoint_id, "arm": self.arm}

    def headers(self) -> dict[str, str]:
        assert self.target is not None
        headers = {"X-Rewardstream-Checkpoint": self.target.checkpoint_id,
                   "X-Rewardstream-Arm": self.arm,
                   "X-Rewardstream-Trajectory-Id": self.meta.trajectory_id,
                   "X-Rewardstream-Completion-Id": self.completion_id}
        if self.warnings:
            headers["X-Rewardstream-Sampling-Warning"] = "; ".join(self.warnings)
        return headers


def _backend_body(ex: _Exchange, served_name: str) -> dict[str, Any]:
    """The client's body with what the gateway needs forced on: streaming with usage, token
    ids, per-token logprobs, and explicit sampling parameters (never the backend's defaults)."""
    body = {k: v for k, v in ex.body.items() if k not in ("metadata", "max_completion_tokens")}
    body |= {
        "model": served_name, "stream": True, "stream_options": {"include_usage": True},
        "return_token_ids": True, "temperature": ex.sampling.temperature,
        "top_p": ex.sampling.top_p, "top_k": ex.sampling.top_k,
        "max_tokens": ex.sampling.max_tokens,
    }
    if ex.kind == "chat":
        body["logprobs"] = True
    elif body.get("logprobs") is None:
        body["logprobs"] = 0  # the sampled token's logprob, no alternatives
    return body


class _Gateway:
    def __init__(self, config: GatewayConfig, backend: BackendClient, sink: EventSink) -> None:
        self.config = config
        self.backend = backend
        self.sink = sink
        self.router: Router | None = None
        self.caught_up = asyncio.Event()

    async def start(self) -> asyncio.Task[None] | None:
        base_name = self.config.backend_model or await self.backend.base_model()
        base = Target(self.config.base_checkpoint_id, base_name)
        self.router = Router(self.backend, self.config.split, base, self.config.base_path)
        await self.router.adopt_backend_adapters()
        if self.config.initial_registry:
            await self.router.apply({e.checkpoint_id: e for e in self.config.initial_registry})
        if self.config.follow is None:
            return None
        task = asyncio.create_task(follow_checkpoints(
            self.config.follow.bootstrap_servers, self.config.follow.topic_prefix,
            self.router.apply, self.caught_up, self.config.model_family,
        ))
        try:
            await asyncio.wait_for(self.caught_up.wait(), self.config.catch_up_timeout_s)
        except TimeoutError:
            log.warning("checkpoints not replayed within %ss; serving the base model until then",
                        self.config.catch_up_timeout_s)
        return task

    def exchange(self, kind: Kind, body: dict[str, Any], request: Request) -> _Exchange:
        if body.get("n", 1) != 1:
            raise GatewayError("n must be 1: each completion is its own trajectory step")
        meta = extract_metadata(request.headers, body)
        sampling = resolve_sampling(body, self.config.default_max_tokens)
        asked_logprobs = bool(body.get("logprobs")) if kind == "chat" else \
            body.get("logprobs") is not None
        view = ClientView(kind, asked_logprobs, bool(body.get("return_token_ids")),
                          bool((body.get("stream_options") or {}).get("include_usage")))
        ex = _Exchange(kind, body, meta, assign_arm(meta.user, self.config.split), sampling,
                       view, time.perf_counter(), f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-"
                       f"{uuid7().hex}", StreamAccumulator(kind))
        ex.warnings = sampling_bias_warnings(sampling, body, self.config.reference_temperature)
        if ex.warnings:
            log.warning("completion %s: %s", ex.completion_id, "; ".join(ex.warnings))
        return ex

    async def open(self, ex: _Exchange) -> tuple[AsyncExitStack, Any]:
        """Lease the arm's checkpoint and open the backend stream; both end with the stack."""
        assert self.router is not None
        stack = AsyncExitStack()
        try:
            ex.target = await stack.enter_async_context(self.router.lease(ex.arm))
            stream = await self.backend.open_stream(
                _PATHS[ex.kind], _backend_body(ex, ex.target.served_name))
            stack.push_async_callback(stream.aclose)
        except BaseException:
            await stack.aclose()
            raise
        return stack, stream

    async def relay(self, ex: _Exchange, stack: AsyncExitStack,
                    stream: Any) -> AsyncIterator[dict[str, Any]]:
        """The client's chunks; emits ``completion.served`` however the stream ends."""
        finish: str | None = None
        stamp = ex.stamp(self.config.public_model)
        try:
            async for chunk in stream:
                if ex.acc.add(chunk) and ex.first_token_s is None:
                    ex.first_token_s = time.perf_counter()
                if (out := client_chunk(chunk, ex.view, stamp)) is not None:
                    yield out
            finish = event_finish_reason(ex.acc.finish_reason)
        except BackendError:
            finish = "error"
            raise
        finally:
            await stack.aclose()
            self.emit(ex, finish or "abort")

    def emit(self, ex: _Exchange, finish_reason: str) -> None:
        if not ex.acc.prompt_token_ids or ex.target is None:
            return  # nothing was generated: no completion to record
        now_s = time.perf_counter()
        event = completion_served(
            meta=ex.meta, arm=ex.arm, target=ex.target, completion_id=ex.completion_id,
            sampling=ex.sampling, acc=ex.acc,
            ttft_ms=((ex.first_token_s or now_s) - ex.started_s) * 1000.0,
            latency_ms=(now_s - ex.started_s) * 1000.0, finish_reason=finish_reason,
            now=datetime.now(UTC),
        )
        try:
            self.sink.emit(event)
        except Exception as exc:  # serving must not fail because telemetry did
            log.error("completion.served %s not emitted: %s", ex.completion_id, exc)

    async def respond(self, kind: Kind, request: Request) -> Any:
        body = await request.json()
        if not isinstance(body, dict):
            raise GatewayError("the request body must be a JSON object")
        ex = self.exchange(kind, body, request)
        stack, stream = await self.open(ex)
        chunks = self.relay(ex, stack, stream)
        if body.get("stream"):
            return StreamingResponse(_sse(chunks), media_type="text/event-stream",
                                     headers=ex.headers())
        async for _ in chunks:
            pass
        response = assemble_response(ex.acc, ex.view, ex.stamp(self.config.public_model),
                                     int(time.time()))
        return JSONResponse(response, headers=ex.headers())

    def health(self) -> dict[str, str]:
        """``checkpoints``: static (not following), replaying, or following (caught up)."""
        if self.config.follow is None:
            state = "static"
        else:
            state = "following" if self.caught_up.is_set() else "replaying"
        return {"status": "ok", "checkpoints": state}

    def models(self) -> dict[str, Any]:
        targets = self.router.targets if self.router else {}
        return {"object": "list", "data": [{
            "id": self.config.public_model, "object": "model", "owned_by": "rewardstream",
            "created": int(time.time()),
            "arms": {arm: {"checkpoint_id": t.checkpoint_id, "served_name": t.served_name}
                     for arm, t in targets.items()},
        }]}


async def _sse(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    try:
        async for chunk in chunks:
            yield sse_data(chunk)
    except BackendError as exc:  # the status line is gone; report in-band, as vLLM does
        yield sse_data({"error": {"message": str(exc), "type": "BackendError",
                                  "code": exc.status_code}})
    yield sse_done()


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status)


def create_gateway_app(config: GatewayConfig, backend: BackendClient, sink: EventSink) -> FastAPI:
    gateway = _Gateway(config, backend, sink)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        task = await gateway.start()
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            await backend.aclose()
            sink.close()

    app = FastAPI(title="rewardstream model gateway", lifespan=lifespan)
    app.state.gateway = gateway

    @app.exception_handler(BackendError)
    async def _backend_error(_request: Request, exc: BackendError) -> JSONResponse:
        return _error(exc.status_code, str(exc), "BackendError")

    @app.exception_handler(GatewayError)
    async def _gateway_error(_request: Request, exc: GatewayError) -> JSONResponse:
        return _error(400, str(exc), "BadRequestError")

    @app.get("/health")
    async def health() -> dict[str, str]:
        return gateway.health()

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return gateway.models()

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        return await gateway.respond("chat", request)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        return await gateway.respond("completion", request)

    return app
