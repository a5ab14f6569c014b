"""The tool calls a model span reports, judged as the gateway judges them (pure).

With message capture on (the latest GenAI semantic conventions), a model call's span carries
``gen_ai.output.messages``: JSON, a list of messages whose ``parts`` include
``{"type": "tool_call", "id", "name", "arguments"}``. Each such part is one call, judged by the
gateway's own rules (``serving.gateway.toolcheck``) against the tools the span says were offered
(``gen_ai.tool.definitions``, in the conventions' flat form or OpenAI's): a name not offered is
``unknown_tool``, arguments that are not one JSON object are ``malformed_call``, arguments that
break the tool's JSON Schema are ``bad_arguments``, and call markup left in a text part is
``malformed_call``. Without definitions only the form of the arguments can be judged.

Calls are named as the gateway names them, ``<completion id>-t<n>`` (the completion id is
``gen_ai.response.id``), so a call the gateway served and judged and the same call reported by
the client's span are one call: their events share an id (``schemas.ids.call_event_id``) and
the log keeps the first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from schemas.tooldefs import ToolDef, ToolRequest, ToolRequestError, parse_tool_request
from serving.gateway.toolcheck import BrokenToolCall, judge_calls
from serving.jsonscan import check_document

__all__ = ["MAX_CALLS_PER_SPAN", "OUTPUT_MESSAGES", "TOOL_DEFINITIONS", "JudgedCall",
           "TooManyCalls", "judged_calls"]

OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
MAX_CALLS_PER_SPAN = 128  # OpenAI's limit on the tools of one request; one event each
_MAX_DEPTH = 32


class TooManyCalls(ValueError):
    """A span reports more calls than one completion can make: refused, not cut."""


@dataclass(frozen=True, slots=True)
class JudgedCall:
    call_id: str
    tool: str
    broken: BrokenToolCall | None  # None: a sound call


def _json(value: Any) -> Any:
    """An attribute holding JSON text (or, from some SDKs, already a structure); None when it
    is not readable JSON."""
    if not isinstance(value, str):
        return None
    raw = value.encode()
    if check_document(raw, _MAX_DEPTH) is not None:
        return None
    return json.loads(raw)


def _openai_tool(definition: Any) -> Any:
    """A tool definition in OpenAI's nested form (the conventions write it flat)."""
    if isinstance(definition, Mapping) and "function" not in definition and "name" in definition:
        return {"type": "function", "function": {
            key: definition[key] for key in ("name", "description", "parameters")
            if key in definition}}
    return definition


def _offered(attrs: Mapping[str, Any], names: list[str]) -> ToolRequest | None:
    """The tools the span says were offered; without (readable) definitions, the tools called
    that can be tools at all, taking any arguments object, so only the arguments' form is
    judged. None when nothing can have been offered."""
    definitions = _json(attrs.get(TOOL_DEFINITIONS))
    if isinstance(definitions, list) and definitions:
        try:
            return parse_tool_request({"tools": [_openai_tool(d) for d in definitions]})
        except ToolRequestError:
            pass  # definitions the gateway would refuse: judge the form alone
    defs = []
    for name in dict.fromkeys(names):
        try:
            defs.append(ToolDef(name, {}))
        except ToolRequestError:
            pass  # no tool can have this name: the call is judged unknown_tool
    return ToolRequest(tuple(defs)) if defs else None


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def judged_calls(attrs: Mapping[str, Any], completion_id: str) -> list[JudgedCall]:
    """Every tool call of the span's output messages, with the gateway's verdict on it."""
    messages = _json(attrs.get(OUTPUT_MESSAGES))
    if not isinstance(messages, list):
        return []
    parts = [part for message in messages if isinstance(message, Mapping)
             for part in message.get("parts") or () if isinstance(part, Mapping)]
    called = [part for part in parts if part.get("type") == "tool_call"]
    if len(called) > MAX_CALLS_PER_SPAN:
        raise TooManyCalls(f"{OUTPUT_MESSAGES}: {len(called)} tool calls, more than the "
                           f"{MAX_CALLS_PER_SPAN} one completion can make")
    names = [str(part.get("name") or "") for part in called]
    ids = [part["id"] if isinstance(part.get("id"), str) else None for part in called]
    calls: list[dict[str, Any]] = [
        {"id": call_id, "type": "function",
         "function": {"name": name, "arguments": _arguments(part.get("arguments", {}))}}
        for call_id, name, part in zip(ids, names, called, strict=True)]
    text = "".join(str(part.get("content") or "") for part in parts if part.get("type") == "text")
    offered = _offered(attrs, names)
    if offered is None and not calls:
        return []
    verdicts = judge_calls(offered, text, calls, completion_id) if offered is not None else [
        BrokenToolCall(f"{completion_id}-t{i}", name or "unknown", "unknown_tool",
                       f"{name[:64]!r} is not a tool name", call_id)
        for i, (name, call_id) in enumerate(zip(names, ids, strict=True))]
    by_id = {v.call_id: v for v in verdicts}
    judged = [JudgedCall(f"{completion_id}-t{i}", name or "unknown",
                         by_id.pop(f"{completion_id}-t{i}", None))
              for i, name in enumerate(names)]
    # Markup left in the text, or a required call not made: broken calls of their own.
    return judged + [JudgedCall(v.call_id, v.tool, v) for v in by_id.values()]
