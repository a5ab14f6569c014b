"""The torch engine's HTTP API: the subset of vLLM's OpenAI-compatible server the gateway uses,
in the same shapes (``/v1/completions``, ``/v1/chat/completions`` with SSE streaming,
``return_token_ids``, logprobs, ``/v1/models``, ``/v1/load_lora_adapter``,
``/v1/unload_lora_adapter``), so one client serves both backends."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

from serving.engine.errors import AdapterNotFound, EngineError
from serving.engine.generator import GenerationRequest, StepOutput, TorchGenerator
from serving.engine.protocol import (
    DEFAULT_CHAT_TEMPLATE, ChatRequest, CompletionRequest, IncrementalText, LoraRequest,
    chat_logprobs, completion_logprobs, message_text, usage,
)
from serving.sse import sse_data, sse_done

__all__ = ["create_engine_app"]

_END = object()


def _error_body(exc: EngineError) -> dict[str, Any]:
    kind = "NotFoundError" if isinstance(exc, AdapterNotFound) else "BadRequestError"
    return {"error": {"message": str(exc), "type": kind, "code": exc.status_code}}


async def _steps(engine: TorchGenerator, request: GenerationRequest) -> AsyncIterator[StepOutput]:
    """The generator's steps, produced in a worker thread and handed over as they come."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    cancelled = threading.Event()

    def work() -> None:
        try:
            for step in engine.generate(request, cancelled):
                loop.call_soon_threadsafe(queue.put_nowait, step)
        except Exception as exc:  # handed to the consumer, which raises it in the request
            loop.call_soon_threadsafe(queue.put_nowait, exc)
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, _END)

    worker = loop.run_in_executor(None, work)
    try:
        while (item := await queue.get()) is not _END:
            if isinstance(item, Exception):
                raise item
            yield item
    finally:
        cancelled.set()  # a disconnected client stops its generation at the next step
        await asyncio.shield(worker)


class _Engine:
    def __init__(self, engine: TorchGenerator, served_model_name: str) -> None:
        self.engine = engine
        self.name = served_model_name
        self.tokenizer = engine.tokenizer
        self.chat_template = self.tokenizer.chat_template or DEFAULT_CHAT_TEMPLATE

    def models(self) -> dict[str, Any]:
        created = int(time.time())
        data = [{"id": self.name, "object": "model", "created": created, "owned_by": "rewardstream",
                 "root": self.engine.model_dir, "parent": None}]
        data += [{"id": name, "object": "model", "created": created, "owned_by": "rewardstream",
                  "root": path, "parent": self.name}
                 for name, path in self.engine.adapters().items()]
        return {"object": "list", "data": data}

    def generation_request(self, body: CompletionRequest | ChatRequest) -> GenerationRequest:
        body.refuse_unsupported()
        if body.model != self.name and body.model not in self.engine.adapters():
            raise AdapterNotFound(f"The model `{body.model}` does not exist.")
        if isinstance(body, ChatRequest):
            messages = [{"role": m.get("role", "user"), "content": message_text(m)}
                        for m in body.messages]
            text = self.tokenizer.apply_chat_template(
                messages, chat_template=self.chat_template, add_generation_prompt=True,
                tokenize=False,
            )
            prompt_ids = self.tokenizer(text, add_special_tokens=False).input_ids
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
        )
        self.engine.check(request)
        return request

    def choice(self, body: CompletionRequest | ChatRequest, steps: list[StepOutput], text: str,
               offset: int, first: bool, prompt_ids: list[int], stream: bool) -> dict[str, Any]:
        """One choice: a stream delta (``stream``) or the whole message."""
        chat = isinstance(body, ChatRequest)
        choice: dict[str, Any] = {"index": 0, "logprobs": None,
                                  "finish_reason": steps[-1].finish_reason if steps else None}
        if chat:
            choice["delta" if stream else "message"] = {"role": "assistant", "content": text} \
                if not stream or first else {"content": text}
            if body.logprobs:
                choice["logprobs"] = chat_logprobs(steps, self.tokenizer)
        else:
            choice["text"] = text
            if body.logprobs is not None:
                choice["logprobs"] = completion_logprobs(steps, self.tokenizer, offset)
            if body.return_token_ids and first:
                choice["prompt_token_ids"] = prompt_ids
        if body.return_token_ids:
            choice["token_ids"] = [step.token_id for step in steps]
        return choice

    async def stream(self, body: CompletionRequest | ChatRequest,
                     request: GenerationRequest) -> AsyncIterator[bytes]:
        chat = isinstance(body, ChatRequest)
        head = {"id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}", "created":
                int(time.time()), "model": body.model,
                "object": "chat.completion.chunk" if chat else "text_completion"}
        decoded, produced, first = IncrementalText(self.tokenizer), 0, True
        try:
            if chat:  # vLLM opens a chat stream with the role and the prompt's token ids
                chunk = head | {"choices": [self.choice(body, [], "", 0, True, [], True)]}
                if body.return_token_ids:
                    chunk["prompt_token_ids"] = request.prompt_ids
                yield sse_data(chunk)
                first = False
            async for step in _steps(self.engine, request):
                offset = len(decoded.text)
                text = decoded.add(step.token_id, final=step.finish_reason is not None)
                choice = self.choice(body, [step], text, offset, first, request.prompt_ids, True)
                yield sse_data(head | {"choices": [choice]})
                produced, first = produced + 1, False
            if body.include_usage:
                yield sse_data(head | {"choices": [],
                                       "usage": usage(len(request.prompt_ids), produced)})
        except EngineError as exc:
            yield sse_data(_error_body(exc))
        yield sse_done()

    async def whole(self, body: CompletionRequest | ChatRequest,
                    request: GenerationRequest) -> dict[str, Any]:
        chat = isinstance(body, ChatRequest)
        steps = [step async for step in _steps(self.engine, request)]
        text = self.tokenizer.decode([s.token_id for s in steps], skip_special_tokens=True)
        response = {
            "id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()), "model": body.model,
            "choices": [self.choice(body, steps, text, 0, True, request.prompt_ids, False)],
            "usage": usage(len(request.prompt_ids), len(steps)),
        }
        if chat and body.return_token_ids:
            response["prompt_token_ids"] = request.prompt_ids
        return response

    async def respond(self, body: CompletionRequest | ChatRequest) -> Any:
        request = self.generation_request(body)
        if body.stream:
            return StreamingResponse(self.stream(body, request), media_type="text/event-stream")
        return await self.whole(body, request)


def create_engine_app(engine: TorchGenerator, served_model_name: str) -> FastAPI:
    state = _Engine(engine, served_model_name)
    app = FastAPI(title="rewardstream torch engine")

    @app.exception_handler(EngineError)
    async def _engine_error(_request: Any, exc: EngineError) -> JSONResponse:
        return JSONResponse(_error_body(exc), status_code=exc.status_code)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return state.models()

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest) -> Any:
        return await state.respond(body)

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatRequest) -> Any:
        return await state.respond(body)

    @app.post("/v1/load_lora_adapter")
    async def load_lora_adapter(body: LoraRequest) -> PlainTextResponse:
        await asyncio.to_thread(engine.load_adapter, body.lora_name, body.lora_path or "")
        return PlainTextResponse(f"Success: LoRA adapter '{body.lora_name}' added successfully.")

    @app.post("/v1/unload_lora_adapter")
    async def unload_lora_adapter(body: LoraRequest) -> PlainTextResponse:
        await asyncio.to_thread(engine.unload_adapter, body.lora_name)
        return PlainTextResponse(f"Success: LoRA adapter '{body.lora_name}' removed successfully.")

    return app
