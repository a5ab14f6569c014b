"""OpenAI's error shape, spoken by the gateway and the torch engine alike (pure).

Every refusal is ``{"error": {"message", "type", "param", "code"}}``: ``type`` is
``invalid_request_error`` for anything the client can fix (400, and 404 for an unknown model),
``param`` names the request field at fault (``stop``, ``messages.2.content``, ``tools[0]``) so
clients and people see what to change, and ``code`` says which kind of fault it is:
``invalid_value`` (a value of the wrong type or out of range), ``unsupported_parameter`` (a
parameter OpenAI defines that this server does not implement, refused rather than ignored),
``unsupported_value`` (a value of a supported parameter that is not implemented, e.g. ``n: 2``),
``model_not_found``; null where none applies.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from schemas.errors import RewardstreamError
from serving.request_body import invalid_field, validation_message

__all__ = ["INVALID_REQUEST", "InvalidRequest", "error_body", "from_validation_errors",
           "tool_request_param"]

INVALID_REQUEST = "invalid_request_error"
_TOOL_PARAM = re.compile(r"tool_choice|parallel_tool_calls|tools(\[\d+\](\.function"
                         r"(\.(parameters|description))?)?)?")


class InvalidRequest(RewardstreamError):
    """A request the client must change: answered 400 (or ``status_code``) in OpenAI's shape,
    naming the parameter."""

    status_code = 400

    def __init__(self, message: str, param: str | None = None,
                 code: str | None = "invalid_value") -> None:
        super().__init__(message)
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return error_body(str(self), INVALID_REQUEST, self.param, self.code)


def error_body(message: str, kind: str, param: str | None = None,
               code: str | int | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def from_validation_errors(errors: Sequence[Any]) -> InvalidRequest:
    """The refusal of a body by the first of pydantic's validation errors, naming its field; a
    parameter the API does not define is ``unsupported_parameter``, as OpenAI answers it."""
    param, _ = invalid_field(errors)
    if errors and errors[0].get("type") == "extra_forbidden":
        return InvalidRequest(f"{param}: unrecognized request parameter; this server does not "
                              "implement it, so it is refused rather than ignored", param,
                              "unsupported_parameter")
    return InvalidRequest(validation_message(errors), param)


def tool_request_param(message: str) -> str:
    """The field a :class:`schemas.tooldefs.ToolRequestError` message starts with (they all
    name it first); ``tools`` when it names none."""
    found = _TOOL_PARAM.match(message)
    return found.group() if found else "tools"
