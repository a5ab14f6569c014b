"""A generation's tokens with the reply text they release (the engine's async core).

The generator runs in a worker thread and hands its steps over as they come; a client that goes
away stops its generation at the next step. Each token's text is decoded incrementally (a
partial UTF-8 character is held back) and passed through the request's stop sequences
(``serving.engine.stops``): a stop sequence ends the generation, and its text is never shown.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from serving.engine.generator import GenerationRequest, StepOutput, TorchGenerator
from serving.engine.stops import StopText

__all__ = ["IncrementalText", "ReplyPiece", "reply_pieces"]

_END = object()


@dataclass
class IncrementalText:
    """Text deltas of a growing token sequence; a partial UTF-8 character is held back."""

    tokenizer: Any
    ids: list[int] = field(default_factory=list)
    text: str = ""

    def add(self, token_id: int, final: bool = False) -> str:
        self.ids.append(token_id)
        full = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        if full.endswith("\ufffd") and not final:
            return ""
        delta, self.text = full[len(self.text):], full
        return delta


async def _steps(engine: TorchGenerator,
                 request: GenerationRequest) -> AsyncGenerator[StepOutput, None]:
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


@dataclass(frozen=True)
class ReplyPiece:
    """One generated token and the reply text it released."""

    step: StepOutput
    delta: str  # text newly shown with this token (stop text and held-back text excluded)
    visible: str  # the reply's text so far
    finish: str | None  # set on the last piece: "stop" (eos or a stop sequence) or "length"


async def reply_pieces(engine: TorchGenerator, tokenizer: Any, request: GenerationRequest,
                       stops: tuple[str, ...]) -> AsyncIterator[ReplyPiece]:
    """The generation's tokens with their text; a stop sequence ends it (``StopText``)."""
    decoded, text = IncrementalText(tokenizer), StopText(stops)
    async with aclosing(_steps(engine, request)) as steps:
        async for step in steps:
            final = step.finish_reason is not None
            decoded.add(step.token_id, final=final)
            delta = text.feed(decoded.text, final=final)
            finish = "stop" if text.stopped else step.finish_reason
            yield ReplyPiece(step, delta, text.visible, finish)
            if text.stopped:
                return
