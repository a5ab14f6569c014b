"""The tool-call format and its strict parser.

A completion is either a reply to the user (no ``<tool>`` tag anywhere; a reply ending in ``?``
is a clarifying question) or one or more calls, each ``<tool>NAME {json object}</tool>``, with
only whitespace between them (prose before the first call is allowed and ignored). Anything else
becomes a :class:`BrokenCall` with the reason; the agent records it as ``tool.called`` with
``valid=false`` and answers it with an error observation. A broken call is never dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["BrokenCall", "ParsedAction", "Reply", "ToolCall", "ToolSpec", "format_call",
           "parse_action"]

OPEN, CLOSE = "<tool>", "</tool>"
_BODY = re.compile(r"\s*([A-Za-z_]\w*)\s+(\{.*\})\s*", re.S)
_NAME_ONLY = re.compile(r"\s*([A-Za-z_]\w*)")

BrokenKind = Literal["malformed_call", "unknown_tool", "bad_arguments"]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    required: Mapping[str, type]
    optional: Mapping[str, type] = field(default_factory=dict)
    read_only: bool = True  # read-only calls of one completion may run in parallel
    # Cross-field rule beyond types (e.g. "search+replace or diff"); returns a reason or None.
    check: Callable[[dict[str, Any]], str | None] | None = None

    def problem(self, args: dict[str, Any]) -> str | None:
        missing = [k for k in self.required if k not in args]
        if missing:
            return f"{self.name} needs {', '.join(missing)}"
        unknown = sorted(set(args) - set(self.required) - set(self.optional))
        if unknown:
            return f"{self.name} takes no argument {', '.join(unknown)}"
        for key, value in args.items():
            wanted = self.required.get(key) or self.optional[key]
            if not isinstance(value, wanted) or isinstance(value, bool) and wanted is not bool:
                return f"{self.name}: {key} must be a {wanted.__name__}"
        return self.check(args) if self.check else None


@dataclass(frozen=True)
class ToolCall:
    name: str
    args: dict[str, Any]
    raw: str


@dataclass(frozen=True)
class BrokenCall:
    raw: str
    tool: str  # the name it seems to call, or "unknown"
    error_kind: BrokenKind
    reason: str


@dataclass(frozen=True)
class Reply:
    text: str

    @property
    def is_question(self) -> bool:
        return self.text.rstrip().endswith("?")


@dataclass(frozen=True)
class ParsedAction:
    calls: tuple[ToolCall | BrokenCall, ...] = ()
    reply: Reply | None = None


def format_call(name: str, args: Mapping[str, Any]) -> str:
    return f"{OPEN}{name} {json.dumps(dict(args))}{CLOSE}"


def _parse_body(body: str, raw: str, specs: Mapping[str, ToolSpec]) -> ToolCall | BrokenCall:
    match = _BODY.fullmatch(body)
    if not match:
        named = _NAME_ONLY.match(body)
        return BrokenCall(raw, named.group(1) if named else "unknown", "malformed_call",
                          "expected NAME {json arguments} inside <tool>...</tool>")
    name, arg_text = match.groups()
    try:
        args = json.loads(arg_text)
    except json.JSONDecodeError as exc:
        return BrokenCall(raw, name, "malformed_call", f"arguments are not valid JSON: {exc.msg}")
    if not isinstance(args, dict):
        return BrokenCall(raw, name, "malformed_call", "arguments must be a JSON object")
    spec = specs.get(name)
    if spec is None:
        return BrokenCall(raw, name, "unknown_tool",
                          f"no tool {name!r}; tools: {', '.join(sorted(specs))}")
    problem = spec.problem(args)
    if problem:
        return BrokenCall(raw, name, "bad_arguments", problem)
    return ToolCall(name, args, raw)


def parse_action(text: str, specs: Mapping[str, ToolSpec]) -> ParsedAction:
    """Split a completion into calls (well-formed or broken) or a reply; never loses a call."""
    text = text.strip()
    if "<tool" not in text and CLOSE not in text:
        return ParsedAction(reply=Reply(text))
    start = text.find(OPEN)
    if start < 0:
        return ParsedAction(calls=(BrokenCall(text, "unknown", "malformed_call",
                                              f"a call must start with {OPEN}"),))
    calls: list[ToolCall | BrokenCall] = []
    while True:
        end = text.find(CLOSE, start)
        if end < 0:
            calls.append(BrokenCall(text[start:], "unknown", "malformed_call",
                                    f"{OPEN} without {CLOSE}"))
            break
        body = text[start + len(OPEN):end]
        raw = text[start:end + len(CLOSE)]
        calls.append(_parse_body(body, raw, specs) if OPEN not in body else BrokenCall(
            raw, "unknown", "malformed_call", f"{OPEN} inside another call"))
        rest = text[end + len(CLOSE):].lstrip()
        if not rest:
            break
        if not rest.startswith(OPEN):
            calls.append(BrokenCall(rest, "unknown", "malformed_call",
                                    "text after a call; put nothing between or after calls"))
            break
        start = len(text) - len(rest)
    return ParsedAction(calls=tuple(calls))
