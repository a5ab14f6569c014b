"""Who a request belongs to: the trajectory, session and user its ``completion.served`` names.

Each field comes from the first place that has it:

- trajectory: header ``X-Rewardstream-Trajectory-Id``, ``metadata.trajectory_id``, the W3C
  ``traceparent`` header's trace id, else a fresh UUIDv7;
- session: header ``X-Rewardstream-Session-Id``, ``metadata.session_id``, else the trajectory;
- user: header ``X-Rewardstream-User``, ``metadata.user``, the OpenAI ``user`` field, the
  ``baggage`` header's ``user.id`` (else ``enduser.id``) for a key that trusts baggage, else
  ``anonymous``.

An id the client names beats the ambient trace, so a client inside a trace can still split its
work; without one, every request of a trace is one trajectory, named as OTLP spans of the same
trace name theirs (``schemas.tracecontext``). ``metadata`` is removed before the backend sees
it. A missing trajectory id gets a fresh UUIDv7; all anonymous requests share one arm. The
trajectory id and where it came from are returned in ``X-Rewardstream-Trajectory-Id`` and
``X-Rewardstream-Trajectory-Source``.

Baggage travels with every call of a trace, so any service upstream may have set it: it is read
only for a key whose entry trusts it (``"trust_baggage": true``), and only for the user. If the
baggage names an org (``rewardstream.org_id``) other than the key's, none of it is used: baggage
never moves a user across orgs, whose events the key's org names anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from schemas.bounds import control_character_problem
from schemas.ids import uuid7
from schemas.tracecontext import (
    BAGGAGE,
    TRACEPARENT,
    parse_baggage,
    parse_traceparent,
    trajectory_id_of_trace,
)
from serving.gateway.errors import RequestMetadataError

__all__ = ["ANONYMOUS", "BAGGAGE_ORG", "BAGGAGE_USERS", "HEADER_SESSION", "HEADER_TRAJECTORY",
           "HEADER_USER", "RequestMetadata", "extract_metadata"]

HEADER_TRAJECTORY = "x-rewardstream-trajectory-id"
HEADER_SESSION = "x-rewardstream-session-id"
HEADER_USER = "x-rewardstream-user"
ANONYMOUS = "anonymous"
BAGGAGE_USERS = ("user.id", "enduser.id")
BAGGAGE_ORG = "rewardstream.org_id"
_LIMITS = {"trajectory_id": 128, "session_id": 128, "user": 256}


@dataclass(frozen=True)
class RequestMetadata:
    trajectory_id: str
    session_id: str
    user: str
    trajectory_source: str = "new"  # header, metadata, traceparent or new
    note: str | None = None  # why baggage was not used, for the client


def _checked(field: str, value: Any, where: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= _LIMITS[field]:
        raise RequestMetadataError(
            f"{field} ({where}) must be a string of 1 to {_LIMITS[field]} characters, got "
            f"{str(value)[:40]!r}", where)
    if (problem := control_character_problem(value)) is not None:
        raise RequestMetadataError(f"{field} ({where}) {problem}", where)
    return value


def _pick(field: str, header: str, headers: Mapping[str, str], meta: Mapping[str, Any]
          ) -> tuple[str, str] | None:
    """(value, where it came from) of the header, else of ``metadata``."""
    if headers.get(header):
        return _checked(field, headers[header], f"header {header}"), "header"
    if meta.get(field) is not None:
        return _checked(field, meta[field], f"metadata.{field}"), "metadata"
    return None


def _baggage_user(headers: Mapping[str, str], org_id: str) -> tuple[str | None, str | None]:
    """(user, note): the user the baggage names, or why it was not used."""
    baggage = parse_baggage(headers.get(BAGGAGE))
    named_org = baggage.get(BAGGAGE_ORG)
    if named_org is not None and named_org != org_id:
        return None, (f"baggage ignored: its {BAGGAGE_ORG} is not this key's org, and baggage "
                      "never crosses an org")
    user = next((baggage[key] for key in BAGGAGE_USERS if baggage.get(key)), None)
    if user is None:
        return None, None
    return _checked("user", user, f"baggage {BAGGAGE_USERS[0]}"), None


def extract_metadata(headers: Mapping[str, str], body: Mapping[str, Any], org_id: str = "",
                     trust_baggage: bool = False) -> RequestMetadata:
    """``headers`` must be case-insensitive (Starlette's are) or use lower-case names;
    ``org_id`` is the key's, ``trust_baggage`` whether the key trusts baggage."""
    meta = body.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise RequestMetadataError("metadata must be a JSON object, e.g. {\"trajectory_id\": ...}",
                                   "metadata")
    trajectory = _pick("trajectory_id", HEADER_TRAJECTORY, headers, meta)
    if trajectory is None and (trace := parse_traceparent(headers.get(TRACEPARENT))):
        trajectory = trajectory_id_of_trace(trace.trace_id), TRACEPARENT
    trajectory_id, source = trajectory or (str(uuid7()), "new")
    session = _pick("session_id", HEADER_SESSION, headers, meta)
    user = _pick("user", HEADER_USER, headers, meta)
    note = None
    if user is None and body.get("user") is not None:
        user = _checked("user", body["user"], "user"), "body"
    if user is None and trust_baggage:
        found, note = _baggage_user(headers, org_id)
        user = (found, BAGGAGE) if found else None
    return RequestMetadata(trajectory_id, session[0] if session else trajectory_id,
                           user[0] if user else ANONYMOUS, source, note)
