"""The gateway's HTTP API: OpenAI-compatible ``/v1/chat/completions``, ``/v1/completions``
(both with SSE streaming) and ``/v1/models``.

Each request gets its user's arm, a lease on the arm's checkpoint, and is streamed from the
backend with token ids and logprobs; the client gets what it asked for plus the checkpoint
(``checkpoint_id`` and ``arm`` fields, ``X-Rewardstream-Checkpoint`` / ``-Arm`` headers), and
the finished completion is emitted as ``completion.served``. A chat request that offers tools
is also judged by the gateway (``toolcheck.py``): each broken call is emitted as ``tool.called``
with ``valid: false`` and listed to the client as ``broken_tool_calls``.

Every ``/v1`` route needs a gateway API key (``auth.py``); the key names the org of every event
the request writes and its user is pseudonymised as ingest does, so a trajectory id is one
org's: the same id sent with another org's key is another trajectory. Which trajectory, session
and user a request belongs to (headers, ``metadata``, W3C trace context): ``metadata.py``.
Refusals are OpenAI's error shape (``serving.openai_errors``). ``/livez``, ``/readyz`` and the
OpenAPI document are open.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from infra.settings import Settings
from schemas.checkpoints import CheckpointEvent, Registry
from schemas.events import Event, FinishReason, finish_reason_of
from schemas.ids import uuid7
from serving.gateway.arms import ArmSplit, assign_arm
from serving.gateway.auth import AuthError, Gatekeeper, GatewayAuth
from serving.gateway.backend import BackendClient
from serving.gateway.capture import captured_text
from serving.gateway.errors import BackendError, GatewayError
from serving.gateway.exchange import Exchange, backend_body
from serving.gateway.follower import follow_checkpoints
from serving.gateway.metadata import extract_metadata
from serving.gateway.registry import Target
from serving.gateway.request import (
    ChatCompletionRequest,
    CompletionRequest,
    RequestLimits,
    check_limits,
    check_prompt_tokens,
    validate_request,
)
from serving.gateway.router import Router
from serving.gateway.sampling import resolve_sampling, sampling_bias_warnings
from serving.gateway.served import broken_call_events, completion_served
from serving.gateway.sinks import EventSink
from serving.gateway.stream import (
    ClientView,
    Kind,
    StreamAccumulator,
    assemble_response,
    client_chunk,
)
from serving.gateway.toolcheck import offered_tools
from serving.ingest.keys import ApiKey
from serving.openai_errors import INVALID_REQUEST, error_body
from serving.request_body import BODY_ERRORS, json_object, openapi_document
from serving.sse import sse_data, sse_done
from serving.textpolicy import TextPolicy

__all__ = ["GatewayConfig", "create_gateway_app"]

log = logging.getLogger(__name__)
_PATHS: dict[Kind, str] = {"chat": "/v1/chat/completions", "completion": "/v1/completions"}
_REQUESTS: dict[Kind, type[ChatCompletionRequest | CompletionRequest]] = {
    "chat": ChatCompletionRequest, "completion": CompletionRequest}


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
    max_request_bytes: int = 8 << 20  # a 65,536-token prompt is under 1 MiB of JSON
    limits: RequestLimits = field(default_factory=RequestLimits)
    text_policy: TextPolicy = field(default_factory=TextPolicy)  # what text events may carry


class _Gateway:
    def __init__(self, config: GatewayConfig, backend: BackendClient, sink: EventSink,
                 auth: GatewayAuth) -> None:
        self.config = config
        self.backend = backend
        self.sink = sink
        self.gatekeeper = Gatekeeper(auth)
        self.router: Router | None = None
        self.caught_up = asyncio.Event()

    async def start(self) -> asyncio.Task[None] | None:
        base_name = self.config.backend_model or await self.backend.base_model()
        base = Target(self.config.base_checkpoint_id, base_name)
        self.router = Router(self.backend, self.config.split, base, self.config.base_path)
        await self.router.adopt_backend_adapters()
        if self.config.initial_registry:
            await self.router.apply(Registry(self.config.initial_registry))
        if self.config.follow is None:
            return None
        task = asyncio.create_task(follow_checkpoints(
            self.config.follow, self.router.apply, self.caught_up, self.config.model_family))
        try:
            await asyncio.wait_for(self.caught_up.wait(), self.config.catch_up_timeout_s)
        except TimeoutError:
            log.warning("checkpoints not replayed within %ss; serving the base model until then",
                        self.config.catch_up_timeout_s)
        return task

    def exchange(self, kind: Kind, body: dict[str, Any], request: Request,
                 key: ApiKey) -> Exchange:
        validate_request(_REQUESTS[kind], body)
        check_limits(kind, body, self.config.limits)
        org_id = key.org_id
        meta = extract_metadata(request.headers, body, org_id, key.trust_baggage)
        canary = self.router.canary if self.router is not None else None
        arm = assign_arm(meta.user, self.config.split, org_id, canary)
        meta = replace(meta, user=self.gatekeeper.pseudonym(org_id, meta.user))
        sampling = resolve_sampling(body, self.config.default_max_tokens)
        asked_logprobs = bool(body.get("logprobs")) if kind == "chat" else \
            body.get("logprobs") is not None
        view = ClientView(kind, asked_logprobs, bool(body.get("return_token_ids")),
                          bool((body.get("stream_options") or {}).get("include_usage")))
        completion_id = f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{uuid7().hex}"
        ex = Exchange(kind, body, org_id, meta, arm, sampling, view, time.perf_counter(),
                      completion_id, StreamAccumulator(kind))
        ex.warnings = sampling_bias_warnings(sampling, body, self.config.reference_temperature)
        ex.tools = offered_tools(kind, body)
        if ex.warnings:
            log.warning("completion %s: %s", ex.completion_id, "; ".join(ex.warnings))
        return ex

    async def open(self, ex: Exchange) -> tuple[AsyncExitStack, AsyncIterator[dict[str, Any]]]:
        """Lease the arm's checkpoint and open the backend stream; both end with the stack.

        The backend's first chunk is read here, before the client gets an answer: it carries
        the prompt's token ids, and a prompt over the token limit is refused with a 400."""
        assert self.router is not None
        stack = AsyncExitStack()
        try:
            ex.target = await stack.enter_async_context(self.router.lease(ex.arm))
            stream = await self.backend.open_stream(
                _PATHS[ex.kind], backend_body(ex, ex.target.served_name))
            stack.push_async_callback(stream.aclose)
            chunks = aiter(stream)
            stack.push_async_callback(chunks.aclose)  # type: ignore[attr-defined]
            first = await anext(chunks, None)
            if first is not None:
                probe = StreamAccumulator(ex.kind)
                probe.add(first)
                check_prompt_tokens(ex.kind, len(probe.prompt_token_ids), self.config.limits)
        except BaseException:
            await stack.aclose()
            raise
        return stack, _prepend(first, chunks)

    async def relay(self, ex: Exchange, stack: AsyncExitStack,
                    stream: AsyncIterator[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        """The client's chunks; emits ``completion.served`` however the stream ends."""
        finish: FinishReason | None = None
        stamp = ex.stamp(self.config.public_model)
        try:
            async for chunk in stream:
                if ex.acc.add(chunk) and ex.first_token_s is None:
                    ex.first_token_s = time.perf_counter()
                if (out := client_chunk(chunk, ex.view, stamp)) is not None:
                    if ex.tools is not None and ex.acc.finish_reason and ex.broken is None:
                        out |= ex.judge()  # on the chunk that finishes the reply
                    yield out
            # A stream that ended without a reason was cut short.
            finish = finish_reason_of(ex.acc.finish_reason, missing="abort")
        except BackendError:
            finish = "error"
            raise
        finally:
            await stack.aclose()
            self.emit(ex, finish or "abort")

    def emit(self, ex: Exchange, finish_reason: FinishReason) -> None:
        if not ex.acc.prompt_token_ids or ex.target is None:
            return  # nothing was generated: no completion to record
        now_s = time.perf_counter()
        try:  # serving must not fail because telemetry did (or a completion broke a bound)
            event = completion_served(
                meta=ex.meta, arm=ex.arm, target=ex.target, completion_id=ex.completion_id,
                sampling=ex.sampling, acc=ex.acc,
                ttft_ms=((ex.first_token_s or now_s) - ex.started_s) * 1000.0,
                latency_ms=(now_s - ex.started_s) * 1000.0, finish_reason=finish_reason,
                now=datetime.now(UTC), org_id=ex.org_id,
                text=captured_text(self.config.text_policy, ex.org_id, ex.kind, ex.body, ex.acc),
                tools_offered=[tool.name for tool in ex.tools.tools] if ex.tools else None,
            )
            broken = broken_call_events(meta=ex.meta, arm=ex.arm, target=ex.target,
                                        broken=ex.broken or [], now=datetime.now(UTC),
                                        org_id=ex.org_id, completion_id=ex.completion_id)
            events: list[Event] = [event, *broken]
            for each in events:
                self.sink.emit(each)
        except Exception as exc:
            log.error("completion.served %s not emitted: %s", ex.completion_id, exc)

    def admit(self, request: Request) -> ApiKey:
        """The request's API key (it names the org); raises :class:`AuthError`."""
        return self.gatekeeper.admit(request.headers, time.monotonic())

    async def respond(self, kind: Kind, request: Request) -> Any:
        key = self.admit(request)
        body = await json_object(request, self.config.max_request_bytes)
        ex = self.exchange(kind, body, request, key)
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

    def readiness(self) -> tuple[bool, dict[str, str]]:
        """Ready once routing is known: ``checkpoints`` static (not following), replaying, or
        following (caught up with the registry)."""
        if self.config.follow is None:
            state = "static"
        else:
            state = "following" if self.caught_up.is_set() else "replaying"
        ready = self.router is not None and state != "replaying"
        return ready, {"status": "ready" if ready else "starting", "checkpoints": state}

    def models(self) -> dict[str, Any]:
        targets = self.router.targets if self.router else {}
        return {"object": "list", "data": [{
            "id": self.config.public_model, "object": "model", "owned_by": "rewardstream",
            "created": int(time.time()),
            "arms": {arm: {"checkpoint_id": t.checkpoint_id, "served_name": t.served_name}
                     for arm, t in targets.items()},
        }]}


async def _prepend(first: dict[str, Any] | None,
                   rest: AsyncIterator[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    if first is not None:
        yield first
        async for chunk in rest:
            yield chunk


async def _sse(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    try:
        async for chunk in chunks:
            yield sse_data(chunk)
    except BackendError as exc:  # the status line is gone; report in-band, as vLLM does
        yield sse_data(exc.body())
    yield sse_done()


_AUTH_ERRORS = {401: ("authentication_error", "invalid_api_key"),
                403: ("permission_error", None), 429: ("rate_limit_error", "rate_limit_exceeded")}


def create_gateway_app(config: GatewayConfig, backend: BackendClient, sink: EventSink,
                       auth: GatewayAuth) -> FastAPI:
    gateway = _Gateway(config, backend, sink, auth)

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
    bodies = {_PATHS[kind]: model for kind, model in _REQUESTS.items()}
    app.openapi = lambda: openapi_document(app, bodies)  # type: ignore[method-assign]
    app.state.gateway = gateway

    @app.exception_handler(AuthError)
    async def _auth_error(_request: Request, exc: AuthError) -> JSONResponse:
        kind, code = _AUTH_ERRORS[exc.status_code]
        return JSONResponse(error_body(str(exc), kind, None, code), exc.status_code,
                            exc.headers())

    @app.exception_handler(GatewayError)  # BackendError too: the backend's status and param
    async def _gateway_error(_request: Request, exc: GatewayError) -> JSONResponse:
        return JSONResponse(exc.body(), exc.status_code)

    async def _unreadable(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, BODY_ERRORS)  # registered for these alone
        return JSONResponse(error_body(f"the request body cannot be read: {exc}",
                                       INVALID_REQUEST), exc.status_code)

    for error in BODY_ERRORS:
        app.add_exception_handler(error, _unreadable)

    @app.get("/livez", summary="Liveness: the process answers")
    async def livez() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", summary="Readiness: routing known (the registry replayed)")
    async def readyz() -> JSONResponse:
        ready, body = gateway.readiness()
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        gateway.admit(request)
        return gateway.models()

    @app.post(_PATHS["chat"])
    async def chat_completions(request: Request) -> Any:
        return await gateway.respond("chat", request)

    @app.post(_PATHS["completion"])
    async def completions(request: Request) -> Any:
        return await gateway.respond("completion", request)

    return app
