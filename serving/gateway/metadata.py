"""Who a request belongs to: the trajectory, session and user its ``completion.served`` names.

Clients say it in any of three places, first match wins per field:
1. headers ``X-Rewardstream-Trajectory-Id``, ``X-Rewardstream-Session-Id``,
   ``X-Rewardstream-User``;
2. a ``metadata`` object in the body: ``{"trajectory_id": ..., "session_id": ..., "user": ...}``
   (the gateway removes it before forwarding);
3. the OpenAI ``user`` field (user only).
A missing trajectory id gets a fresh UUIDv7 (returned in the ``X-Rewardstream-Trajectory-Id``
response header so later events can name it); a missing session id is the trajectory id; a
missing user is ``anonymous``, and all anonymous requests share one arm.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from schemas.bounds import control_character_problem
from schemas.ids import uuid7
from serving.gateway.errors import RequestMetadataError

__all__ = ["ANONYMOUS", "HEADER_SESSION", "HEADER_TRAJECTORY", "HEADER_USER", "RequestMetadata",
           "extract_metadata"]

HEADER_TRAJECTORY = "x-rewardstream-trajectory-id"
HEADER_SESSION = "x-rewardstream-session-id"
HEADER_USER = "x-rewardstream-user"
ANONYMOUS = "anonymous"
_LIMITS = {"trajectory_id": 128, "session_id": 128, "user": 256}


@dataclass(frozen=True)
class RequestMetadata:
    trajectory_id: str
    session_id: str
    user: str


def _pick(field: str, header: str, headers: Mapping[str, str], meta: Mapping[str, Any],
          fallback: Any = None) -> str | None:
    value = headers.get(header) or meta.get(field) or fallback
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= _LIMITS[field]:
        raise RequestMetadataError(
            f"{field} (header {header} or metadata.{field}) must be a string of 1 to "
            f"{_LIMITS[field]} characters, got {str(value)[:40]!r}"
        )
    if (problem := control_character_problem(value)) is not None:
        raise RequestMetadataError(f"{field} (header {header} or metadata.{field}) {problem}")
    return value


def extract_metadata(headers: Mapping[str, str], body: Mapping[str, Any]) -> RequestMetadata:
    """``headers`` must be case-insensitive (Starlette's are) or use lower-case names."""
    meta = body.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise RequestMetadataError("metadata must be a JSON object, e.g. {\"trajectory_id\": ...}")
    trajectory = _pick("trajectory_id", HEADER_TRAJECTORY, headers, meta) or str(uuid7())
    session = _pick("session_id", HEADER_SESSION, headers, meta) or trajectory
    user = _pick("user", HEADER_USER, headers, meta, body.get("user")) or ANONYMOUS
    return RequestMetadata(trajectory, session, user)
