"""W3C Trace Context (``traceparent``) and Baggage (``baggage``), as trajectory ids (pure).

An agent instrumented with OpenTelemetry sends its trace's context on every HTTP call; the
platform makes a trace one trajectory, and names it the same way wherever the trace is seen:
``trajectory_id_of_trace`` gives the trace id's 32 lower-case hex digits, the form OTLP spans
(``serving.ingest.otlp_mapping``), the gateway (``serving.gateway.metadata``) and the SDKs all
use, so a completion served under a trace, the spans exported from it and an editor's events
sent with its id land on one trajectory without any custom id.

Parsing follows the W3C recommendations: a ``traceparent`` that is not valid (wrong length or
characters, version ``ff``, an all-zero id) is ignored as if absent, never guessed at; baggage
members that do not parse are skipped, and the header is read within its limits (8192 bytes,
180 members).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

__all__ = ["BAGGAGE", "MAX_BAGGAGE_BYTES", "TRACEPARENT", "TraceParent", "format_traceparent",
           "parse_baggage", "parse_traceparent", "trajectory_id_of_trace"]

TRACEPARENT = "traceparent"
BAGGAGE = "baggage"
MAX_BAGGAGE_BYTES = 8192
_MAX_BAGGAGE_MEMBERS = 180
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 7230 token: a baggage key


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


def parse_baggage(value: str | None) -> dict[str, str]:
    """The members of a ``baggage`` header (values percent-decoded, properties dropped); a key
    given twice keeps its first value. Malformed members are skipped."""
    members: dict[str, str] = {}
    if not value or len(value.encode()) > MAX_BAGGAGE_BYTES:
        return members
    for member in value.split(",")[:_MAX_BAGGAGE_MEMBERS]:
        pair = member.split(";", 1)[0]
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if sep and _TOKEN.fullmatch(key) and key not in members:
            members[key] = unquote(raw.strip())
    return members
