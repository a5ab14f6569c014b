"""How tool calls are written in a completion's text, and the strict parsers that read them (pure).

Two syntaxes, one home, shared by the agent harness, the torch engine and the gateway:

- ``rewardstream``: ``<tool>NAME {json object}</tool>``, what the harness's policies write and
  what the torch engine asks for when a model's chat template has no tools section;
- ``hermes``: ``<tool_call>{"name": NAME, "arguments": {...}}</tool_call>``, what models whose
  chat templates render tools commonly write (Hermes, Qwen 2.5; vLLM's ``hermes`` parser).

A text with no call marker is a reply. Otherwise prose may come before the first call, calls
may be separated by whitespace only, and anything else — an unclosed call, arguments that are
not one JSON object, text after a call — is a :class:`MalformedCall` with the reason, so that a
broken call is never mistaken for prose and never lost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["CALL_MARKERS", "CLOSE", "HERMES_CLOSE", "HERMES_OPEN", "OPEN", "SYNTAXES",
           "MalformedCall", "SplitText", "WrittenCall", "format_call", "split_calls",
           "split_hermes_calls", "write_tool_calls", "writes_calls"]

OPEN, CLOSE = "<tool>", "</tool>"
HERMES_OPEN, HERMES_CLOSE = "<tool_call>", "</tool_call>"
# A text that contains one of these is meant to call a tool ("<tool" also opens "<tool_call>").
CALL_MARKERS = ("<tool", "</tool")
_NAME = r"[A-Za-z0-9_-]{1,64}"  # what OpenAI allows in a function name
_BODY = re.compile(rf"\s*({_NAME})\s+(\{{.*\}})\s*", re.S)
_NAME_ONLY = re.compile(rf"\s*({_NAME})")


@dataclass(frozen=True)
class WrittenCall:
    name: str
    arguments: str  # the JSON object exactly as written: the OpenAI ``arguments`` string
    raw: str

    @property
    def args(self) -> dict[str, Any]:
        return json.loads(self.arguments)


@dataclass(frozen=True)
class MalformedCall:
    raw: str
    tool: str  # the name it seems to call, or "unknown"
    reason: str


@dataclass(frozen=True)
class SplitText:
    prose: str  # the text before the first call; the whole (stripped) text of a reply
    calls: tuple[WrittenCall | MalformedCall, ...] = ()

    @property
    def well_formed(self) -> bool:
        """True when there are calls and every one of them parsed."""
        return bool(self.calls) and all(isinstance(c, WrittenCall) for c in self.calls)


def writes_calls(text: str) -> bool:
    return any(marker in text for marker in CALL_MARKERS)


def format_call(name: str, arguments: Mapping[str, Any] | str) -> str:
    """The ``rewardstream`` text of a call; a string ``arguments`` is written as it is."""
    text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    return f"{OPEN}{name} {text}{CLOSE}"


def _rewardstream_body(body: str, raw: str) -> WrittenCall | MalformedCall:
    match = _BODY.fullmatch(body)
    if not match:
        named = _NAME_ONLY.match(body)
        return MalformedCall(raw, named.group(1) if named else "unknown",
                             f"expected NAME {{json arguments}} inside {OPEN}...{CLOSE}")
    name, arguments = match.groups()
    return _checked(name, arguments, raw)


def _checked(name: str, arguments: str, raw: str) -> WrittenCall | MalformedCall:
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as exc:
        return MalformedCall(raw, name, f"arguments are not valid JSON: {exc.msg}")
    if not isinstance(value, dict):
        return MalformedCall(raw, name, "arguments must be a JSON object")
    return WrittenCall(name, arguments, raw)


def _hermes_body(body: str, raw: str) -> WrittenCall | MalformedCall:
    try:
        call = json.loads(body)
    except json.JSONDecodeError as exc:
        return MalformedCall(raw, "unknown", f"the call is not valid JSON: {exc.msg}")
    name = call.get("name") if isinstance(call, dict) else None
    if not isinstance(name, str) or not name:
        return MalformedCall(raw, "unknown", 'expected {"name": ..., "arguments": {...}}')
    arguments = call.get("arguments", {})
    if not isinstance(arguments, dict):
        return MalformedCall(raw, name, "arguments must be a JSON object")
    return WrittenCall(name, json.dumps(arguments, ensure_ascii=False), raw)


def _split(text: str, open_: str, close: str,
           body: Callable[[str, str], WrittenCall | MalformedCall]) -> SplitText:
    text = text.strip()
    if not writes_calls(text):
        return SplitText(text)
    start = text.find(open_)
    if start < 0:
        return SplitText("", (MalformedCall(text, "unknown", f"a call must start with {open_}"),))
    prose = text[:start].strip()
    calls: list[WrittenCall | MalformedCall] = []
    while True:
        end = text.find(close, start)
        if end < 0:
            calls.append(MalformedCall(text[start:], "unknown", f"{open_} without {close}"))
            break
        inner = text[start + len(open_):end]
        raw = text[start:end + len(close)]
        calls.append(body(inner, raw) if open_ not in inner else MalformedCall(
            raw, "unknown", f"{open_} inside another call"))
        rest = text[end + len(close):].lstrip()
        if not rest:
            break
        if not rest.startswith(open_):
            calls.append(MalformedCall(rest, "unknown",
                                       "text after a call; put nothing between or after calls"))
            break
        start = len(text) - len(rest)
    return SplitText(prose, tuple(calls))


def split_calls(text: str) -> SplitText:
    """Read ``<tool>NAME {json}</tool>`` calls (the ``rewardstream`` syntax)."""
    return _split(text, OPEN, CLOSE, _rewardstream_body)


def split_hermes_calls(text: str) -> SplitText:
    """Read ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` calls."""
    return _split(text, HERMES_OPEN, HERMES_CLOSE, _hermes_body)


SYNTAXES: dict[str, Callable[[str], SplitText]] = {
    "rewardstream": split_calls, "hermes": split_hermes_calls,
}


def write_tool_calls(content: str, tool_calls: Sequence[Mapping[str, Any]] | None) -> str:
    """An assistant message's text with its OpenAI ``tool_calls`` written after it in the
    ``rewardstream`` syntax: the message as a model that knows no ``tool_calls`` wrote it."""
    written = "".join(
        format_call((call.get("function") or {}).get("name") or "",
                    (call.get("function") or {}).get("arguments") or "{}")
        for call in tool_calls or ())
    return content + written
