"""The torch engine's HTTP API: the subset of vLLM's OpenAI-compatible server the gateway uses,
in the same shapes (``/v1/completions``, ``/v1/chat/completions`` with SSE streaming,
``return_token_ids``, logprobs, stop sequences, penalties and ``logit_bias``,
``tools``/``tool_choice``/``parallel_tool_calls`` with ``tool_calls`` in replies and stream
deltas, ``/v1/models``, ``/v1/load_lora_adapter``, ``/v1/unload_lora_adapter``), so one client
serves both backends; refusals are OpenAI's error shape. How tools reach the prompt and how
calls are read back: ``serving.engine.chat`` and ``serving.engine.toolstream``; which
parameters work: ``serving.engine.protocol``."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from pydantic import BaseModel, ValidationError

from schemas.tooldefs import ToolRequestError, parse_tool_request
from serving.engine.chat import render_chat, renders_tools
from serving.engine.errors import AdapterNotFound, EngineError, UnsupportedRequest
from serving.engine.generator import GenerationRequest, StepOutput, TorchGenerator
from serving.engine.pieces import reply_pieces
from serving.engine.protocol import (
    DEFAULT_CHAT_TEMPLATE,
    ChatRequest,
    CompletionRequest,
    LoraRequest,
    chat_logprobs,
    completion_logprobs,
    usage,
)
from serving.engine.toolstream import ToolCallReader, tool_call_deltas
from serving.openai_errors import (
    INVALID_REQUEST,
    InvalidRequest,
    error_body,
    from_validation_errors,
    tool_request_param,
)
from serving.request_body import BODY_ERRORS, json_object, openapi_document
from serving.sse import sse_data, sse_done

__all__ = ["create_engine_app"]

_MAX_REQUEST_BYTES = 8 << 20
_BODIES: dict[str, type[BaseModel]] = {
    "/v1/completions": CompletionRequest, "/v1/chat/completions": ChatRequest,
    "/v1/load_lora_adapter": LoraRequest, "/v1/unload_lora_adapter": LoraRequest}
_Request = TypeVar("_Request", CompletionRequest, ChatRequest, LoraRequest)


class _Engine:
    def __init__(self, engine: TorchGenerator, served_model_name: str,
                 tool_call_parser: str) -> None:
        self.engine = engine
        self.name = served_model_name
        self.tokenizer = engine.tokenizer
        self.chat_template = self.tokenizer.chat_template or DEFAULT_CHAT_TEMPLATE
        self.native_tools = renders_tools(self.tokenizer, self.chat_template)
        self.tool_call_parser = tool_call_parser  # the syntax of templates that render tools

    def models(self) -> dict[str, Any]:
        created = int(time.time())
        data = [{"id": self.name, "object": "model", "created": created, "owned_by": "rewardstream",
                 "root": self.engine.model_dir, "parent": None}]
        data += [{"id": name, "object": "model", "created": created, "owned_by": "rewardstream",
                  "root": path, "parent": self.name}
                 for name, path in self.engine.adapters().items()]
        return {"object": "list", "data": data}

    def _chat_prompt(self, body: ChatRequest) -> tuple[list[int], str | None]:
        try:
            tools = parse_tool_request(body.model_dump(include={
                "tools", "tool_choice", "parallel_tool_calls"}))
        except ToolRequestError as exc:
            raise UnsupportedRequest(str(exc), tool_request_param(str(exc))) from None
        messages = [m.model_dump(exclude_none=True) for m in body.messages]
        rendered = render_chat(self.tokenizer, self.chat_template, self.native_tools,
                               messages, tools, self.tool_call_parser)
        return self.tokenizer(rendered.text, add_special_tokens=False).input_ids, rendered.syntax

    def generation_request(self, body: CompletionRequest | ChatRequest
                           ) -> tuple[GenerationRequest, str | None]:
        """The generation to run and, for a chat offering tools, the syntax its calls use."""
        body.refuse_unsupported()
        if body.model != self.name and body.model not in self.engine.adapters():
            raise AdapterNotFound(f"The model `{body.model}` does not exist.")
        syntax = None
        if isinstance(body, ChatRequest):
            prompt_ids, syntax = self._chat_prompt(body)
            max_tokens = body.max_completion_tokens or body.max_tokens
            max_tokens = max_tokens or self.engine.max_positions - len(prompt_ids)
            top = body.top_logprobs or 0
        else:
            prompt = body.prompt
            prompt_ids = list(prompt) if isinstance(prompt, list) else \
                self.tokenizer(prompt).input_ids
            max_tokens, top = body.max_tokens, body.logprobs or 0
        request = GenerationRequest(
            prompt_ids=prompt_ids, max_tokens=max_tokens, temperature=body.temperature,
            top_k=body.top_k, top_p=body.top_p, seed=body.seed, ignore_eos=body.ignore_eos,
            adapter=None if body.model == self.name else body.model, top_logprobs=top,
            presence_penalty=body.presence_penalty, frequency_penalty=body.frequency_penalty,
            logit_bias=body.token_biases,
        )
        self.engine.check(request)
        return request, syntax

    def choice(self, body: CompletionRequest | ChatRequest, steps: list[StepOutput],
               message: dict[str, Any], finish: str | None, offset: int, first: bool,
               prompt_ids: list[int], stream: bool) -> dict[str, Any]:
        """One choice: a stream delta (``stream``) or the whole message; ``message`` holds the
        text (``content``) and any ``tool_calls``."""
        chat = isinstance(body, ChatRequest)
        choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish}
        if chat:
            choice["delta" if stream else "message"] = {"role": "assistant"} | message \
                if not stream or first else message
            if body.logprobs:
                choice["logprobs"] = chat_logprobs(steps, self.tokenizer)
        else:
            choice["text"] = message["content"]
            if body.logprobs is not None:
                choice["logprobs"] = completion_logprobs(steps, self.tokenizer, offset)
            if body.return_token_ids and first:
                choice["prompt_token_ids"] = prompt_ids
        if body.return_token_ids:
            choice["token_ids"] = [step.token_id for step in steps]
        return choice

    async def stream(self, body: CompletionRequest | ChatRequest, request: GenerationRequest,
                     syntax: str | None) -> AsyncIterator[bytes]:
        chat = isinstance(body, ChatRequest)
        head = {"id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}", "created":
                int(time.time()), "model": body.model,
                "object": "chat.completion.chunk" if chat else "text_completion"}
        produced, first, visible = 0, True, ""
        reader = ToolCallReader(syntax) if syntax else None
        finish: str | None = None
        try:
            if chat:  # vLLM opens a chat stream with the role and the prompt's token ids
                chunk = head | {"choices": [self.choice(body, [], {"content": ""}, None, 0,
                                                        True, [], True)]}
                if body.return_token_ids:
                    chunk["prompt_token_ids"] = request.prompt_ids
                yield sse_data(chunk)
                first = False
            async for piece in reply_pieces(self.engine, self.tokenizer, request,
                                       body.stop_sequences):
                offset, visible, finish = len(visible), piece.visible, piece.finish
                text = piece.delta
                if reader is not None:  # calls are held back until generation ends
                    text = reader.content_delta(visible)
                choice = self.choice(body, [piece.step], {"content": text},
                                     None if reader else finish, offset, first,
                                     request.prompt_ids, True)
                yield sse_data(head | {"choices": [choice]})
                produced, first = produced + 1, False
            if reader is not None and finish is not None:
                parsed = reader.finish(visible)
                deltas = [{"content": parsed.content}] if parsed.content else []
                for delta in deltas + tool_call_deltas(parsed.tool_calls) + [{}]:
                    reason = parsed.finish_reason(finish) if not delta else None
                    yield sse_data(head | {"choices": [
                        {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}]})
            if body.include_usage:
                yield sse_data(head | {"choices": [],
                                       "usage": usage(len(request.prompt_ids), produced)})
        except EngineError as exc:
            yield sse_data(exc.body())
        yield sse_done()

    async def whole(self, body: CompletionRequest | ChatRequest, request: GenerationRequest,
                    syntax: str | None) -> dict[str, Any]:
        chat = isinstance(body, ChatRequest)
        pieces = [piece async for piece in reply_pieces(self.engine, self.tokenizer, request,
                                                   body.stop_sequences)]
        steps = [piece.step for piece in pieces]
        text = pieces[-1].visible if pieces else ""
        finish = pieces[-1].finish if pieces else None
        message: dict[str, Any] = {"content": text}
        if syntax is not None:
            parsed = ToolCallReader(syntax).finish(text)
            finish = parsed.finish_reason(finish)
            if parsed.tool_calls:
                message = {"content": parsed.content.strip() or None,
                           "tool_calls": parsed.tool_calls}
        response: dict[str, Any] = {
            "id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()), "model": body.model,
            "choices": [self.choice(body, steps, message, finish, 0, True, request.prompt_ids,
                                    False)],
            "usage": usage(len(request.prompt_ids), len(steps)),
        }
        if chat and body.return_token_ids:
            response["prompt_token_ids"] = request.prompt_ids
        return response

    async def respond(self, body: CompletionRequest | ChatRequest) -> Any:
        request, syntax = self.generation_request(body)
        if body.stream:
            return StreamingResponse(self.stream(body, request, syntax),
                                     media_type="text/event-stream")
        return await self.whole(body, request, syntax)


async def _body(request: Request, model: type[_Request]) -> _Request:
    """The request's JSON, bounded before parsing (:mod:`serving.request_body`), as ``model``;
    refused with a 400 naming the first bad field, as vLLM does."""
    data = await json_object(request, _MAX_REQUEST_BYTES)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise from_validation_errors(exc.errors(include_url=False)) from None


def create_engine_app(engine: TorchGenerator, served_model_name: str,
                      tool_call_parser: str = "hermes") -> FastAPI:
    state = _Engine(engine, served_model_name, tool_call_parser)
    app = FastAPI(title="rewardstream torch engine")
    app.openapi = lambda: openapi_document(app, _BODIES)  # type: ignore[method-assign]

    @app.exception_handler(InvalidRequest)
    async def _refused(_request: Any, exc: InvalidRequest) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status_code)

    async def _unreadable(_request: Any, exc: Exception) -> JSONResponse:
        assert isinstance(exc, BODY_ERRORS)  # registered for these alone
        return JSONResponse(error_body(str(exc), INVALID_REQUEST), status_code=exc.status_code)

    for error in BODY_ERRORS:
        app.add_exception_handler(error, _unreadable)

    @app.get("/livez", summary="Liveness: the process answers")
    async def livez() -> dict[str, str]:
        return {"status": "ok"}

    # The model is loaded before the app exists, so a live engine is a ready one. /health is
    # vLLM's name for the same, kept so the gateway speaks to both backends alike.
    @app.get("/readyz", summary="Readiness: the model is loaded")
    @app.get("/health", include_in_schema=False)
    async def readyz() -> dict[str, str]:
        return {"status": "ready"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return state.models()

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        return await state.respond(await _body(request, CompletionRequest))

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        return await state.respond(await _body(request, ChatRequest))

    @app.post("/v1/load_lora_adapter")
    async def load_lora_adapter(request: Request) -> PlainTextResponse:
        body = await _body(request, LoraRequest)
        await asyncio.to_thread(engine.load_adapter, body.lora_name, body.lora_path or "")
        return PlainTextResponse(f"Success: LoRA adapter '{body.lora_name}' added successfully.")

    @app.post("/v1/unload_lora_adapter")
    async def unload_lora_adapter(request: Request) -> PlainTextResponse:
        body = await _body(request, LoraRequest)
        await asyncio.to_thread(engine.unload_adapter, body.lora_name)
        return PlainTextResponse(f"Success: LoRA adapter '{body.lora_name}' removed successfully.")

    return app
