"""What the spans the mapping turns into events say, read from their attributes (pure):
attribute values as JSON values, a tool execution's call and an agent run's end
(``serving.ingest.otlp_mapping`` decides which span makes which)."""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Mapping
from typing import Any, get_args

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from schemas.events import ToolErrorKind

__all__ = ["AGENT", "ERROR_TYPE", "OPERATION", "OUTCOME", "PROVIDERS", "RESPONSE_ID", "TASK_FAMILY",
           "TOOL_CALL_ID", "TOOL_NAME", "TURNS", "attributes", "tool_called",
           "trajectory_ended"]

OPERATION = "gen_ai.operation.name"
TOOL_NAME, TOOL_CALL_ID, ERROR_TYPE = "gen_ai.tool.name", "gen_ai.tool.call.id", "error.type"
PROVIDERS = ("gen_ai.provider.name", "gen_ai.system")  # the latest conventions, then older
RESPONSE_ID = "gen_ai.response.id"
AGENT = "invoke_agent"
OUTCOME = "rewardstream.trajectory.outcome"
TURNS = "rewardstream.trajectory.turns"
TASK_FAMILY = "rewardstream.trajectory.task_family"
_ERROR_KINDS = frozenset(get_args(ToolErrorKind))


def _scalar(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind in ("string_value", "bool_value", "int_value"):
        return getattr(value, kind)
    if kind == "double_value":  # JSON has no NaN: a non-finite number is refused as a string
        return value.double_value if math.isfinite(value.double_value) else str(value.double_value)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    if kind == "array_value":  # no field takes one: a short stand-in the schema refuses
        return {"arrayValue": len(value.array_value.values)}
    if kind == "kvlist_value":
        return {"kvlistValue": len(value.kvlist_value.values)}
    return None


def attributes(pairs: Iterable[KeyValue], wanted: frozenset[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for pair in pairs:  # a key given twice: the first counts
        if pair.key in wanted and pair.key not in found:
            found[pair.key] = _scalar(pair.value)
    return found


def _error_kind(error_type: Any) -> str:
    if isinstance(error_type, str):
        if error_type in _ERROR_KINDS:
            return error_type
        if "timeout" in error_type.lower():
            return "timeout"
    return "tool_error"


def tool_called(span: Span, attrs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    exceptions = [attributes(e.attributes, frozenset({"exception.type"}))
                  for e in span.events if e.name == "exception"]
    failed = span.status.code == Status.STATUS_CODE_ERROR or ERROR_TYPE in attrs or exceptions
    payload: dict[str, Any] = {
        "call_id": attrs.get(TOOL_CALL_ID, span.span_id.hex()),
        "valid": not failed,
        "duration_ms": (span.end_time_unix_nano - span.start_time_unix_nano) / 1e6,
    }
    if TOOL_NAME in attrs:
        payload["tool"] = attrs[TOOL_NAME]
    if failed:
        error_type = attrs.get(ERROR_TYPE) or next(
            (e["exception.type"] for e in exceptions if "exception.type" in e), None)
        payload["error_kind"] = _error_kind(error_type)
    sources = {"payload.tool": TOOL_NAME, "payload.error_kind": ERROR_TYPE,
               "payload.call_id": TOOL_CALL_ID if TOOL_CALL_ID in attrs else "spanId",
               "payload.duration_ms": "startTimeUnixNano"}
    return payload, sources


def trajectory_ended(span: Span,
                      attrs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    failed = span.status.code == Status.STATUS_CODE_ERROR
    payload: dict[str, Any] = {"outcome": attrs.get(OUTCOME, "error" if failed else "completed"),
               "turns": attrs.get(TURNS, 0)}
    if TASK_FAMILY in attrs:
        payload["task_family"] = attrs[TASK_FAMILY]
    sources = {"payload.outcome": OUTCOME, "payload.turns": TURNS,
               "payload.task_family": TASK_FAMILY}
    return payload, sources
