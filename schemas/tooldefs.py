"""The tools a chat request offers (OpenAI ``tools``, ``tool_choice``, ``parallel_tool_calls``)
and the check of one call against them (pure).

Arguments are checked against each tool's ``parameters`` as full JSON Schema (jsonschema-rs), so
a client's own schemas are honoured exactly; a schema that is not valid JSON Schema, or that
refers to a remote document, is refused with the request rather than fetched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema_rs

from schemas.errors import RewardstreamError

__all__ = ["BrokenKind", "CallProblem", "ToolDef", "ToolRequest", "ToolRequestError",
           "parse_tool_request"]

BrokenKind = Literal["malformed_call", "unknown_tool", "bad_arguments"]
Choice = Literal["none", "auto", "required", "function"]
MAX_TOOLS = 128  # OpenAI's own limit
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


class ToolRequestError(RewardstreamError, ValueError):
    """``tools``, ``tool_choice`` or ``parallel_tool_calls`` is malformed; names the field."""


def _no_remote(uri: str) -> Any:
    raise ValueError(f"remote schema {uri} is not fetched; inline it")


@dataclass(frozen=True)
class ToolDef:
    name: str
    parameters: Mapping[str, Any] = field(default_factory=lambda: dict(_EMPTY_OBJECT))
    description: str = ""
    _validator: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ToolRequestError(f"tool name {self.name!r} must be 1-64 of a-z A-Z 0-9 _ -")
        try:
            validator = jsonschema_rs.validator_for(dict(self.parameters), retriever=_no_remote)
        except (ValueError, TypeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ToolRequestError(f"parameters of {self.name} are not a valid JSON Schema: "
                                   f"{first}") from None
        object.__setattr__(self, "_validator", validator)

    def problem(self, args: Any) -> str | None:
        """Why ``args`` do not match the tool's schema (the first reason), or None."""
        for error in self._validator.iter_errors(args):
            return f"{self.name}: {_describe(error, self.parameters)}"
        return None

    def openai(self) -> dict[str, Any]:
        function: dict[str, Any] = {"name": self.name, "parameters": dict(self.parameters)}
        if self.description:
            function["description"] = self.description
        return {"type": "function", "function": function}


def _describe(error: Any, schema: Mapping[str, Any]) -> str:
    """The validator's message, placed, or the schema's own description of a choice of forms
    (``oneOf``/``anyOf`` messages only say that none matched)."""
    where = "/".join(str(part) for part in error.instance_path)
    message = error.message
    keyword = error.schema_path[-1] if error.schema_path else None
    if keyword in ("oneOf", "anyOf"):
        node: Any = schema
        for part in list(error.schema_path)[:-1]:
            node = node[part] if isinstance(node, Mapping) else node[int(part)]
        if isinstance(node, Mapping) and node.get("description"):
            message = str(node["description"])
    return f"{where}: {message}" if where else message


@dataclass(frozen=True)
class CallProblem:
    kind: BrokenKind
    tool: str  # the name the call gives, or "unknown"
    reason: str


@dataclass(frozen=True)
class ToolRequest:
    tools: tuple[ToolDef, ...]
    choice: Choice = "auto"
    function: str | None = None  # the tool a named tool_choice forces
    parallel: bool = True

    @property
    def expects_calls(self) -> bool:
        """Whether the completion is meant to call tools when it writes a call."""
        return bool(self.tools) and self.choice != "none"

    @property
    def requires_call(self) -> bool:
        return self.choice in ("required", "function")

    def tool(self, name: str) -> ToolDef | None:
        return next((t for t in self.tools if t.name == name), None)

    def check(self, name: str, arguments: str) -> CallProblem | None:
        """Why a call of ``name`` with the JSON text ``arguments`` is broken, or None."""
        tool = self.tool(name)
        if tool is None or (self.function is not None and name != self.function):
            offered = self.function or ", ".join(t.name for t in self.tools)
            return CallProblem("unknown_tool", name or "unknown",
                               f"no tool {name!r} is offered; tools: {offered}")
        try:
            args = json.loads(arguments)
        except json.JSONDecodeError as exc:
            return CallProblem("malformed_call", name, f"arguments are not valid JSON: {exc.msg}")
        if not isinstance(args, dict):
            return CallProblem("malformed_call", name, "arguments must be a JSON object")
        problem = tool.problem(args)
        return CallProblem("bad_arguments", name, problem) if problem else None


def _tool(index: int, item: Any) -> ToolDef:
    where = f"tools[{index}]"
    if not isinstance(item, Mapping) or item.get("type") != "function":
        raise ToolRequestError(f'{where} must be {{"type": "function", "function": {{...}}}}')
    function = item.get("function")
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise ToolRequestError(f"{where}.function must be an object with a string name")
    parameters = function.get("parameters", _EMPTY_OBJECT)
    description = function.get("description") or ""
    if not isinstance(parameters, Mapping):
        raise ToolRequestError(f"{where}.function.parameters must be a JSON Schema object")
    if not isinstance(description, str):
        raise ToolRequestError(f"{where}.function.description must be a string")
    try:
        return ToolDef(function["name"], dict(parameters), description)
    except ToolRequestError as exc:
        raise ToolRequestError(f"{where}.function: {exc}") from None


def _choice(value: Any, names: set[str]) -> tuple[Choice, str | None]:
    if value is None:
        return ("auto" if names else "none"), None
    if value in ("none", "auto", "required"):
        return value, None
    function = value.get("function") if isinstance(value, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(value, Mapping) or value.get("type") != "function" or \
            not isinstance(name, str):
        raise ToolRequestError('tool_choice must be "none", "auto", "required" or '
                               '{"type": "function", "function": {"name": ...}}')
    if name not in names:
        raise ToolRequestError(f"tool_choice names {name!r}, which is not in tools")
    return "function", name


def parse_tool_request(body: Mapping[str, Any]) -> ToolRequest | None:
    """The tools of a chat request body, or None when it offers none."""
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise ToolRequestError("tools must be a list of function tools")
    if len(tools or ()) > MAX_TOOLS:
        raise ToolRequestError(f"tools has {len(tools or ())} entries; at most {MAX_TOOLS}")
    defs = tuple(_tool(i, item) for i, item in enumerate(tools or ()))
    names = {t.name for t in defs}
    if len(names) != len(defs):
        raise ToolRequestError("tools names a function twice; names must be unique")
    choice, function = _choice(body.get("tool_choice"), names)
    if choice in ("required", "function") and not defs:
        raise ToolRequestError(f"tool_choice {choice!r} needs tools")
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise ToolRequestError("parallel_tool_calls must be true or false")
    if not defs:
        return None
    return ToolRequest(defs, choice, function, True if parallel is None else parallel)
