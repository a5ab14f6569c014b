"""Server-sent events as the OpenAI streaming protocol frames them: ``data: <json>`` blocks
ending in ``data: [DONE]``. Pure functions, shared by the torch engine (which writes frames) and
the gateway (which writes and reads them)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from schemas.errors import RewardstreamError

__all__ = ["DONE", "SseFormatError", "parse_sse_line", "parse_sse_lines", "sse_data", "sse_done"]

DONE = "[DONE]"


class SseFormatError(RewardstreamError):
    """A ``data:`` line whose payload is not JSON (and not ``[DONE]``)."""


def sse_data(payload: dict[str, Any]) -> bytes:
    """One event carrying ``payload`` as compact JSON."""
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def sse_done() -> bytes:
    return b"data: " + DONE.encode() + b"\n\n"


def parse_sse_line(line: str) -> dict[str, Any] | str | None:
    """A ``data:`` line's JSON payload, :data:`DONE` at the end marker, None for other lines
    (comments, blank separators, ``event:``/``id:`` fields: the OpenAI protocol puts each
    payload on a single ``data:`` line)."""
    if not line.startswith("data:"):
        return None
    data = line[5:].strip()
    if data == DONE:
        return DONE
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise SseFormatError(f"stream sent a data line that is not JSON: {data[:80]!r}") from exc


def parse_sse_lines(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The JSON payloads of a stream's lines, stopping at ``[DONE]``."""
    for line in lines:
        payload = parse_sse_line(line)
        if payload == DONE:
            return
        if isinstance(payload, dict):
            yield payload
