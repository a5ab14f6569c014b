"""W3C Trace Context (``traceparent``) as a trajectory id, as the whole platform names it.

An agent instrumented with OpenTelemetry sends its trace's context on every HTTP call; the
platform makes a trace one trajectory, named by the trace id's 32 lower-case hex digits
(:func:`trajectory_id_of_trace`): the gateway names a request's completions so, OTLP ingest a
span's events, and this SDK an editor's events, so the three meet without a custom id.

A ``traceparent`` that is not valid (wrong length or characters, version ``ff``, an all-zero
id) is refused, never guessed at, as the W3C recommendation says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["TRACEPARENT", "TraceParent", "format_traceparent", "parse_traceparent",
           "trajectory_id_of_trace"]

TRACEPARENT = "traceparent"
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")


@dataclass(frozen=True)
class TraceParent:
    trace_id: str  # 32 lower-case hex digits, not all zero
    parent_id: str  # 16 lower-case hex digits, not all zero
    sampled: bool


def parse_traceparent(value: str | None) -> TraceParent | None:
    """The trace context of a ``traceparent`` header, or None when it is absent or invalid.
    Version 00 is exactly four fields; a later version may append more, which are ignored."""
    if not value:
        return None
    found = _TRACEPARENT.fullmatch(value.strip())
    if found is None:
        return None
    version, trace_id, parent_id, flags, rest = found.groups()
    if version == "ff" or (version == "00" and rest) or set(trace_id) == {"0"} \
            or set(parent_id) == {"0"}:
        return None
    return TraceParent(trace_id, parent_id, bool(int(flags, 16) & 1))


def format_traceparent(trace_id: str, parent_id: str, sampled: bool = True) -> str:
    """A version-00 ``traceparent`` header value."""
    return f"00-{trace_id}-{parent_id}-{'01' if sampled else '00'}"


def trajectory_id_of_trace(trace_id: bytes | int | str) -> str:
    """The trajectory id of a trace: its id as 32 lower-case hex digits, from OTLP's 16 bytes,
    OpenTelemetry's integer or a hex string (as ``traceparent`` carries it)."""
    if isinstance(trace_id, bytes):
        return trace_id.hex()
    if isinstance(trace_id, int):
        return format(trace_id, "032x")
    return trace_id.lower()
