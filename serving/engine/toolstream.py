"""Reading tool calls out of a completion's text, whole and while it streams (pure).

While tokens stream, text before the first call marker goes out as content at once; from a
marker on (or a partial one at the end of the text) the text is held back until generation
ends. Then the whole text is parsed strictly: if every call parses, they become OpenAI
``tool_calls`` — streamed as one delta with index, id, type and name, then argument fragments —
and the finish reason is ``tool_calls``; otherwise the held text goes out as plain content with
the generation's finish reason (as vLLM's parsers do), and the gateway records it as a broken
call. The token ids and logprobs of every step are streamed as they come either way.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from schemas.toolcalls import CALL_MARKERS, SYNTAXES, WrittenCall

__all__ = ["ARGUMENT_FRAGMENT_CHARS", "ParsedCompletion", "ToolCallReader", "tool_call_deltas"]

ARGUMENT_FRAGMENT_CHARS = 16


@dataclass(frozen=True)
class ParsedCompletion:
    content: str  # the content not yet streamed (all of it, for a whole reply)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    def finish_reason(self, generation_reason: str | None) -> str | None:
        return "tool_calls" if self.tool_calls else generation_reason


def _first_marker(text: str) -> int:
    found = [i for i in (text.find(m) for m in CALL_MARKERS) if i >= 0]
    return min(found, default=-1)


def _partial_marker(text: str) -> int:
    """Length of the longest end of ``text`` that could grow into a marker."""
    return max((n for m in CALL_MARKERS for n in range(1, len(m)) if text.endswith(m[:n])),
               default=0)


def _tool_call(call: WrittenCall) -> dict[str, Any]:
    return {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
            "function": {"name": call.name, "arguments": call.arguments}}


@dataclass
class ToolCallReader:
    syntax: str  # a key of schemas.toolcalls.SYNTAXES
    sent: int = 0  # characters of the text already streamed as content
    holding: bool = False

    def content_delta(self, text: str) -> str:
        """The content of the growing ``text`` that can be streamed now."""
        if self.holding:
            return ""
        cut = _first_marker(text)
        if cut >= 0:
            self.holding = True
        else:
            cut = len(text) - _partial_marker(text)
        delta = text[self.sent:cut]
        self.sent = max(self.sent, cut)
        return delta

    def finish(self, text: str) -> ParsedCompletion:
        """The rest of the reply once generation has ended."""
        split = SYNTAXES[self.syntax](text)
        if not split.well_formed:
            return ParsedCompletion(text[self.sent:])
        calls = [_tool_call(c) for c in split.calls if isinstance(c, WrittenCall)]
        prose_end = _first_marker(text)
        return ParsedCompletion(text[self.sent:prose_end] if prose_end > self.sent else "", calls)


def tool_call_deltas(tool_calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stream deltas of ``tool_calls`` in OpenAI's shape, one ``{"tool_calls": [...]}`` each."""
    deltas = []
    for index, call in enumerate(tool_calls):
        function = call["function"]
        deltas.append({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                       "function": {"name": function["name"],
                                                    "arguments": ""}}]})
        arguments = function["arguments"]
        deltas += [{"tool_calls": [{"index": index, "function": {
            "arguments": arguments[i:i + ARGUMENT_FRAGMENT_CHARS]}}]}
            for i in range(0, len(arguments), ARGUMENT_FRAGMENT_CHARS)]
    return deltas
