"""The gateway's own verdict on a finished completion's tool calls (pure).

Whenever a request offers tools (and ``tool_choice`` is not ``none``) the completion is meant to
call them when it writes a call, so the gateway judges every completion itself, whatever the
client does with it later:

- each ``tool_calls`` entry naming a tool not offered (or not the one ``tool_choice`` names) is
  ``unknown_tool``; arguments that are not one JSON object are ``malformed_call``; arguments
  that do not match the tool's JSON Schema are ``bad_arguments``;
- call markup left in the content (the backend could not parse it) is ``malformed_call``, one
  per broken piece as the strict parser of its syntax reads it;
- ``tool_choice`` ``required`` or a named function with no call at all is ``malformed_call``.

Each verdict becomes a ``tool.called`` event with ``valid: false`` (``served.py``) and is shown
to the client as ``broken_tool_calls``. The model's output itself is passed on unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from schemas.toolcalls import (
    HERMES_OPEN,
    MalformedCall,
    split_calls,
    split_hermes_calls,
    writes_calls,
)
from schemas.tooldefs import BrokenKind, ToolRequest, ToolRequestError, parse_tool_request
from serving.gateway.errors import GatewayError
from serving.openai_errors import tool_request_param

__all__ = ["BrokenToolCall", "judge_calls", "offered_tools"]


def offered_tools(kind: str, body: Mapping[str, Any]) -> ToolRequest | None:
    """The tools a request offers; a malformed one is refused naming its field."""
    if kind != "chat":
        if body.get("tools"):
            raise GatewayError("tools are offered on /v1/chat/completions only", "tools")
        return None
    try:
        return parse_tool_request(body)
    except ToolRequestError as exc:
        raise GatewayError(str(exc), tool_request_param(str(exc))) from None


@dataclass(frozen=True)
class BrokenToolCall:
    call_id: str  # derived from the completion id: the recorded event's call_id
    tool: str
    error_kind: BrokenKind
    reason: str
    tool_call_id: str | None = None  # the tool_calls entry it judges; None: text in content

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _content_verdicts(content: str, completion_id: str) -> list[BrokenToolCall]:
    split = (split_hermes_calls if HERMES_OPEN in content else split_calls)(content)
    broken = [c for c in split.calls if isinstance(c, MalformedCall)]
    if not broken:  # every call parses, yet the backend returned them as text
        names = [getattr(c, "name", "unknown") for c in split.calls]
        return [BrokenToolCall(f"{completion_id}-m0", names[0] if names else "unknown",
                               "malformed_call", "calls written in the text were not returned "
                               "as tool_calls by the backend's parser")]
    return [BrokenToolCall(f"{completion_id}-m{i}", call.tool, "malformed_call", call.reason)
            for i, call in enumerate(broken)]


def judge_calls(tools: ToolRequest | None, content: str,
                tool_calls: Sequence[Mapping[str, Any]], completion_id: str
                ) -> list[BrokenToolCall]:
    """The broken calls of a completion (empty when every call is sound)."""
    if tools is None or not tools.expects_calls:
        return []
    verdicts = []
    for index, call in enumerate(tool_calls):
        function = call.get("function") or {}
        problem = tools.check(function.get("name") or "", function.get("arguments") or "{}")
        if problem is not None:
            verdicts.append(BrokenToolCall(f"{completion_id}-t{index}", problem.tool,
                                           problem.kind, problem.reason, call.get("id")))
    if writes_calls(content):
        verdicts += _content_verdicts(content, completion_id)
    elif tools.requires_call and not tool_calls:
        verdicts.append(BrokenToolCall(
            f"{completion_id}-m0", tools.function or "unknown", "malformed_call",
            f"tool_choice {tools.function or tools.choice!r} requires a call; none was made"))
    return verdicts
