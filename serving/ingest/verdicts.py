"""Per-event verdicts: each event is judged on its own, so one bad event never sinks a batch."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from pydantic import ValidationError

from schemas.event_time import DEFAULT_MAX_FUTURE, derive_event_time
from schemas.events import EventAdapter, first_error, parse_event, with_ingest_fields
from serving.ingest.keys import ApiKey

__all__ = [
    "Accepted",
    "REJECTION_KINDS",
    "Rejected",
    "Verdict",
    "judge_event",
    "response_status",
]

# Why an event was rejected; these are the metric labels and the dead-letter "kind" header.
REJECTION_KINDS = ("schema_violation", "type_not_allowed", "event_too_large")


@dataclass(frozen=True, slots=True)
class Accepted:
    index: int
    event_id: UUID
    trajectory_id: str
    stored: bytes  # the envelope as appended to events.raw, ingest fields set


@dataclass(frozen=True, slots=True)
class Rejected:
    index: int
    event_id: str | None
    kind: str
    field: str | None
    reason: str  # names the field and says what is wrong
    original: bytes


Verdict = Accepted | Rejected


def _claimed_event_id(raw: bytes) -> str | None:
    """The event_id a rejected event claims, if it has a readable one (for the client's map)."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    claimed = value.get("event_id") if isinstance(value, dict) else None
    return claimed[:64] if isinstance(claimed, str) else None


def judge_event(
    index: int,
    raw: bytes,
    key: ApiKey,
    received_at: datetime,
    pseudonym: Callable[[str, str], str],
    max_event_bytes: int,
    max_future: timedelta = DEFAULT_MAX_FUTURE,
) -> Verdict:
    """Accept ``raw`` as the envelope to store, or reject it with the field at fault."""
    if len(raw) > max_event_bytes:
        return Rejected(index, _claimed_event_id(raw[:4096]), "event_too_large", None,
                        f"the event is {len(raw)} bytes, over the {max_event_bytes} byte cap",
                        raw)
    try:
        event = parse_event(raw)
    except ValidationError as exc:
        field, message = first_error(exc)
        return Rejected(index, _claimed_event_id(raw), "schema_violation", field,
                        f"{field}: {message}", raw)
    if not key.allows(event.type):
        return Rejected(index, str(event.event_id), "type_not_allowed", "type",
                        f"type: API key {key.name!r} may not send {event.type!r} events", raw)
    derived = derive_event_time(event.occurred_at, event.sent_at, received_at, max_future)
    stored = with_ingest_fields(
        event, org_id=key.org_id, user=pseudonym(key.org_id, event.user), received_at=received_at,
        event_time=derived.event_time, clock_skew_ms=derived.clock_skew_ms,
    )
    return Accepted(index, event.event_id, event.trajectory_id, EventAdapter.dump_json(stored))


def response_status(accepted_or_duplicate: int, rejections: Sequence[Rejected]) -> int:
    """200 when nothing was rejected; 403 when the key may send none of the batch's events
    (every rejection is ``type_not_allowed`` and nothing else got in); 207 otherwise."""
    if not rejections:
        return 200
    if accepted_or_duplicate == 0 and all(r.kind == "type_not_allowed" for r in rejections):
        return 403
    return 207
