"""Turning a completion into the agent's action: calls (well-formed or broken) or a reply.

A completion arrives in one of two shapes:

- text (in-process and scripted policies, or an endpoint that does not parse calls): the calls
  are read with the shared strict parser (``schemas.toolcalls``, ``<tool>NAME {json}</tool>``);
  a text without a call marker is a reply, one ending in ``?`` a clarifying question;
- OpenAI ``tool_calls`` from the gateway, with its verdicts on the broken ones
  (:func:`action_from_tool_calls`).

Every call is checked against its tool's JSON Schema (``schemas.tooldefs``). Anything broken
becomes a :class:`BrokenCall` with its kind and reason; the agent answers it with an error
observation and records it as ``tool.called`` with ``valid=false`` — unless the gateway already
recorded it (``recorded``), so that no broken call is dropped or counted twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from schemas.toolcalls import MalformedCall, format_call, split_calls
from schemas.tooldefs import BrokenKind, ToolDef

__all__ = ["BrokenCall", "ParsedAction", "Reply", "ServerVerdict", "ToolCall", "ToolSpec",
           "action_from_tool_calls", "format_call", "parse_action"]


@dataclass(frozen=True)
class ToolSpec:
    definition: ToolDef  # name, JSON Schema of the arguments, description
    read_only: bool = True  # read-only calls of one completion may run in parallel

    @property
    def name(self) -> str:
        return self.definition.name

    def problem(self, args: dict[str, Any]) -> str | None:
        return self.definition.problem(args)


@dataclass(frozen=True)
class ToolCall:
    name: str
    args: dict[str, Any]
    raw: str
    call_id: str | None = None  # the OpenAI tool call id, when the endpoint gave one


@dataclass(frozen=True)
class BrokenCall:
    raw: str
    tool: str  # the name it seems to call, or "unknown"
    error_kind: BrokenKind
    reason: str
    recorded: bool = False  # the gateway already recorded it as tool.called valid=false
    call_id: str | None = None


@dataclass(frozen=True)
class ServerVerdict:
    """One broken call as the gateway judged and recorded it (``broken_tool_calls``)."""

    tool: str
    error_kind: BrokenKind
    reason: str
    tool_call_id: str | None = None  # None: a call written in the text that did not parse


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


def _checked(name: str, args: dict[str, Any], raw: str, specs: Mapping[str, ToolSpec],
             call_id: str | None = None) -> ToolCall | BrokenCall:
    spec = specs.get(name)
    if spec is None:
        return BrokenCall(raw, name, "unknown_tool",
                          f"no tool {name!r}; tools: {', '.join(sorted(specs))}", call_id=call_id)
    problem = spec.problem(args)
    if problem:
        return BrokenCall(raw, name, "bad_arguments", problem, call_id=call_id)
    return ToolCall(name, args, raw, call_id)


def parse_action(text: str, specs: Mapping[str, ToolSpec]) -> ParsedAction:
    """Split a completion's text into calls (well-formed or broken) or a reply; never loses a
    call."""
    split = split_calls(text)
    if not split.calls:
        return ParsedAction(reply=Reply(split.prose))
    return ParsedAction(calls=tuple(
        BrokenCall(c.raw, c.tool, "malformed_call", c.reason) if isinstance(c, MalformedCall)
        else _checked(c.name, c.args, c.raw, specs) for c in split.calls))


def action_from_tool_calls(content: str, tool_calls: Sequence[Mapping[str, Any]],
                           verdicts: Sequence[ServerVerdict],
                           specs: Mapping[str, ToolSpec]) -> ParsedAction:
    """The action of a gateway reply: its ``tool_calls``, with what the gateway judged broken
    marked as recorded there; calls it passed are still checked against the harness's specs
    (anything they catch is recorded by the harness)."""
    judged = {v.tool_call_id: v for v in verdicts if v.tool_call_id is not None}
    calls: list[ToolCall | BrokenCall] = [
        BrokenCall("", v.tool, v.error_kind, v.reason, recorded=True)
        for v in verdicts if v.tool_call_id is None]
    for call in tool_calls:
        call_id, function = call.get("id"), call.get("function") or {}
        name, arguments = function.get("name") or "", function.get("arguments") or "{}"
        raw = format_call(name, arguments)
        verdict = judged.get(call_id) if call_id is not None else None
        if verdict is not None:
            calls.append(BrokenCall(raw, verdict.tool, verdict.error_kind, verdict.reason,
                                    recorded=True, call_id=call_id))
            continue
        parsed = parse_action(raw, specs)  # the same strict reading as a text call
        calls.extend(replace(c, call_id=call_id) for c in parsed.calls)
    if calls:
        return ParsedAction(calls=tuple(calls))
    return parse_action(content, specs)

