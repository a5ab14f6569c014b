"""W3C Trace Context and Baggage as the platform reads them (pure).

The trace id as a trajectory id, and ``traceparent`` itself, are the telemetry SDK's
(``rewardstream_telemetry.tracecontext``), so that producers and services name a trace alike:
the gateway (``serving.gateway.metadata``) and OTLP ingest (``serving.ingest.otlp_mapping``)
use them from here. ``baggage`` is read by the gateway only: its members that do not parse are
skipped, and the header is read within its limits (8192 bytes, 180 members).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from rewardstream_telemetry.tracecontext import (
    TRACEPARENT,
    TraceParent,
    format_traceparent,
    parse_traceparent,
    trajectory_id_of_trace,
)

__all__ = ["BAGGAGE", "MAX_BAGGAGE_BYTES", "TRACEPARENT", "TraceParent", "format_traceparent",
           "parse_baggage", "parse_traceparent", "trajectory_id_of_trace"]

BAGGAGE = "baggage"
MAX_BAGGAGE_BYTES = 8192
_MAX_BAGGAGE_MEMBERS = 180
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 7230 token: a baggage key


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
